package synth

import (
	"fmt"

	"github.com/edgellm/edgellm/internal/gguf"
)

// ZeroFrom writes a copy of the GGUF at src to dst in which the attention
// and feed-forward output projections (blk.L.attn_output.weight and
// blk.L.ffn_down.weight) of every layer L ≥ from are all-zero bytes, which
// decode to zero in every ggml type. Those layers then add nothing to the
// residual stream, so the model's logits are a skip:from draft's at every
// position, while every layer is still read and multiplied: the model
// costs what the original costs. It is half of the SYNTHETIC speculation
// pair of `bench --synth-from/--synth-agree` (the other half is
// native.Options.SynthAgree). Not a real model: label results SYNTHETIC.
func ZeroFrom(src, dst string, from int) (err error) {
	f, err := gguf.Open(src)
	if err != nil {
		return err
	}
	nLayer, err := f.GetUint(f.Arch() + ".block_count")
	if err != nil {
		return err
	}
	if from < 1 || uint64(from) >= nLayer {
		return fmt.Errorf("synth: zero layers from %d: the model has %d layers (want 1 ≤ from < %d)", from, nLayer, nLayer)
	}
	zero := map[string]bool{}
	for l := from; l < int(nLayer); l++ {
		for _, n := range []string{"attn_output", "ffn_down"} {
			name := fmt.Sprintf("blk.%d.%s.weight", l, n)
			if _, ok := f.Tensor(name); !ok {
				return fmt.Errorf("synth: zero layers from %d: %s has no tensor %s", from, src, name)
			}
			zero[name] = true
		}
	}
	return gguf.RewriteZeroing(src, dst, func(kv []gguf.KV) []gguf.KV { return kv }, func(name string) bool { return zero[name] })
}
