package host

import (
	"io"

	"github.com/edgellm/edgellm/kernels"
)

// LogLevel is the lowest severity of llama.cpp and ggml messages that
// SetLog lets through.
type LogLevel int

// Log levels, in increasing severity.
const (
	LogDebug LogLevel = iota
	LogInfo
	LogWarn // the default
	LogError
	LogNone // silence llama.cpp and ggml entirely
)

// SetLog routes llama.cpp's and ggml's log messages (model loading, backend
// choice, warnings) to w, dropping those below level; nil w discards them.
// The default is os.Stderr at LogWarn. It is process-wide.
func SetLog(w io.Writer, level LogLevel) {
	kernels.SetLogWriter(w)
	l := kernels.LogWarn
	switch level {
	case LogDebug:
		l = kernels.LogDebug
	case LogInfo:
		l = kernels.LogInfo
	case LogError:
		l = kernels.LogError
	case LogNone:
		l = kernels.LogNone
	}
	kernels.SetLogLevel(l)
}
