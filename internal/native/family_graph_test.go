package native

import (
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/gguf"
)

// TestFamilyGraphOps: a prefill graph of each family computes exactly the
// ops llama.cpp's graph of the same model does (flash attention, 64
// tokens, logits of the last one), so the engines' prefill and decode
// differ in no work but llama.cpp's F32→F16 mask copy (one per mask kind;
// the native session fills F16 masks). The counts are llama.cpp's, read
// with `GGML_SCHED_DEBUG=2 edgellm bench -m TINY.gguf --engine llamacpp -p
// 64 -n 3 -r 1 -v` (its GLU and UNARY nodes are SWIGLU/GEGLU and TANH
// here). An extra op in forward.go (a copy, a bias as its own pass) fails
// it.
func TestFamilyGraphOps(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  map[string]int
	}{
		{"qwen2-tiny", map[string]int{"ADD": 10, "FLASH_ATTN_EXT": 2, "GET_ROWS": 3, "SWIGLU": 2, "MUL": 5, "MUL_MAT": 15, "RMS_NORM": 5, "ROPE": 4, "SET_ROWS": 4}},
		{"qwen3-tiny", map[string]int{"ADD": 4, "FLASH_ATTN_EXT": 2, "GET_ROWS": 3, "SWIGLU": 2, "MUL": 9, "MUL_MAT": 15, "RMS_NORM": 9, "ROPE": 4, "SET_ROWS": 4}},
		{"gemma2-tiny", map[string]int{"ADD": 8, "FLASH_ATTN_EXT": 4, "GET_ROWS": 3, "GEGLU": 4, "MUL": 17, "MUL_MAT": 29, "RMS_NORM": 17, "ROPE": 8, "SCALE": 7, "SET_ROWS": 8, "TANH": 1}},
		{"gemma3-tiny", map[string]int{"ADD": 12, "FLASH_ATTN_EXT": 6, "GET_ROWS": 3, "GEGLU": 6, "MUL": 37, "MUL_MAT": 43, "RMS_NORM": 37, "ROPE": 12, "SCALE": 7, "SET_ROWS": 12}},
		{"phi3-tiny", map[string]int{"ADD": 4, "FLASH_ATTN_EXT": 2, "GET_ROWS": 3, "SWIGLU": 2, "MUL": 5, "MUL_MAT": 9, "RMS_NORM": 5, "ROPE": 4, "SCALE": 2, "SET_ROWS": 4}},
		{"smollm2-tiny", map[string]int{"ADD": 4, "FLASH_ATTN_EXT": 2, "GET_ROWS": 3, "SWIGLU": 2, "MUL": 5, "MUL_MAT": 15, "RMS_NORM": 5, "ROPE": 4, "SET_ROWS": 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Load(familyModel(t, tc.name, gguf.Q8_0), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			es, err := e.NewSession(engine.SessionConfig{NCtx: 256, Threads: 1, Attention: engine.AttentionFlash})
			if err != nil {
				t.Fatal(err)
			}
			defer es.Close()
			s := SessionOf(es)
			toks := make([]int32, 64)
			for i := range toks {
				toks[i] = int32(1 + i%int(s.cfg.NVocab-1))
			}
			if err := s.Decode(toks, engine.LogitsLast); err != nil {
				t.Fatal(err)
			}
			g := s.gr.g
			// ops that compute nothing (ggml-cpu skips them)
			free := 0
			for _, op := range []string{"NONE", "VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE"} {
				free += g.CountOps(op)
			}
			want := 0
			for op, n := range tc.ops {
				want += n
				if got := g.CountOps(op); got != n {
					t.Errorf("%s nodes: %d, llama.cpp's graph has %d", op, got, n)
				}
			}
			if got := g.NNodes() - free; got != want {
				t.Errorf("%d computing nodes, llama.cpp's graph has %d (without its mask copies)", got, want)
			}
		})
	}
}
