package llamacpp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/kernels"
)

func derived(t *testing.T, name string) string {
	return sharedtest.Path(t, "models/derived/"+name)
}

func newSession(t *testing.T, e *Engine) *Session {
	t.Helper()
	s, err := e.NewSession(engine.SessionConfig{NCtx: 512, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s.(*Session)
}

// greedy decodes n tokens greedily after the session's current state; the
// first token comes from logits (the last Decode's final position).
func greedy(t *testing.T, s *Session, logits []float32, n int, before func(step int)) []int32 {
	t.Helper()
	out := make([]int32, 0, n)
	for i := 0; i < n; i++ {
		tok := kernels.Argmax(logits)
		out = append(out, tok)
		if before != nil {
			before(i + 1)
		}
		if err := s.Decode([]int32{tok}, engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
		if err := s.Logits(0, logits); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// (a) Migrating between two contexts of the same model continues
// bit-identically to no migration (greedy, 64 tokens).
func TestSwapSameModelIsIdentical(t *testing.T) {
	p := sharedtest.Stories260K(t)
	run := func(swap bool) []int32 {
		var e *Engine
		var err error
		if swap {
			e, err = LoadLadder([]string{p, p}, 0, Options{})
		} else {
			e, err = Load(p, Options{})
		}
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		s := newSession(t, e)
		defer s.Close()
		logits := make([]float32, e.Info().NVocab)
		if err := s.Decode([]int32{e.Vocab().BOS()}, engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
		s.Logits(0, logits)
		return greedy(t, s, logits, 64, func(step int) {
			if swap && (step == 16 || step == 40) {
				_, cur := e.Tiers()
				tm, err := s.SwapTier(1 - cur)
				if err != nil {
					t.Fatal(err)
				}
				if tm.StateBytes == 0 || tm.Load <= 0 {
					t.Fatalf("swap timings %+v", tm)
				}
			}
		})
	}
	plain, swapped := run(false), run(true)
	for i := range plain {
		if plain[i] != swapped[i] {
			t.Fatalf("token %d: %d without migration, %d with", i, plain[i], swapped[i])
		}
	}
}

// (b) Across tiers the migrated KV agrees with a freshly prefilled KV of the
// new tier. Prefix on tier A, swap to B, teacher-force 100 positions of a story
// and compare B's top-1 with B prefilled from scratch. ≥ 95% holds for moves
// between F32, Q8_0 and Q5_0 in either direction (measured: F32→Q8_0 0.95,
// Q8_0→Q5_0 0.98, Q4_0→Q8_0 0.95). Moves into Q4_0 measure 0.89–0.90 on this
// 260K-parameter model whose Q4_0 tier is itself far from the others (its
// greedy text leaves F32's after ~25 tokens; fresh Q8_0 and fresh Q4_0 agree
// on 0.80 of these positions, Q5_0 and Q4_0 on 0.73): for those the
// migrated KV must be closer to the new tier than the old tier is. Re-decoding
// the last R prefix tokens on the new tier after the swap did not close the
// gap (0.88–0.92 for R ≤ 16, 0.94–0.96 at R = 32): the difference is spread
// over the whole prefix.
func TestSwapAcrossTiersAgreesWithFreshPrefill(t *testing.T) {
	text, err := os.ReadFile(sharedtest.Path(t, "text/stories.txt"))
	if err != nil {
		t.Fatal(err)
	}
	const prefix, positions = 50, 100
	tests := []struct {
		from, to string
		min      float64
	}{
		{"stories260K-ff192-f32.gguf", "stories260K-ff192-Q8_0.gguf", 0.95},
		{"stories260K-ff192-Q8_0.gguf", "stories260K-ff192-Q5_0.gguf", 0.95},
		{"stories260K-ff192-Q4_0.gguf", "stories260K-ff192-Q8_0.gguf", 0.95},
		{"stories260K-ff192-Q8_0.gguf", "stories260K-ff192-Q4_0.gguf", 0},
		{"stories260K-ff192-Q5_0.gguf", "stories260K-ff192-Q4_0.gguf", 0},
	}
	for _, tt := range tests {
		t.Run(tt.from+"→"+tt.to, func(t *testing.T) {
			from, to := derived(t, tt.from), derived(t, tt.to)
			e, err := LoadLadder([]string{from, to}, 0, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			toks, err := e.Vocab().Tokenize(string(text), true)
			if err != nil {
				t.Fatal(err)
			}
			if len(toks) < prefix+positions {
				t.Fatalf("story text has %d tokens, need %d", len(toks), prefix+positions)
			}
			toks = toks[:prefix+positions]
			logits := make([]float32, e.Info().NVocab)

			// Migrated: prefix on A, swap to B, then one token at a time.
			s := newSession(t, e)
			if err := s.Decode(toks[:prefix], engine.LogitsLast); err != nil {
				t.Fatal(err)
			}
			if _, err := s.SwapTier(1); err != nil {
				t.Fatal(err)
			}
			migrated := make([]int32, positions)
			for i := range migrated {
				if err := s.Decode(toks[prefix+i:prefix+i+1], engine.LogitsLast); err != nil {
					t.Fatal(err)
				}
				s.Logits(0, logits)
				migrated[i] = kernels.Argmax(logits)
			}
			s.Close()

			freshTo, freshFrom := freshArgmax(t, to, toks, prefix), freshArgmax(t, from, toks, prefix)
			agree, tierAgree := 0, 0
			for i := range migrated {
				if migrated[i] == freshTo[i] {
					agree++
				}
				if freshFrom[i] == freshTo[i] {
					tierAgree++
				}
			}
			rate, tierRate := float64(agree)/positions, float64(tierAgree)/positions
			t.Logf("top-1 agreement with a fresh prefill of the new tier: migrated %.2f; old tier fresh %.2f", rate, tierRate)
			if tt.min > 0 && rate < tt.min {
				t.Fatalf("migrated agreement %.2f < %.2f", rate, tt.min)
			}
			if tt.min == 0 && rate <= tierRate {
				t.Fatalf("migrated agreement %.2f is no closer to the new tier than the old tier (%.2f)", rate, tierRate)
			}
		})
	}
}

// freshArgmax prefills toks on model path and returns the argmax at each
// position from prefix on.
func freshArgmax(t *testing.T, path string, toks []int32, prefix int) []int32 {
	t.Helper()
	e, err := Load(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s := newSession(t, e)
	defer s.Close()
	if err := s.Decode(toks, engine.LogitsAll); err != nil {
		t.Fatal(err)
	}
	logits := make([]float32, e.Info().NVocab)
	out := make([]int32, len(toks)-prefix)
	for i := range out {
		if err := s.Logits(prefix+i, logits); err != nil {
			t.Fatal(err)
		}
		out[i] = kernels.Argmax(logits)
	}
	return out
}

// writeVariant copies a GGUF, changing one KV (for the refusal tests). With
// key general.architecture, the arch-prefixed keys are renamed too.
func writeVariant(t *testing.T, src, key string, val gguf.Value) string {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out := filepath.Join(t.TempDir(), "variant.gguf")
	w, err := gguf.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range f.KV {
		if kv.Key == key {
			kv.Value = val
		}
		if key == "general.architecture" && strings.HasPrefix(kv.Key, "llama.") {
			name, _ := val.Str()
			kv.Key = name + strings.TrimPrefix(kv.Key, "llama")
		}
		if kv.Key == "general.alignment" {
			continue
		}
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	for _, ti := range f.Tensors {
		if err := w.AddTensor(ti.Name, ti.Dims, ti.Type); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteHeader(); err != nil {
		t.Fatal(err)
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		buf := make([]byte, ti.Size)
		if _, err := in.ReadAt(buf, f.AbsOffset(ti)); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// (c) A ladder whose files differ in architecture, vocabulary, layer count
// or KV shape is refused with a clear error before anything is loaded.
func TestLadderRefusesMismatch(t *testing.T) {
	base := sharedtest.Stories260K(t)
	tests := []struct {
		name, other, want string
	}{
		{"layer count", derived(t, "stories260K-first4layers.gguf"), "layer count"},
		{"vocabulary", sharedtest.Path(t, "models/vocab/ggml-vocab-llama-spm.gguf"), "vocabulary"},
		{"architecture", writeVariant(t, base, "general.architecture", gguf.String("mistral")), "architecture"},
		{"KV shape", writeVariant(t, base, "llama.attention.head_count_kv", gguf.Uint32(8)), "KV shape"},
		{"missing file", filepath.Join(t.TempDir(), "nope.gguf"), "nope.gguf"},
		{"single file", "", "at least 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			paths := []string{base, tt.other}
			if tt.other == "" {
				paths = paths[:1]
			}
			e, err := LoadLadder(paths, 0, Options{})
			if err == nil {
				e.Close()
				t.Fatal("ladder accepted")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not mention %q", err, tt.want)
			}
		})
	}
	// Same shape, different quantization: accepted.
	e, err := LoadLadder([]string{derived(t, "stories260K-ff192-Q8_0.gguf"), base}, 1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n, cur := e.Tiers(); n != 2 || cur != 1 {
		t.Fatalf("Tiers() = %d, %d", n, cur)
	}
	e.Close()
}

func TestSwapErrors(t *testing.T) {
	p := sharedtest.Stories260K(t)
	e, err := Load(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s := newSession(t, e)
	if _, err := s.SwapTier(1); err == nil {
		t.Fatal("swap on a plain model: want error")
	}
	l, err := LoadLadder([]string{p, p}, 0, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ls := newSession(t, l)
	if _, err := ls.SwapTier(5); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("swap to tier 5: %v", err)
	}
	if _, err := l.NewSession(engine.SessionConfig{}); err == nil {
		t.Fatal("second session on a ladder: want error")
	}
}

func TestKVBytesPerToken(t *testing.T) {
	e, err := Load(sharedtest.Stories260K(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// stories260K: 5 layers × (K + V) × 4 KV heads × head dim 8 = 320 values.
	// (llama.cpp cannot quantize this model's KV: head dim 8 < block 32.)
	want := map[engine.KVType]int64{engine.KVF16: 640, engine.KVF32: 1280}
	for kv, w := range want {
		s, err := e.NewSession(engine.SessionConfig{NCtx: 64, Threads: 1, KVType: kv})
		if err != nil {
			t.Fatalf("%s: %v", kv, err)
		}
		if got := s.(*Session).KVBytesPerToken(); got != w {
			t.Errorf("%s: %d bytes per token, want %d", kv, got, w)
		}
		s.Close()
	}
}
