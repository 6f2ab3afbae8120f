package capi

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
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
	"unsafe"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host"
)

// testGenerateDelay is a pause between looking up the session and claiming
// it in edgellm_generate, set by the environment variable
// EDGELLM_CAPI_TEST_GENERATE_DELAY_US for capi_test.c's race of a
// generation against edgellm_session_free (which without the pause meets
// the window a few times in a thousand). Unset in apps.
var testGenerateDelay = func() time.Duration {
	us, _ := strconv.Atoi(os.Getenv("EDGELLM_CAPI_TEST_GENERATE_DELAY_US"))
	return time.Duration(us) * time.Microsecond
}()

// goString copies a C string; NULL is "".
func goString(s *C.char) string {
	if s == nil {
		return ""
	}
	return C.GoString(s)
}

var buildInfo = C.CString(fmt.Sprintf("edgellm %s, llama.cpp %s", host.Build().Version, host.Build().LlamaCommit)) // static, never freed

//export edgellm_api_version
func edgellm_api_version(major, minor *C.int32_t) C.int {
	if major != nil {
		*major = C.EDGELLM_API_VERSION_MAJOR
	}
	if minor != nil {
		*minor = C.EDGELLM_API_VERSION_MINOR
	}
	return done(nil, statusOK)
}

//export edgellm_build_info
func edgellm_build_info() *C.char { return buildInfo }

// ---- engine ----

func defaultEngineParams() C.struct_edgellm_engine_params {
	return C.struct_edgellm_engine_params{size: C.sizeof_struct_edgellm_engine_params, model_fd: -1}
}

// edgellm_engine_params_init is API 1.0's, for programs built against the
// 1.0 header: it writes the 1.0 struct, whatever this library's is.
//
//export edgellm_engine_params_init
func edgellm_engine_params_init(p *C.struct_edgellm_engine_params) {
	edgellm_engine_params_init_sized(p, C.size_engine_params_v1_0)
}

//export edgellm_engine_params_init_sized
func edgellm_engine_params_init_sized(p *C.struct_edgellm_engine_params, size C.uint32_t) C.int {
	d := defaultEngineParams()
	return initSized("edgellm_engine_params", unsafe.Pointer(p), size, unsafe.Pointer(&d), C.size_engine_params_v1_0, C.sizeof_struct_edgellm_engine_params)
}

//export edgellm_engine_load
func edgellm_engine_load(p *C.struct_edgellm_engine_params, out *C.edgellm_engine) C.int {
	err := func() error {
		if p == nil || out == nil {
			return errorf(statusInvalidArgument, "edgellm_engine_load: params and out must not be NULL")
		}
		if err := notInCallback("edgellm_engine_load"); err != nil {
			return err
		}
		if err := checkSize("edgellm_engine_params", p.size, C.size_engine_params_v1_0, C.sizeof_struct_edgellm_engine_params); err != nil {
			return err
		}
		d := defaultEngineParams()
		readIn(unsafe.Pointer(&d), unsafe.Pointer(p), p.size)
		p = &d
		opts := host.LoadOptions{Engine: goString(p.engine), StartTier: int(p.start_tier), Notices: logNotices{}}
		if p.n_tiers < 0 || (p.n_tiers > 0 && p.tiers == nil) {
			return errorf(statusInvalidArgument, "edgellm_engine_load: n_tiers %d with tiers %p", p.n_tiers, p.tiers)
		}
		if p.n_tiers > 0 {
			for _, t := range unsafe.Slice(p.tiers, int(p.n_tiers)) {
				if t == nil {
					return errorf(statusInvalidArgument, "edgellm_engine_load: a NULL tier path")
				}
				opts.Tiers = append(opts.Tiers, C.GoString(t))
			}
		} else if p.model_path == nil && p.model_fd < 0 {
			return errorf(statusInvalidArgument, "edgellm_engine_load: model_path is NULL, model_fd is -1 and there is no tier ladder")
		}
		path := goString(p.model_path)
		if p.n_tiers == 0 && p.model_fd >= 0 {
			fp, cleanup, err := fdModelPath(int(p.model_fd), int64(p.model_offset), int64(p.model_length))
			if err != nil {
				return err
			}
			defer cleanup()
			path = fp
		}
		eng, err := host.Load(path, opts)
		if err != nil {
			return err
		}
		*out = C.edgellm_engine(handles.add(kindEngine, newEngineObj(eng)))
		return nil
	}()
	return done(err, statusModel)
}

