package capi

// API 1.1: struct versioning helpers, the model's vocabulary and chat
// template, session reset and save/restore, logging, loading from a file
// descriptor.

/*
#cgo CFLAGS: -I${SRCDIR}/../../../../include
#define EDGELLM_NO_PROTOTYPES 1
#include <stdlib.h>
#include <string.h>
#include "edgellm.h"
#include "capi.h"
*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"

	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/kernels"
)

// initSized writes the defaults def (a full struct of this library) into
// exactly size bytes at p and sets the size field (every struct starts with
// uint32_t size). A size not in known writes nothing.
func initSized(name string, p unsafe.Pointer, size C.uint32_t, def unsafe.Pointer, known ...C.size_t) C.int {
	if p == nil {
		return done(errorf(statusInvalidArgument, "%s_init: NULL", name), 0)
	}
	if err := checkSize(name, size, known...); err != nil {
		return done(err, 0)
	}
	*(*C.uint32_t)(def) = size
	C.memcpy(p, def, C.size_t(size))
	return done(nil, 0)
}

// readIn copies the caller's struct (size bytes, already checked) over a
// full struct of this library holding the defaults: fields an older caller
// does not have keep them.
func readIn(dst, src unsafe.Pointer, size C.uint32_t) {
	C.memcpy(dst, src, C.size_t(size))
}

// notInCallback refuses a call that would wait for an engine from inside a
// library callback on this thread: the generation below it holds the engine.
func notInCallback(fn string) error {
	if C.edgellm_in_callback() != 0 {
		return errorf(statusBusy, "%s: called from inside a token or log callback, where it would wait for the engine the running generation holds", fn)
	}
	return nil
}

func newEngineObj(eng host.Engine) *engineObj {
	in := eng.Info()
	return &engineObj{eng: eng, strs: engineStrings{
		arch: C.CString(in.Arch), name: C.CString(in.Name), fileType: C.CString(in.FileType),
		engine: C.CString(eng.Name()), chatTemplate: C.CString(in.ChatTemplate),
	}}
}

func (e *engineObj) freeStrings() {
	for _, p := range []*C.char{e.strs.arch, e.strs.name, e.strs.fileType, e.strs.engine, e.strs.chatTemplate} {
		C.free(unsafe.Pointer(p))
	}
	e.strs = engineStrings{}
}

// fdModelPath is a path the engines can open for the model at [offset,
// offset+length) of fd: the descriptor itself through /proc/self/fd when
// the range is the whole file, else a copy of the range in an unlinked
// temporary file (cleanup closes it once the model is loaded: a mapping
// keeps its pages).
func fdModelPath(fd int, offset, length int64) (string, func(), error) {
	// A duplicate: an *os.File closes its descriptor, the caller's is theirs.
	d, err := syscall.Dup(fd)
	if err != nil {
		return "", nil, errorf(statusInvalidArgument, "edgellm_engine_load: model_fd %d: %v", fd, err)
	}
	f := os.NewFile(uintptr(d), "model_fd")
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", nil, errorf(statusIO, "edgellm_engine_load: model_fd %d: %v", fd, err)
	}
	if offset < 0 || length < 0 || offset+length > fi.Size() {
		return "", nil, errorf(statusInvalidArgument, "edgellm_engine_load: model_offset %d + model_length %d outside the file's %d bytes", offset, length, fi.Size())
	}
	if length == 0 {
		length = fi.Size() - offset
	}
	if offset == 0 && length == fi.Size() {
		return fmt.Sprintf("/proc/self/fd/%d", fd), func() {}, nil
	}
	dir := os.TempDir()
	if _, err := os.Stat(dir); err != nil {
		dir = "/data/local/tmp"
	}
	tmp, err := os.CreateTemp(dir, "edgellm-model-*.gguf")
	if err != nil {
		return "", nil, errorf(statusIO, "edgellm_engine_load: a temporary copy of the model range: %v", err)
	}
	os.Remove(tmp.Name()) // unlinked: gone when the last descriptor and mapping are
	if _, err := io.Copy(tmp, io.NewSectionReader(f, offset, length)); err != nil {
		tmp.Close()
		return "", nil, errorf(statusIO, "edgellm_engine_load: copying the model range: %v", err)
	}
	return filepath.Join("/proc/self/fd", fmt.Sprint(tmp.Fd())), func() { tmp.Close() }, nil
}

// ---- model ----

//export edgellm_model_info_init_sized
func edgellm_model_info_init_sized(mi *C.struct_edgellm_model_info, size C.uint32_t) C.int {
	d := C.struct_edgellm_model_info{size: C.sizeof_struct_edgellm_model_info}
	return initSized("edgellm_model_info", unsafe.Pointer(mi), size, unsafe.Pointer(&d), C.sizeof_struct_edgellm_model_info)
}

// lockEngine checks the call may wait for engine h and locks it; the
// caller unlocks e.mu.
func lockEngine(fn string, h C.edgellm_engine) (*engineObj, error) {
	e, err := get[*engineObj](uint64(h), kindEngine)
	if err != nil {
		return nil, err
	}
	if err := notInCallback(fn); err != nil {
		return nil, err
	}
	e.mu.Lock()
	return e, nil
}

//export edgellm_model_info
func edgellm_model_info(h C.edgellm_engine, out *C.struct_edgellm_model_info) C.int {
	err := func() error {
		if out == nil {
			return errorf(statusInvalidArgument, "edgellm_model_info: out must not be NULL")
		}
		if err := checkSize("edgellm_model_info", out.size, C.sizeof_struct_edgellm_model_info); err != nil {
			return err
		}
		e, err := lockEngine("edgellm_model_info", h)
		if err != nil {
			return err
		}
		defer e.mu.Unlock()
		in, v := e.eng.Info(), e.eng.Vocab()
		mi := C.struct_edgellm_model_info{
			size: out.size, n_vocab: C.int32_t(v.NVocab()), n_ctx_train: C.int32_t(in.NCtxTrain),
			n_embd: C.int32_t(in.NEmbd), n_layer: C.int32_t(in.NLayer), n_head: C.int32_t(in.NHead), n_head_kv: C.int32_t(in.NHeadKV),
			bos: C.int32_t(v.BOS()), eos: C.int32_t(v.EOS()), file_bytes: C.int64_t(in.FileBytes), n_params: C.int64_t(in.ParamCount),
			arch: e.strs.arch, name: e.strs.name, file_type: e.strs.fileType, engine: e.strs.engine, chat_template: e.strs.chatTemplate,
		}
		C.memcpy(unsafe.Pointer(out), unsafe.Pointer(&mi), C.size_t(out.size))
		return nil
	}()
	return done(err, statusInternal)
}

//export edgellm_tokenize
func edgellm_tokenize(h C.edgellm_engine, text *C.char, flags C.int32_t, tokens *C.int32_t, nMax C.int32_t, nOut *C.int32_t) C.int {
	err := func() error {
		if text == nil || nOut == nil || nMax < 0 || (tokens == nil && nMax > 0) {
			return errorf(statusInvalidArgument, "edgellm_tokenize: text and n_out must not be NULL, tokens only with n_max 0 (n_max %d)", nMax)
		}
		const known = C.EDGELLM_TOKENIZE_ADD_SPECIAL | C.EDGELLM_TOKENIZE_PARSE_SPECIAL
		if flags&^known != 0 {
			return errorf(statusInvalidArgument, "edgellm_tokenize: unknown bits %#x in flags", flags&^known)
		}
		e, err := lockEngine("edgellm_tokenize", h)
		if err != nil {
			return err
		}
		toks, err := tokenize(e.eng.Vocab(), C.GoString(text), flags&C.EDGELLM_TOKENIZE_ADD_SPECIAL != 0, flags&C.EDGELLM_TOKENIZE_PARSE_SPECIAL != 0)
		e.mu.Unlock()
		if err != nil {
			return errorf(statusInvalidArgument, "edgellm_tokenize: %v", err)
		}
		*nOut = C.int32_t(len(toks))
		if len(toks) > int(nMax) {
			return errorf(statusTooSmall, "edgellm_tokenize: %d tokens, room for %d", len(toks), nMax)
		}
		if len(toks) > 0 {
			copy(unsafe.Slice((*int32)(unsafe.Pointer(tokens)), len(toks)), toks)
		}
		return nil
	}()
	return done(err, statusInternal)
}

// putText copies text into buf (cap bytes) with a NUL, or says how much is
// needed.
func putText(fn string, text []byte, buf *C.char, capacity C.size_t, nOut *C.size_t) error {
	*nOut = C.size_t(len(text))
	if C.size_t(len(text)) >= capacity {
		return errorf(statusTooSmall, "%s: %d bytes and a NUL, room for %d", fn, len(text), capacity)
	}
	dst := unsafe.Slice((*byte)(unsafe.Pointer(buf)), len(text)+1)
	copy(dst, text)
	dst[len(text)] = 0
	return nil
}

//export edgellm_detokenize
func edgellm_detokenize(h C.edgellm_engine, tokens *C.int32_t, n C.int32_t, buf *C.char, capacity C.size_t, nOut *C.size_t) C.int {
	err := func() error {
		if nOut == nil || n < 0 || (tokens == nil && n > 0) || (buf == nil && capacity > 0) {
			return errorf(statusInvalidArgument, "edgellm_detokenize: n_out must not be NULL, tokens only with n 0, buf only with cap 0")
		}
		e, err := lockEngine("edgellm_detokenize", h)
		if err != nil {
			return err
		}
		v := e.eng.Vocab()
		var text []byte
		for _, t := range unsafe.Slice((*int32)(unsafe.Pointer(tokens)), int(n)) {
			if t < 0 || int(t) >= v.NVocab() {
				e.mu.Unlock()
				return errorf(statusInvalidArgument, "edgellm_detokenize: token %d outside the vocabulary (0..%d)", t, v.NVocab()-1)
			}
			text = v.Piece(text, t)
		}
		e.mu.Unlock()
		return putText("edgellm_detokenize", text, buf, capacity, nOut)
	}()
	return done(err, statusInternal)
}

//export edgellm_chat_apply
func edgellm_chat_apply(h C.edgellm_engine, tmpl *C.char, msgs *C.struct_edgellm_chat_message, nMsgs C.int32_t,
	addAssistant C.int32_t, buf *C.char, capacity C.size_t, nOut *C.size_t) C.int {
	err := func() error {
		if nOut == nil || nMsgs < 0 || (msgs == nil && nMsgs > 0) || (buf == nil && capacity > 0) {
			return errorf(statusInvalidArgument, "edgellm_chat_apply: n_out must not be NULL, msgs only with n_msgs 0, buf only with cap 0")
		}
		var ms []host.ChatMessage
		for i, m := range unsafe.Slice(msgs, int(nMsgs)) {
			if m.role == nil || m.content == nil {
				return errorf(statusInvalidArgument, "edgellm_chat_apply: message %d has a NULL role or content", i)
			}
			ms = append(ms, host.ChatMessage{Role: C.GoString(m.role), Content: C.GoString(m.content)})
		}
		e, err := lockEngine("edgellm_chat_apply", h)
		if err != nil {
			return err
		}
		t := e.eng.Info().ChatTemplate
		e.mu.Unlock()
		if tmpl != nil {
			t = C.GoString(tmpl)
		}
		out, err := host.ApplyChatTemplate(t, ms, addAssistant != 0)
		if err != nil {
			return errorf(statusInvalidArgument, "edgellm_chat_apply: %v", err)
		}
		return putText("edgellm_chat_apply", []byte(out), buf, capacity, nOut)
	}()
	return done(err, statusInternal)
}

// ---- session reset, save, restore ----

// lockSession gets session h for a call that reads or replaces its
// context: refused from a callback, while it generates or once freed. The
// session counts as busy until unlock (a generation, a free or a policy
// attach meanwhile is refused, as during a generation), and its engine is
// locked.
func lockSession(fn string, h C.edgellm_session) (s *sessionObj, unlock func(), err error) {
	if s, err = get[*sessionObj](uint64(h), kindSession); err != nil {
		return nil, nil, err
	}
	if err := notInCallback(fn); err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return nil, nil, errorf(statusBadHandle, "%s: the session was freed", fn)
	case s.busy.Load():
		s.mu.Unlock()
		return nil, nil, errorf(statusBusy, "%s: the session is generating", fn)
	}
	s.busy.Store(true)
	s.mu.Unlock()
	s.eng.mu.Lock()
	s.used.Store(int32(s.sess.Len()))
	return s, func() {
		s.eng.mu.Unlock()
		s.mu.Lock()
		s.busy.Store(false)
		s.mu.Unlock()
	}, nil
}

//export edgellm_session_reset
func edgellm_session_reset(h C.edgellm_session) C.int {
	err := func() error {
		s, unlock, err := lockSession("edgellm_session_reset", h)
		if err != nil {
			return err
		}
		defer unlock()
		if err := s.sess.Truncate(0); err != nil {
			return err
		}
		s.toks, s.toksLost = s.toks[:0], false
		return nil
	}()
	return done(err, statusInternal)
}

// A saved state: magic, vocabulary size, token count, tokens (little endian).
const stateMagic = "EDGLST01"

//export edgellm_session_save
func edgellm_session_save(h C.edgellm_session, buf unsafe.Pointer, capacity C.size_t, nOut *C.size_t) C.int {
	err := func() error {
		if nOut == nil || (buf == nil && capacity > 0) {
			return errorf(statusInvalidArgument, "edgellm_session_save: n_out must not be NULL, buf only with cap 0")
		}
		s, unlock, err := lockSession("edgellm_session_save", h)
		if err != nil {
			return err
		}
		n := s.sess.Len()
		if n > len(s.toks) || s.toksLost {
			unlock()
			return errorf(statusInternal, "edgellm_session_save: the session holds %d positions but only %d tokens are known", n, len(s.toks))
		}
		toks := s.toks[:n]
		b := make([]byte, 0, 16+4*len(toks))
		b = append(b, stateMagic...)
		b = binary.LittleEndian.AppendUint32(b, uint32(s.eng.eng.Vocab().NVocab()))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(toks)))
		for _, t := range toks {
			b = binary.LittleEndian.AppendUint32(b, uint32(t))
		}
		unlock()
		*nOut = C.size_t(len(b))
		if C.size_t(len(b)) > capacity {
			return errorf(statusTooSmall, "edgellm_session_save: %d bytes, room for %d", len(b), capacity)
		}
		copy(unsafe.Slice((*byte)(buf), len(b)), b)
		return nil
	}()
	return done(err, statusInternal)
}

//export edgellm_session_restore
func edgellm_session_restore(h C.edgellm_session, buf unsafe.Pointer, n C.size_t) C.int {
	err := func() error {
		if buf == nil {
			return errorf(statusInvalidArgument, "edgellm_session_restore: buf must not be NULL")
		}
		b := C.GoBytes(buf, C.int(min(n, 1<<30)))
		if len(b) < 16 || string(b[:8]) != stateMagic {
			return errorf(statusInvalidArgument, "edgellm_session_restore: not a saved session state")
		}
		nv, nt := binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint32(b[12:])
		if uint64(len(b)) != 16+4*uint64(nt) {
			return errorf(statusInvalidArgument, "edgellm_session_restore: %d bytes for %d tokens", len(b), nt)
		}
		s, unlock, err := lockSession("edgellm_session_restore", h)
		if err != nil {
			return err
		}
		defer unlock()
		if v := s.eng.eng.Vocab().NVocab(); int(nv) != v {
			return errorf(statusInvalidArgument, "edgellm_session_restore: a state of a %d-token vocabulary, this model has %d", nv, v)
		}
		if int(nt) > s.cfg.NCtx {
			return errorf(statusInvalidArgument, "edgellm_session_restore: %d tokens, the session's context is %d", nt, s.cfg.NCtx)
		}
		toks := make([]int32, nt)
		for i := range toks {
			toks[i] = int32(binary.LittleEndian.Uint32(b[16+4*i:]))
			if toks[i] < 0 || toks[i] >= int32(nv) {
				return errorf(statusInvalidArgument, "edgellm_session_restore: token %d outside the vocabulary", toks[i])
			}
		}
		if err := s.sess.Truncate(0); err != nil {
			return err
		}
		s.toks, s.toksLost = s.toks[:0], false
		const batch = 256
		for i := 0; i < len(toks); i += batch {
			if err := s.sess.Decode(toks[i:min(i+batch, len(toks))], host.LogitsLast); err != nil {
				s.sess.Truncate(0)
				return fmt.Errorf("edgellm_session_restore: %w", err)
			}
		}
		s.toks = append(s.toks, toks...)
		return nil
	}()
	return done(err, statusInternal)
}

// ---- logging ----

//export edgellm_log_set
func edgellm_log_set(cb C.edgellm_log_callback, user unsafe.Pointer) C.int {
	C.edgellm_set_log_callback(cb, user)
	if cb == nil {
		kernels.SetLogFunc(nil)
		host.SetLog(os.Stderr, logLevel)
	} else {
		kernels.SetLogFunc(logToC)
	}
	return done(nil, 0)
}

// logLevel is the level edgellm_log_level set last (the library's default
// is errors only).
var logLevel = host.LogError

//export edgellm_log_level
func edgellm_log_level(level C.int32_t) C.int {
	levels := map[C.int32_t]host.LogLevel{
		C.EDGELLM_LOG_DEBUG: host.LogDebug, C.EDGELLM_LOG_INFO: host.LogInfo, C.EDGELLM_LOG_WARN: host.LogWarn,
		C.EDGELLM_LOG_ERROR: host.LogError, C.EDGELLM_LOG_NONE: host.LogNone,
	}
	l, ok := levels[level]
	if !ok {
		return done(errorf(statusInvalidArgument, "edgellm_log_level: %d is not EDGELLM_LOG_DEBUG (1) .. EDGELLM_LOG_NONE (5)", level), 0)
	}
	logLevel = l
	kernels.SetLogLevel(kernels.LogLevel(level))
	return done(nil, 0)
}

// logToC passes one llama.cpp/ggml message to the app's callback.
func logToC(level kernels.LogLevel, text []byte) {
	cs := C.CString(string(text))
	C.edgellm_call_log_callback(C.int32_t(level), cs)
	C.free(unsafe.Pointer(cs))
}

// logNotices passes the library's own notices (engine fallback) to the log
// callback at INFO, else drops them.
type logNotices struct{}

func (logNotices) Write(b []byte) (int, error) {
	if kernels.GetLogLevel() <= kernels.LogInfo {
		cs := C.CString(string(b))
		C.edgellm_call_log_callback(C.EDGELLM_LOG_INFO, cs)
		C.free(unsafe.Pointer(cs))
	}
	return len(b), nil
}
