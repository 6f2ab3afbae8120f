package engine

import (
	"strings"
	"testing"
)

// TestParseAttention: every attention kernel's name parses back to it, ""
// is auto, and an unknown name is an error that lists the valid ones.
func TestParseAttention(t *testing.T) {
	for _, a := range []Attention{AttentionAuto, AttentionFlash, AttentionClassic, AttentionEdgellm} {
		got, err := ParseAttention(a.String())
		if err != nil || got != a {
			t.Fatalf("ParseAttention(%q) = %v, %v; want %v", a.String(), got, err, a)
		}
	}
	if a, err := ParseAttention(""); err != nil || a != AttentionAuto {
		t.Fatalf(`ParseAttention("") = %v, %v; want auto`, a, err)
	}
	if _, err := ParseAttention("fast"); err == nil || !strings.Contains(err.Error(), "edgellm") {
		t.Fatalf(`ParseAttention("fast"): %v; want an error naming the kernels`, err)
	}
}