//export edgellm_engine_free
func edgellm_engine_free(h C.edgellm_engine) C.int {
	if err := notInCallback("edgellm_engine_free"); err != nil {
		return done(err, 0)
	}
	e, err := remove(uint64(h), kindEngine, func(e *engineObj) error {
		if n := e.sessions.Load(); n > 0 {
			return errorf(statusBusy, "edgellm_engine_free: %d session(s) still open; free them first", n)
		}
		return nil
	})
	if err == nil {
		e.mu.Lock()
		err = e.eng.Close()
		e.mu.Unlock()
		e.freeStrings()
	}
	return done(err, statusInternal)
}

// ---- session ----

// edgellm_session_params_init is API 1.0's (the struct has not changed).
//
//export edgellm_session_params_init
func edgellm_session_params_init(p *C.struct_edgellm_session_params) {
	edgellm_session_params_init_sized(p, C.sizeof_struct_edgellm_session_params)
}

//export edgellm_session_params_init_sized
func edgellm_session_params_init_sized(p *C.struct_edgellm_session_params, size C.uint32_t) C.int {
	d := C.struct_edgellm_session_params{size: C.sizeof_struct_edgellm_session_params}
	return initSized("edgellm_session_params", unsafe.Pointer(p), size, unsafe.Pointer(&d), C.sizeof_struct_edgellm_session_params)
}

//export edgellm_session_new
func edgellm_session_new(h C.edgellm_engine, p *C.struct_edgellm_session_params, out *C.edgellm_session) C.int {
	err := func() error {
		e, err := get[*engineObj](uint64(h), kindEngine)
		if err != nil {
			return err
		}
		if p == nil || out == nil {
			return errorf(statusInvalidArgument, "edgellm_session_new: params and out must not be NULL")
		}
		if err := notInCallback("edgellm_session_new"); err != nil {
			return err
		}
		if err := checkSize("edgellm_session_params", p.size, C.sizeof_struct_edgellm_session_params); err != nil {
			return err
		}
		if p.n_ctx < 0 || p.n_threads < 0 {
			return errorf(statusInvalidArgument, "edgellm_session_new: n_ctx %d and n_threads %d must not be negative", p.n_ctx, p.n_threads)
		}
		cfg := host.SessionConfig{NCtx: int(p.n_ctx), Threads: int(p.n_threads)}
		if p.kv_type != nil {
			if cfg.KVType, err = host.ParseKVType(C.GoString(p.kv_type)); err != nil {
				return errorf(statusInvalidArgument, "edgellm_session_new: %v", err)
			}
		}
		if cfg, err = cfg.Fit(e.eng.Info().NCtxTrain); err != nil { // the one context rule
			return errorf(statusInvalidArgument, "edgellm_session_new: n_ctx: %v", err)
		}
		e.mu.Lock()
		sess, err := e.eng.NewSession(cfg)
		e.mu.Unlock()
		if err != nil {
			return errorf(statusInvalidArgument, "edgellm_session_new: %v", err)
		}
		e.sessions.Add(1)
		s := &sessionObj{eng: e, sess: sess, cfg: cfg, cbuf: &cbuffer{}}
		*out = C.edgellm_session(handles.add(kindSession, s))
		return nil
	}()
	return done(err, statusInternal)
}

//export edgellm_session_free
func edgellm_session_free(h C.edgellm_session) C.int {
	if err := notInCallback("edgellm_session_free"); err != nil {
		return done(err, 0)
	}
	s, err := remove(uint64(h), kindSession, func(s *sessionObj) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch {
		case s.policy != nil:
			return errorf(statusBusy, "edgellm_session_free: a policy is attached; free it first")
		case s.busy.Load():
			return errorf(statusBusy, "edgellm_session_free: a generation is running; cancel it and wait for it to return")
		}
		s.closed = true // no generation starts from now on
		return nil
	})
	if err == nil {
		s.eng.mu.Lock()
		err = s.sess.Close()
		s.eng.mu.Unlock()
		s.eng.sessions.Add(-1)
		s.cbuf.free()
	}
	return done(err, statusInternal)
}

// ---- generation ----

