package kernels

/*
#include <stdlib.h>
#include "llama.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"sync"
	"unsafe"
)

// QuantizeParams configures Quantize.
type QuantizeParams struct {
	// FileType is the target (FileTypeQ8_0, FileTypeQ4_K_M, ...).
	FileType FileType
	// Threads quantizing in parallel; 0 = runtime.NumCPU().
	Threads int
	// AllowRequantize permits quantizing tensors that are already quantized
	// (quality loss); otherwise such an input fails.
	AllowRequantize bool
	// Pure quantizes every tensor to FileType, without llama.cpp's mixes
	// (e.g. Q4_K_M keeps some tensors at Q6_K).
	Pure bool
	// Progress, if set, is called once per tensor as llama.cpp starts it:
	// i counts from 1 to n. It runs on the quantizing goroutine.
	Progress func(i, n int, tensor string)
}

// quantizeMu serialises Quantize: progress comes from the process-wide log
// callback.
var quantizeMu sync.Mutex

// quantizeLine matches llama.cpp's per-tensor log line
// "[   3/  48]                  blk.0.attn_k.weight - [...], type = f32, ".
var quantizeLine = regexp.MustCompile(`^\[\s*(\d+)/\s*(\d+)\]\s+(\S+)`)

// Quantize writes a copy of the GGUF model in with its weights quantized to
// p.FileType (llama_model_quantize). The output is written to a temporary
// file beside out and renamed on success, so out is never left half-written.
// Errors are *PathError wrapping ErrInvalidArg, ErrNotGGUF, ErrQuantize or an
// OS error.
func Quantize(in, out string, p QuantizeParams) error {
	if _, ok := fileTypeNames[p.FileType]; !ok {
		return &PathError{Op: "quantize", Path: in, Err: fmt.Errorf("%w: unsupported file type %d", ErrInvalidArg, int(p.FileType))}
	}
	if p.Threads < 0 {
		return &PathError{Op: "quantize", Path: in, Err: fmt.Errorf("%w: negative thread count %d", ErrInvalidArg, p.Threads)}
	}
	if _, err := ReadModelFileHeader(in); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return &PathError{Op: "quantize", Path: in, Err: err}
	}
	if same, err := samePath(in, out); err != nil {
		return &PathError{Op: "quantize", Path: out, Err: err}
	} else if same {
		return &PathError{Op: "quantize", Path: out, Err: fmt.Errorf("%w: output is the input file", ErrInvalidArg)}
	}
	if st, err := os.Stat(out); err == nil && st.IsDir() {
		return &PathError{Op: "quantize", Path: out, Err: fmt.Errorf("%w: output is a directory", ErrInvalidArg)}
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".tmp-*")
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return &PathError{Op: "quantize", Path: out, Err: fmt.Errorf("output not writable: %w", err)}
	}
	tmpPath := tmp.Name()
	tmp.Close()
	defer os.Remove(tmpPath) // a no-op after the rename

	initBackend()
	qp := C.llama_model_quantize_default_params()
	qp.ftype = C.enum_llama_ftype(p.FileType)
	qp.nthread = C.int32_t(p.Threads)
	if p.Threads == 0 {
		qp.nthread = C.int32_t(runtime.NumCPU())
	}
	qp.allow_requantize = C.bool(p.AllowRequantize)
	qp.pure = C.bool(p.Pure)

	cin := C.CString(in)
	defer C.free(unsafe.Pointer(cin))
	cout := C.CString(tmpPath)
	defer C.free(unsafe.Pointer(cout))

	quantizeMu.Lock()
	defer quantizeMu.Unlock()
	if p.Progress != nil {
		setLogTap(func(line string) {
			if m := quantizeLine.FindStringSubmatch(line); m != nil {
				i, _ := strconv.Atoi(m[1])
				n, _ := strconv.Atoi(m[2])
				p.Progress(i, n, m[3])
			}
		})
		defer setLogTap(nil)
	}
	clearCError()
	if rc := C.llama_model_quantize(cin, cout, &qp); rc != 0 {
		return &PathError{Op: "quantize", Path: in, Err: ErrQuantize, Detail: lastCError()}
	}
	if err := os.Rename(tmpPath, out); err != nil {
		return &PathError{Op: "quantize", Path: out, Err: err}
	}
	return nil
}

// samePath reports whether a and b name the same file (b may not exist).
func samePath(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false, nil
	}
	return os.SameFile(sa, sb), nil
}
