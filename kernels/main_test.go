package kernels

import (
	"os"
	"testing"
)

// TestMain silences llama.cpp's warnings (several tests provoke errors on
// purpose) unless EDGELLM_LLAMA_LOG names a level.
func TestMain(m *testing.M) {
	level := LogNone
	if s := os.Getenv("EDGELLM_LLAMA_LOG"); s != "" {
		if l, err := ParseLogLevel(s); err == nil {
			level = l
		}
	}
	SetLogLevel(level)
	code := m.Run()
	if stories.m != nil {
		stories.m.Close()
	}
	os.Exit(code)
}
