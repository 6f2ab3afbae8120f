package kernels

/*
#include <string.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"unsafe"
)

// LogLevel is the lowest severity of llama.cpp / ggml log messages that is
// written to the log writer.
type LogLevel int

// Log levels, in increasing severity. The values are ggml_log_level's.
const (
	LogDebug LogLevel = C.GGML_LOG_LEVEL_DEBUG
	LogInfo  LogLevel = C.GGML_LOG_LEVEL_INFO
	LogWarn  LogLevel = C.GGML_LOG_LEVEL_WARN
	LogError LogLevel = C.GGML_LOG_LEVEL_ERROR
	// LogNone silences llama.cpp and ggml entirely.
	LogNone LogLevel = C.GGML_LOG_LEVEL_ERROR + 1
)

var logLevelNames = [...]string{LogDebug: "debug", LogInfo: "info", LogWarn: "warn", LogError: "error", LogNone: "none"}

func (l LogLevel) String() string {
	if l >= LogDebug && l <= LogNone {
		return logLevelNames[l]
	}
	return fmt.Sprintf("LogLevel(%d)", int(l))
}

// ParseLogLevel parses "debug", "info", "warn", "error" or "none".
func ParseLogLevel(s string) (LogLevel, error) {
	for l := LogDebug; l <= LogNone; l++ {
		if strings.EqualFold(s, logLevelNames[l]) {
			return l, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown log level %q (want debug, info, warn, error or none)", ErrInvalidArg, s)
}

// log is the Go side of the C log callback. The C side drops messages below
// the level before crossing into Go, so quiet logging costs one comparison.
var log struct {
	mu    sync.Mutex
	w     io.Writer
	level LogLevel
	tap   func(line string)                 // INFO lines while a Quantize runs, else nil
	fn    func(level LogLevel, text []byte) // SetLogFunc's, else nil
	prev  LogLevel                          // of the last message (for GGML_LOG_LEVEL_CONT)
}

// SetLogFunc passes each message at or above the level, with its level, to
// fn instead of the writer (an embedding's log callback: libedgellm's
// edgellm_log_set); nil goes back to the writer. text is valid only during
// the call. A continuation (GGML_LOG_LEVEL_CONT) gets its first part's level.
func SetLogFunc(fn func(level LogLevel, text []byte)) {
	log.mu.Lock()
	log.fn = fn
	log.mu.Unlock()
}

func init() {
	log.w = os.Stderr
	log.level = LogWarn
	log.prev = LogInfo
	// Package init runs after ollama's ggml package init, which installs a
	// slog-based sink: replace it so the default is warnings and errors only.
	C.edgellm_log_set_level(C.int(log.level))
	C.edgellm_log_install()
}

// SetLogLevel sets the lowest severity of llama.cpp / ggml messages written to
// the log writer. The default is LogWarn.
func SetLogLevel(l LogLevel) {
	if l < LogDebug {
		l = LogDebug
	}
	if l > LogNone {
		l = LogNone
	}
	log.mu.Lock()
	log.level = l
	log.mu.Unlock()
	C.edgellm_log_set_level(C.int(l))
}

// GetLogLevel returns the current log level.
func GetLogLevel() LogLevel {
	log.mu.Lock()
	defer log.mu.Unlock()
	return log.level
}

// SetLogWriter sets where llama.cpp / ggml messages go (default os.Stderr);
// nil discards them. Messages are written as llama.cpp formats them, usually
// one line per Write.
func SetLogWriter(w io.Writer) {
	if w == nil {
		w = io.Discard
	}
	log.mu.Lock()
	log.w = w
	log.mu.Unlock()
}

// setLogTap routes INFO messages to fn (nil to stop) in addition to the
// writer; used by Quantize to turn llama.cpp's per-tensor lines into progress.
func setLogTap(fn func(line string)) {
	log.mu.Lock()
	log.tap = fn
	log.mu.Unlock()
	on := C.int(0)
	if fn != nil {
		on = 1
	}
	C.edgellm_log_set_tap(on)
}

// lastCError returns llama.cpp's first error line since clearCError.
// Concurrent failures in other goroutines may interleave; it is a diagnostic.
func lastCError() string {
	var buf [512]C.char
	n := C.edgellm_log_last_error(&buf[0], C.size_t(len(buf)))
	return C.GoStringN(&buf[0], C.int(n))
}

func clearCError() { C.edgellm_log_clear_error() }

//export edgellmLog
func edgellmLog(level C.int, text *C.char, fwd C.int) {
	n := C.strlen(text)
	b := unsafe.Slice((*byte)(unsafe.Pointer(text)), int(n))
	log.mu.Lock()
	w, tap, fn := log.w, log.tap, log.fn
	l := LogLevel(level)
	if level == C.GGML_LOG_LEVEL_CONT {
		l = log.prev
	}
	log.prev = l
	log.mu.Unlock()
	if fwd != 0 {
		if fn != nil {
			fn(l, b)
		} else {
			_, _ = w.Write(b)
		}
	}
	if tap != nil && level == C.GGML_LOG_LEVEL_INFO {
		tap(string(b))
	}
}
