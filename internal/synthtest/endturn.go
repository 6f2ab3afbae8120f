package synthtest

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"regexp"
	"testing"

	"github.com/edgellm/edgellm/internal/gguf"
)

// EndTurn writes to dst a copy of the F32 SYNTHETIC model at src whose
// greedy reply is its end-of-turn token (tokenizer.ggml.eot_token_id) at
// every position: a model that ends its turn at once, to test that
// generation stops there. It returns the end-of-turn id.
//
// How: embedding dimension 0 is a constant signal the blocks never touch.
// Every token's embedding (and output row) is ε there, the end of turn's
// is big there and 0 elsewhere; every block's attn_output and ffn_down
// write nothing into dimension 0. So the residual's dimension 0 is the
// input token's embedding (scaled, for Gemma), always positive, and after
// the final norm the end of turn's logit exceeds every other token's by
// that positive value times (big - ε), against the O(1) rest of the dot
// product. Gemma's post-norms keep a 0 at 0; soft-capping is monotonic.
func EndTurn(t testing.TB, src, dst string) int32 {
	t.Helper()
	const eps, big = 0.25, 100
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	eot, err := f.GetUint("tokenizer.ggml.eot_token_id")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	put := func(ti *gguf.TensorInfo, row, col int64, v float32) {
		off := f.AbsOffset(ti) + 4*(row*ti.Dims[0]+col)
		binary.LittleEndian.PutUint32(b[off:], math.Float32bits(v))
	}
	writers := regexp.MustCompile(`^blk\.\d+\.(attn_output|ffn_down)\.weight$`)
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if ti.Type != gguf.F32 && (ti.Name == "token_embd.weight" || ti.Name == "output.weight" || writers.MatchString(ti.Name)) {
			t.Fatalf("EndTurn needs an F32 model: %s is %s", ti.Name, ti.Type)
		}
		switch {
		case ti.Name == "token_embd.weight" || ti.Name == "output.weight":
			for row := int64(0); row < ti.Dims[1]; row++ {
				put(ti, row, 0, eps)
			}
			for col := int64(1); col < ti.Dims[0]; col++ {
				put(ti, int64(eot), col, 0)
			}
			put(ti, int64(eot), 0, big)
		case writers.MatchString(ti.Name): // output row 0: nothing into dimension 0
			for col := int64(0); col < ti.Dims[0]; col++ {
				put(ti, 0, col, 0)
			}
		}
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(fmt.Errorf("EndTurn: %w", err))
	}
	return int32(eot)
}