func defaultGenerateParams() C.struct_edgellm_generate_params {
	d := host.DefaultSampling()
	return C.struct_edgellm_generate_params{
		size: C.sizeof_struct_edgellm_generate_params, n_predict: 128,
		temperature: C.float(d.Temp), top_k: C.int32_t(d.TopK), top_p: C.float(d.TopP),
		min_p: C.float(d.MinP), repeat_penalty: C.float(d.RepeatPenalty), seed: C.uint64_t(d.Seed),
	}
}

// edgellm_generate_params_init is API 1.0's: it writes the 1.0 struct.
//
//export edgellm_generate_params_init
func edgellm_generate_params_init(p *C.struct_edgellm_generate_params) {
	edgellm_generate_params_init_sized(p, C.size_generate_params_v1_0)
}

//export edgellm_generate_params_init_sized
func edgellm_generate_params_init_sized(p *C.struct_edgellm_generate_params, size C.uint32_t) C.int {
	d := defaultGenerateParams()
	return initSized("edgellm_generate_params", unsafe.Pointer(p), size, unsafe.Pointer(&d), C.size_generate_params_v1_0, C.sizeof_struct_edgellm_generate_params)
}

//export edgellm_generate
func edgellm_generate(h C.edgellm_session, p *C.struct_edgellm_generate_params, cb C.edgellm_token_callback, user unsafe.Pointer) C.int {
	s, err := get[*sessionObj](uint64(h), kindSession)
	if err != nil {
		return done(err, statusInternal)
	}
	if testGenerateDelay > 0 {
		time.Sleep(testGenerateDelay) // widens the window a racing edgellm_session_free must not slip through
	}
	if p == nil || cb == nil {
		return done(errorf(statusInvalidArgument, "edgellm_generate: params and callback must not be NULL"), 0)
	}
	if err := checkSize("edgellm_generate_params", p.size, C.size_generate_params_v1_0, C.sizeof_struct_edgellm_generate_params); err != nil {
		return done(err, 0)
	}
	gp := defaultGenerateParams()
	readIn(unsafe.Pointer(&gp), unsafe.Pointer(p), p.size)
	p = &gp
	if p.n_predict <= 0 {
		return done(errorf(statusInvalidArgument, "edgellm_generate: n_predict %d must be positive", p.n_predict), 0)
	}
	if known := C.uint32_t(C.EDGELLM_GENERATE_UTF8_COMPLETE | C.EDGELLM_GENERATE_PARSE_SPECIAL); p.flags&^known != 0 {
		return done(errorf(statusInvalidArgument, "edgellm_generate: unknown bits %#x in flags", p.flags&^known), 0)
	}
	smp := host.DefaultSampling()
	smp.Temp, smp.TopK, smp.TopP, smp.MinP = float32(p.temperature), int(p.top_k), float32(p.top_p), float32(p.min_p)
	smp.RepeatPenalty, smp.Seed = float32(p.repeat_penalty), uint64(p.seed)
	if err := smp.Validate(); err != nil {
		return done(errorf(statusInvalidArgument, "edgellm_generate: %v", err), 0)
	}
	draft, draftK := goString(p.draft), int(p.draft_k)
	if draftK < 0 || draftK > abi.MaxSpecK {
		return done(errorf(statusInvalidArgument, "edgellm_generate: draft_k %d out of range 0..%d", draftK, abi.MaxSpecK), 0)
	}
	if draftK == 0 {
		draftK = 4
	}
	if err := notInCallback("edgellm_generate"); err != nil {
		return done(err, 0)
	}
	// Busy and closed change together under s.mu: a generation never starts
	// on a session edgellm_session_free has closed, and a free never closes
	// a session that generates.
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return done(errorf(statusBadHandle, "edgellm_generate: session %#x was freed", uint64(h)), 0)
	case s.busy.Load():
		s.mu.Unlock()
		return done(errorf(statusBusy, "edgellm_generate: this session is already generating"), 0)
	}
	s.busy.Store(true)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.busy.Store(false)
		s.mu.Unlock()
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.cancel.Store(&cancel)
	defer s.cancel.Store(nil)

	s.eng.mu.Lock()
	defer s.eng.mu.Unlock()
	vocab := s.eng.eng.Vocab()
	text := goString(p.prompt)
	start := s.sess.Len()
	var prompt []int32
	switch {
	case text != "":
		if prompt, err = tokenize(vocab, text, start == 0, p.flags&C.EDGELLM_GENERATE_PARSE_SPECIAL != 0); err != nil {
			return done(errorf(statusInvalidArgument, "edgellm_generate: prompt: %v", err), 0)
		}
	case start == 0:
		prompt = []int32{vocab.BOS()}
	default:
		return done(errorf(statusInvalidArgument, "edgellm_generate: an empty prompt continues nothing: the session already holds %d positions", start), 0)
	}
	if start > len(s.toks) { // positions the library did not see decoded: unknown tokens
		s.toks = append(s.toks, make([]int32, start-len(s.toks))...)
		s.toksLost = true
	}
	s.toks = append(s.toks[:start], prompt...)
	s.used.Store(int32(len(s.toks)))
	whole := p.flags&C.EDGELLM_GENERATE_UTF8_COMPLETE != 0
	s.utf8.reset()
	bare, first := text == "", true // from BOS: the text starts at the first piece
	emit := func(tok int32) error {
		s.toks = append(s.toks, tok)
		s.used.Store(int32(len(s.toks)))
		s.pbuf = vocab.Piece(s.pbuf[:0], tok)
		piece := s.pbuf
		if first && bare && len(piece) > 0 && piece[0] == ' ' {
			piece = piece[1:] // SentencePiece's space prefix at the start of text
		}
		first = false
		if whole {
			piece = s.utf8.push(piece)
		}
		cs := s.cbuf.set(piece)
		if C.edgellm_call_token_callback(cb, cs, C.int32_t(len(piece)), C.int32_t(tok), user) != 0 {
			return errStop
		}
		return nil
	}
	st, dst, err := s.run(ctx, vocab, prompt, smp, int(p.n_predict), emit, draft, draftK)
	if whole {
		if rest := s.utf8.flush(); rest != nil {
			cs := s.cbuf.set(rest)
			C.edgellm_call_token_callback(cb, cs, C.int32_t(len(rest)), C.EDGELLM_TOKEN_NONE, user)
		}
	}
	s.mu.Lock()
	s.last, s.draft = st, dst
	s.mu.Unlock()
	if err != nil && !errors.Is(err, errStop) && !errors.Is(err, context.Canceled) {
		err = fmt.Errorf("edgellm_generate: %w", err)
	}
	return done(err, statusInternal)
}

