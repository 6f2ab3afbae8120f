package capi

/*
#cgo CFLAGS: -I${SRCDIR}/../../../../include
#define EDGELLM_NO_PROTOTYPES 1
#include <stdlib.h>
#include "edgellm.h"
#include "capi.h"
*/
import "C"

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"unsafe"

	"github.com/edgellm/edgellm/kernels"
)

// policyLog is the policy runtime's logger (refused reloads, fallbacks,
// clamps): through the app's log callback when one is set, else stderr, at
// the level edgellm_log_level set (the library's default: errors only).
var policyLog = slog.New(logHandler{})

type logHandler struct{ attrs []slog.Attr }

func edgellmLevel(l slog.Level) kernels.LogLevel {
	switch {
	case l >= slog.LevelError:
		return kernels.LogError
	case l >= slog.LevelWarn:
		return kernels.LogWarn
	case l >= slog.LevelInfo:
		return kernels.LogInfo
	}
	return kernels.LogDebug
}

func (h logHandler) Enabled(_ context.Context, l slog.Level) bool {
	return edgellmLevel(l) >= kernels.GetLogLevel()
}

func (h logHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	add := func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true }
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	b.WriteByte('\n')
	cs := C.CString(b.String())
	defer C.free(unsafe.Pointer(cs))
	if C.edgellm_call_log_callback(C.int32_t(edgellmLevel(r.Level)), cs) == 0 {
		_, err := os.Stderr.WriteString(b.String())
		return err
	}
	return nil
}

func (h logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{attrs: append(append([]slog.Attr{}, h.attrs...), as...)}
}

func (h logHandler) WithGroup(string) slog.Handler { return h }
