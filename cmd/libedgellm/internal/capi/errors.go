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
	"io/fs"
	"unsafe"

	"github.com/edgellm/edgellm/host"
)

// status is an edgellm_status code.
type status int

const (
	statusOK              status = C.EDGELLM_OK
	statusInvalidArgument status = C.EDGELLM_ERR_INVALID_ARGUMENT
	statusBadHandle       status = C.EDGELLM_ERR_BAD_HANDLE
	statusStructSize      status = C.EDGELLM_ERR_STRUCT_SIZE
	statusIO              status = C.EDGELLM_ERR_IO
	statusModel           status = C.EDGELLM_ERR_MODEL
	statusPolicy          status = C.EDGELLM_ERR_POLICY
	statusCancelled       status = C.EDGELLM_ERR_CANCELLED
	statusContextFull     status = C.EDGELLM_ERR_CONTEXT_FULL
	statusBusy            status = C.EDGELLM_ERR_BUSY
	statusInternal        status = C.EDGELLM_ERR_INTERNAL
	statusTooSmall        status = C.EDGELLM_ERR_TOO_SMALL
)

// apiError is an error with the status code it maps to.
type apiError struct {
	code status
	msg  string
}

func (e *apiError) Error() string { return e.msg }

func errorf(code status, format string, args ...any) error {
	return &apiError{code: code, msg: fmt.Sprintf(format, args...)}
}

// errStop is what the token callback's "stop" becomes inside Generate.
var errStop = errors.New("the token callback asked to stop")

// classify maps an error to its status; fallback is the status of errors
// that are none of the known kinds (a model error from load, a policy error
// from attach).
func classify(err error, fallback status) status {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae.code
	case errors.Is(err, errStop), errors.Is(err, context.Canceled):
		return statusCancelled
	case errors.Is(err, host.ErrContextFull):
		return statusContextFull
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission):
		return statusIO
	}
	return fallback
}

// done sets the calling thread's last error and returns the status as a C
// int. A Go function exported to C runs on the caller's OS thread, so the
// thread-local buffer in capi.c is the caller's.
func done(err error, fallback status) C.int {
	if err == nil {
		C.edgellm_set_last_error(nil, 0)
		return C.int(statusOK)
	}
	code := classify(err, fallback)
	msg := err.Error()
	if len(msg) == 0 {
		msg = "error"
	}
	b := []byte(msg)
	cs := C.CBytes(b) // a C copy: no Go pointer crosses
	C.edgellm_set_last_error((*C.char)(cs), C.size_t(len(b)))
	C.free(cs)
	return C.int(code)
}

// checkSize checks the size field of a struct passed in: the sizes of every
// version of the struct this library knows.
func checkSize(name string, got C.uint32_t, known ...C.size_t) error {
	for _, k := range known {
		if C.size_t(got) == k {
			return nil
		}
	}
	return errorf(statusStructSize, "struct %s: size %d is not one this library (API %d.%d) knows (%d); set it with %s_init",
		name, got, C.EDGELLM_API_VERSION_MAJOR, C.EDGELLM_API_VERSION_MINOR, known[len(known)-1], name)
}

// cbuffer is C memory for token text, grown as needed and freed with the
// session.
type cbuffer struct {
	p *C.char
	n int
}

func (b *cbuffer) set(text []byte) *C.char {
	if len(text) > b.n {
		C.free(unsafe.Pointer(b.p))
		b.n = max(len(text), 64)
		b.p = (*C.char)(C.malloc(C.size_t(b.n)))
	}
	if len(text) > 0 {
		C.memcpy(unsafe.Pointer(b.p), unsafe.Pointer(&text[0]), C.size_t(len(text)))
	}
	return b.p
}

func (b *cbuffer) free() {
	C.free(unsafe.Pointer(b.p))
	b.p, b.n = nil, 0
}
