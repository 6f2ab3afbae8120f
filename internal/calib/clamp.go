package calib

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/kernels"
)

// layerMatrix matches the seven matrices of a llama layer.
var layerMatrix = regexp.MustCompile(`^blk\.(\d+)\.(attn_q|attn_k|attn_v|attn_output|ffn_gate|ffn_up|ffn_down)\.weight$`)

// ClampReport says what QuantizeClamped did to one layer.
type ClampReport struct {
	Layer     int
	Sigma     float64
	Threshold float64 // K σ
	Clamped   int64   // weights moved to ±Threshold
	Total     int64
}

// QuantizeClamped writes out: a copy of the GGUF at in whose layer matrices
// are quantized to typ with ggml's own quantization (ggml_quantize_chunk
// through kernels.QuantizeRows), after clamping the weights of the layers
// in clamp (nil = every layer) to ±k σ of that layer; every other tensor is
// copied unchanged. The input's matrices are read through ggml's to_float,
// so any type works, though F32 is the meaningful source. out is written
// through a temporary file and a rename: nothing is left on error.
func QuantizeClamped(in, out string, typ gguf.Type, k float64, clamp map[int]bool) ([]ClampReport, error) {
	if !(k > 0) {
		return nil, fmt.Errorf("clamp sigma %g: want > 0", k)
	}
	if !kernels.Quantizable(uint32(typ)) {
		return nil, fmt.Errorf("type %s cannot be quantized without an importance matrix", typ)
	}
	f, err := gguf.Open(in)
	if err != nil {
		return nil, err
	}
	fh, err := os.Open(in)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	read := func(t *gguf.TensorInfo) ([]float32, error) {
		raw := make([]byte, t.Size)
		if _, err := fh.ReadAt(raw, f.AbsOffset(t)); err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name, err)
		}
		ne0 := t.Dims[0]
		rows := t.Elements() / ne0
		rb := t.Size / rows
		dst := make([]float32, t.Elements())
		for r := int64(0); r < rows; r++ {
			if err := kernels.DequantizeRow(kernels.GGMLType(t.Type), raw[r*rb:(r+1)*rb], dst[r*ne0:(r+1)*ne0]); err != nil {
				return nil, fmt.Errorf("%s: %w", t.Name, err)
			}
		}
		return dst, nil
	}
	layerOf := func(name string) int {
		m := layerMatrix.FindStringSubmatch(name)
		if m == nil {
			return -1
		}
		il, _ := strconv.Atoi(m[1])
		return il
	}
	// Pass 1: σ of each clamped layer over its seven matrices.
	type acc struct{ s, s2, n float64 }
	accs := map[int]*acc{}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		il := layerOf(t.Name)
		if il < 0 || (clamp != nil && !clamp[il]) {
			continue
		}
		w, err := read(t)
		if err != nil {
			return nil, err
		}
		a := accs[il]
		if a == nil {
			a = &acc{}
			accs[il] = a
		}
		for _, v := range w {
			a.s += float64(v)
			a.s2 += float64(v) * float64(v)
		}
		a.n += float64(len(w))
	}
	reps := map[int]*ClampReport{}
	var order []int
	for il, a := range accs {
		mean := a.s / a.n
		sigma := math.Sqrt(max(0, a.s2/a.n-mean*mean))
		reps[il] = &ClampReport{Layer: il, Sigma: sigma, Threshold: k * sigma}
		order = append(order, il)
	}
	// Pass 2: write.
	tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".tmp*")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w := gguf.NewWriter(tmp)
	for _, kv := range f.KV {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			return nil, err
		}
	}
	for _, t := range f.Tensors {
		tt := t.Type
		if layerOf(t.Name) >= 0 && t.Dims[0]%int64(typ.BlockSize()) == 0 {
			tt = typ
		}
		if err := w.AddTensor(t.Name, t.Dims, tt); err != nil {
			return nil, err
		}
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		il := layerOf(t.Name)
		if il < 0 || t.Dims[0]%int64(typ.BlockSize()) != 0 {
			raw := make([]byte, t.Size)
			if _, err := fh.ReadAt(raw, f.AbsOffset(t)); err != nil {
				return nil, err
			}
			if _, err := w.Write(raw); err != nil {
				return nil, err
			}
			continue
		}
		vals, err := read(t)
		if err != nil {
			return nil, err
		}
		if rep := reps[il]; rep != nil {
			th := float32(rep.Threshold)
			for j, v := range vals {
				if v > th {
					vals[j], rep.Clamped = th, rep.Clamped+1
				} else if v < -th {
					vals[j], rep.Clamped = -th, rep.Clamped+1
				}
			}
			rep.Total += int64(len(vals))
		}
		ne0 := int(t.Dims[0])
		rows := len(vals) / ne0
		rs, err := kernels.QuantRowSize(uint32(typ), ne0)
		if err != nil {
			return nil, err
		}
		dst := make([]byte, rows*rs)
		if _, err := kernels.QuantizeRows(uint32(typ), vals, dst, rows, ne0); err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name, err)
		}
		if _, err := w.Write(dst); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	if err := tmp.Sync(); err != nil {
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return nil, err
	}
	ok = true
	out2 := make([]ClampReport, 0, len(order))
	for il := 0; len(out2) < len(order); il++ {
		if r := reps[il]; r != nil {
			out2 = append(out2, *r)
		}
	}
	return out2, nil
}
