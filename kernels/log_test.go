package kernels

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

// syncBuffer is a bytes.Buffer safe for the log callback's threads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLogLevels loads a model at each level and checks what reaches the
// writer: INFO lines (print_info) only at info and below, warnings from warn
// down, nothing at none.
func TestLogLevels(t *testing.T) {
	path := sharedtest.Stories260K(t)
	defer SetLogWriter(nil)
	defer SetLogLevel(GetLogLevel())
	for _, tc := range []struct {
		level    LogLevel
		info     bool // "print_info:" lines
		anything bool
	}{
		{LogDebug, true, true},
		{LogInfo, true, true},
		{LogWarn, false, true}, // stories260K's tokenizer metadata draws warnings
		{LogNone, false, false},
	} {
		t.Run(tc.level.String(), func(t *testing.T) {
			var buf syncBuffer
			SetLogWriter(&buf)
			SetLogLevel(tc.level)
			m, err := LoadModel(path, ModelParams{})
			if err != nil {
				t.Fatal(err)
			}
			m.Close()
			out := buf.String()
			if got := strings.Contains(out, "print_info:"); got != tc.info {
				t.Errorf("level %v: print_info lines present = %v\n%s", tc.level, got, out)
			}
			if got := out != ""; got != tc.anything {
				t.Errorf("level %v: output present = %v\n%s", tc.level, got, out)
			}
		})
	}
}

func TestParseLogLevel(t *testing.T) {
	for _, s := range []string{"debug", "INFO", "warn", "error", "none"} {
		l, err := ParseLogLevel(s)
		if err != nil || !strings.EqualFold(l.String(), s) {
			t.Errorf("ParseLogLevel(%q) = %v, %v", s, l, err)
		}
	}
	if _, err := ParseLogLevel("loud"); err == nil {
		t.Error("ParseLogLevel(loud) accepted")
	}
}

// TestLoadErrorDetail: a llama.cpp failure carries its first error line.
func TestLoadErrorDetail(t *testing.T) {
	p := sharedtest.Stories260K(t)
	good := readFile(t, p)
	bad := writeFile(t, "half.gguf", good[:len(good)/2])
	_, err := LoadModel(bad, ModelParams{})
	var pe *PathError
	if err == nil || !asPathError(err, &pe) || pe.Detail == "" {
		t.Fatalf("LoadModel(truncated) = %#v, want a PathError with llama.cpp's detail", err)
	}
}