// run is the one call of host.Generate (and host.AttachDraft): everything
// the C API needs of a generation goes through here. s.eng.mu is held.
func (s *sessionObj) run(ctx context.Context, vocab host.Vocab, prompt []int32, smp host.SamplingParams, n int,
	emit func(int32) error, draft string, draftK int) (host.Stats, host.DraftStats, error) {
	opts := host.GenerateOptions{NPredict: n, Sampling: smp, Prompt: prompt, Emit: emit}
	s.mu.Lock()
	if s.policy != nil {
		if draft != "" {
			s.mu.Unlock()
			return host.Stats{}, host.DraftStats{}, errorf(statusInvalidArgument, "edgellm_generate: a draft with a policy attached (the policy would drive it): free the policy first")
		}
		ad := s.policy.ad
		opts.BeforeStep = func(step int) error {
			err := ad.BeforeStep(step)
			s.snapshot(ad)
			return err
		}
	}
	s.mu.Unlock()
	var dst host.DraftStats
	if draft != "" {
		d, err := host.AttachDraft(s.eng.eng, s.sess, host.DraftOptions{Spec: draft, K: draftK, Sampling: smp})
		if err != nil {
			return host.Stats{}, dst, errorf(statusInvalidArgument, "edgellm_generate: draft %q: %v", draft, err)
		}
		defer func() { d.Close() }()
		opts.Draft = d
		st, err := host.Generate(ctx, s.sess, opts)
		return st, d.Stats(), err
	}
	st, err := host.Generate(ctx, s.sess, opts)
	return st, dst, err
}

//export edgellm_cancel
func edgellm_cancel(h C.edgellm_session) C.int {
	s, err := get[*sessionObj](uint64(h), kindSession)
	if err == nil {
		if c := s.cancel.Load(); c != nil {
			(*c)()
		}
	}
	return done(err, statusInternal)
}

// ---- sensors ----

// edgellm_sensors_init is API 1.0's (the struct has not changed).
//
//export edgellm_sensors_init
func edgellm_sensors_init(r *C.struct_edgellm_sensors) {
	edgellm_sensors_init_sized(r, C.sizeof_struct_edgellm_sensors)
}
