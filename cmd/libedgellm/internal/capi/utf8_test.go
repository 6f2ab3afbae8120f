package capi

import (
	"bytes"
	"testing"
	"unicode/utf8"
)

// TestUTF8Joiner feeds byte splits of multi-byte text and invalid bytes:
// every piece out is valid UTF-8, and valid input comes out unchanged.
func TestUTF8Joiner(t *testing.T) {
	text := []byte("héllo, 世界 🙂 ok")
	for split := 1; split <= 4; split++ {
		var j utf8Joiner
		var all []byte
		for i := 0; i < len(text); i += split {
			p := j.push(text[i:min(i+split, len(text))])
			if !utf8.Valid(p) {
				t.Fatalf("split %d: piece %q is not valid UTF-8", split, p)
			}
			all = append(all, p...)
		}
		all = append(all, j.flush()...)
		if !bytes.Equal(all, text) {
			t.Fatalf("split %d: got %q, want %q", split, all, text)
		}
	}
	var j utf8Joiner
	got := append([]byte{}, j.push([]byte{'a', 0x80, 0xff, 0xe4, 0xb8})...)
	if want := "a\uFFFD\uFFFD"; string(got) != want {
		t.Fatalf("invalid bytes: got %q, want %q", got, want)
	}
	if f := j.flush(); string(f) != "\uFFFD" {
		t.Fatalf("flush of a held prefix: got %q", f)
	}
	if f := j.flush(); f != nil {
		t.Fatalf("second flush: got %q", f)
	}
}
