package synth

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestZeroFrom: the output projections of layers ≥ from are zero bytes,
// every other tensor and key is copied, and a layer count out of range
// is refused with both numbers.
func TestZeroFrom(t *testing.T) {
	src := sharedtest.Stories260K(t)
	dst := filepath.Join(t.TempDir(), "z.gguf")
	if err := ZeroFrom(src, dst, 3); err != nil {
		t.Fatal(err)
	}
	a, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	b, err := gguf.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.KV) != len(b.KV) || len(a.Tensors) != len(b.Tensors) {
		t.Fatalf("copy has %d keys and %d tensors, source %d and %d", len(b.KV), len(b.Tensors), len(a.KV), len(a.Tensors))
	}
	ra, _ := os.ReadFile(src)
	rb, _ := os.ReadFile(dst)
	zeroed := 0
	for i := range a.Tensors {
		ta, tb := &a.Tensors[i], &b.Tensors[i]
		da := ra[a.AbsOffset(ta) : a.AbsOffset(ta)+ta.Size]
		db := rb[b.AbsOffset(tb) : b.AbsOffset(tb)+tb.Size]
		var l int
		var kind string
		isOut := false
		if n, _ := fmtSscan(ta.Name, &l, &kind); n == 2 && l >= 3 && (kind == "attn_output" || kind == "ffn_down") {
			isOut = true
		}
		switch {
		case isOut:
			if !bytes.Equal(db, make([]byte, len(db))) {
				t.Errorf("%s: not zero", ta.Name)
			}
			zeroed++
		case !bytes.Equal(da, db):
			t.Errorf("%s: changed", ta.Name)
		}
	}
	if zeroed != 2*2 { // stories260K has 5 layers: 3 and 4
		t.Errorf("zeroed %d tensors, want 4", zeroed)
	}
	for _, from := range []int{0, 5} {
		err := ZeroFrom(src, dst, from)
		if err == nil || !strings.Contains(err.Error(), "5 layers") {
			t.Errorf("from %d: %v, want a refusal naming the 5 layers", from, err)
		}
	}
}

// fmtSscan parses "blk.L.KIND.weight".
func fmtSscan(name string, l *int, kind *string) (int, error) {
	parts := strings.Split(name, ".")
	if len(parts) != 4 || parts[0] != "blk" || parts[3] != "weight" {
		return 0, nil
	}
	n := 0
	for _, c := range parts[1] {
		if c < '0' || c > '9' {
			return 0, nil
		}
		n = n*10 + int(c-'0')
	}
	*l, *kind = n, parts[2]
	return 2, nil
}
