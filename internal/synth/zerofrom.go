package synth

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

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
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w := gguf.NewWriter(tmp)
	for _, kv := range f.KV {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	for _, t := range f.Tensors {
		if err := w.AddTensor(t.Name, t.Dims, t.Type); err != nil {
			return err
		}
	}
	var zeros [1 << 16]byte
	for i := range f.Tensors {
		t := &f.Tensors[i]
		var r io.Reader = io.NewSectionReader(in, f.AbsOffset(t), t.Size)
		if zero[t.Name] {
			r = io.LimitReader(zeroReader(zeros[:]), t.Size)
		}
		if _, err := io.Copy(w, r); err != nil {
			return fmt.Errorf("synth: %s: tensor %s: %w", src, t.Name, err)
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// zeroReader reads zero bytes forever.
type zeroReader []byte

func (z zeroReader) Read(p []byte) (int, error) {
	n := copy(p, z)
	return n, nil
}
