package native

import (
	"bufio"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/sample"
	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/internal/synth"
	"github.com/edgellm/edgellm/kernels"
)

// repackTied is a small SYNTHETIC llama-3.2-like model: tied embeddings
// (the output head is token_embd, repacked as a copy) and llama-3 RoPE
// factors, every matrix row count a multiple of 8.
var repackTied = synth.Shape{Name: "repack-tied", NEmbd: 256, NLayer: 4, NHead: 8, NHeadKV: 4, NFF: 512,
	NCtx: 2048, RopeBase: 500000, RMSEps: 1e-5, TiedEmbeddings: true, Llama3Rope: true}

// requireRepack skips where ggml has no repacked Q4_0 kernel (x86-64
// without AVX2) and fails when the build lacks CPU_REPACK (the Makefile
// defines GGML_USE_CPU_REPACK by default).
func requireRepack(t *testing.T) {
	t.Helper()
	if !kernels.RepackAvailable() {
		t.Fatal("the build must define GGML_USE_CPU_REPACK (eval \"$(make -s env)\")")
	}
	if runtime.GOARCH != "amd64" || !cpu.X86.HasAVX2 {
		t.Skip("no AVX2: ggml has no repacked Q4_0 kernel on this CPU")
	}
}

// wantRepack computes from the GGUF header alone what repacking a Q4_0
// llama model must cost: every mul_mat weight (the seven per layer, the
// output head or, when tied, a copy of token_embd) of type Q4_0 with a row
// count that is a multiple of 8 (ggml's q4_0_8x8 on AVX2).
func wantRepack(t *testing.T, path string) (n int, bytes int64, outCopy bool) {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ok := func(ti *gguf.TensorInfo) bool { return ti.Type == gguf.Q4_0 && len(ti.Dims) == 2 && ti.Dims[1]%8 == 0 }
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		name := ti.Name
		if !strings.HasPrefix(name, "blk.") && name != "output.weight" || strings.HasSuffix(name, "_norm.weight") {
			continue
		}
		if ok(ti) {
			n, bytes = n+1, bytes+ti.Size
		}
	}
	if _, has := f.Tensor("output.weight"); !has {
		if te, _ := f.Tensor("token_embd.weight"); ok(te) {
			n, bytes, outCopy = n+1, bytes+te.Size, true
		}
	}
	return n, bytes, outCopy
}

// TestRepackStats: what the load report says repacking cost, against the
// header's arithmetic; that the memory is anonymous (smaps); and that
// --repack on a model with nothing eligible (Q8_0, F32) is not an error.
func TestRepackStats(t *testing.T) {
	requireRepack(t)
	tests := []struct {
		name     string
		path     func(t *testing.T) string
		wantSome bool
	}{
		{"synth tinyllama-quarter q4_0", func(t *testing.T) string { return synthModel(t, tinyLlamaQuarter, gguf.Q4_0) }, true},
		{"synth tied q4_0", func(t *testing.T) string { return synthModel(t, repackTied, gguf.Q4_0) }, true},
		{"synth tied q8_0 (no repacked Q8_0 kernel in this ggml)", func(t *testing.T) string { return synthModel(t, repackTied, gguf.Q8_0) }, false},
		{"stories260K f32", func(t *testing.T) string { return sharedtest.Stories260K(t) }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path(t)
			e, err := Load(path, Options{Threads: 1, NoVocab: true, Repack: true})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			st := e.sets[0].Repack
			n, bytes, outCopy := wantRepack(t, path)
			t.Logf("%+v; header: %d tensors, %d bytes", st, n, bytes)
			if got := (st.Tensors > 0); got != tc.wantSome {
				t.Fatalf("repacked %d tensors, want some: %v", st.Tensors, tc.wantSome)
			}
			if st.Tensors != n || st.Bytes != bytes || st.OutputCopy != outCopy {
				t.Errorf("stats %+v, want %d tensors, %d bytes, output copy %v", st, n, bytes, outCopy)
			}
			// Padding: at most one alignment step between tensors.
			if st.BufferBytes < st.Bytes || st.BufferBytes > st.Bytes+int64(st.Tensors)*kernels.RepackAlignment() {
				t.Errorf("buffer %d bytes for %d bytes of tensors", st.BufferBytes, st.Bytes)
			}
			if r := e.Report(); len(r.Repack) != 1 || r.RepackBytes() != st.BufferBytes || e.Info().RepackBytes != st.BufferBytes {
				t.Errorf("report %+v / info %d, want %d bytes", r.Repack, e.Info().RepackBytes, st.BufferBytes)
			}
			// Huge-page advice covers the whole 2 MiB pages inside the
			// buffer (kernels.TestRepackHugePages checks the VMA flags).
			if st.HugePageBytes < 0 || st.HugePageBytes > st.BufferBytes || (st.BufferBytes >= 64<<20 && st.HugePageBytes == 0) ||
				e.Info().RepackHugePageBytes != st.HugePageBytes {
				t.Errorf("huge pages: %d advised of a %d-byte buffer, info %d", st.HugePageBytes, st.BufferBytes, e.Info().RepackHugePageBytes)
			}
			if st.Tensors == 0 {
				if e.sets[0].repack != nil {
					t.Error("a repack buffer without repacked tensors")
				}
				return
			}
			anon, fileBacked := smapsRange(t, e.sets[0].repack.Base(), st.BufferBytes)
			ps := int64(os.Getpagesize())
			if fileBacked || anon < st.BufferBytes/ps*ps-ps {
				t.Errorf("repack buffer: %d anonymous bytes (file-backed VMA: %v), want ≥ %d", anon, fileBacked, st.BufferBytes-ps)
			}
		})
	}
}

// smapsRange sums the Anonymous bytes of the VMAs overlapping [base,
// base+size) and reports whether any of them maps a file.
func smapsRange(t *testing.T, base uintptr, size int64) (anon int64, fileBacked bool) {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("smaps: %v", err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(fields[0], "-"); ok && !strings.HasSuffix(fields[0], ":") {
			a, err1 := strconv.ParseUint(lo, 16, 64)
			b, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil {
				continue
			}
			in = uintptr(a) < base+uintptr(size) && uintptr(b) > base
			if in && len(fields) >= 6 && !strings.HasPrefix(fields[5], "[") {
				fileBacked = true
			}
			continue
		}
		if in && fields[0] == "Anonymous:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			anon += kb << 10
		}
	}
	return anon, fileBacked
}

// repackModels are the SYNTHETIC Q4_0 models TestRepackLogits and
// TestParityRepacked decode: a quarter-width TinyLlama and one with a tied
// output head.
var repackModels = []struct {
	name    string
	sh      synth.Shape
	threads int
}{{"tinyllama-quarter", tinyLlamaQuarter, 1}, {"tied", repackTied, 1}}

// TestRepackLogits: the native engine with repacked weights against itself
// without, on the same tokens (the plain run's greedy choices). Both
// compute the same integer block products on Q8_0-quantized activations
// (kernels.TestRepackMulMat); the repacked kernels add the per-block float
// terms in another order, a few float32 ulps per dot product (the first
// steps here differ by ~3e-7). Such a difference occasionally moves an
// activation across a Q8_0 rounding boundary in a later product: one input
// then changes by a whole quantization step (1/127 of its block's largest
// value), a rounding choice as valid as the other, and the KV keeps it, so
// every later step differs by a similar amount. Measured on these SYNTHETIC
// models (random weights, which amplify a perturbation more than trained
// ones): after such a flip max |Δlogit| 2–7% of the logits' RMS, mean KL
// 3e-5–1e-4 nats. The bounds leave room for other CPUs' kernels (another
// AVX2/AVX-512 code path flips elsewhere): max |Δlogit| ≤ 15% of the RMS,
// mean KL ≤ 1e-3 nats, and the greedy choice the same wherever the
// reference's top two logits are further apart than twice the step's
// largest difference (otherwise a flip may legitimately reorder them).
func TestRepackLogits(t *testing.T) {
	requireRepack(t)
	for _, tc := range repackModels {
		t.Run(tc.name, func(t *testing.T) {
			path := synthModel(t, tc.sh, gguf.Q4_0)
			const n = 48
			sc := engine.SessionConfig{NCtx: n + 1, NBatch: 1, Threads: tc.threads, KVType: engine.KVF16, Attention: engine.AttentionFlash}
			nv := 0
			mk := func(repack bool) *Session {
				e, err := Load(path, Options{Threads: tc.threads, NoVocab: true, Repack: repack})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { e.Close() })
				nv = e.Config().NVocab
				s, err := e.newSession(sc)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
			ref, cand := mk(false), mk(true)
			lr, lc := make([]float32, nv), make([]float32, nv)
			tok := []int32{1}
			var klSum, worstRel float64
			for step := 0; step < n; step++ {
				for _, s := range []*Session{ref, cand} {
					if err := s.Decode(tok, engine.LogitsLast); err != nil {
						t.Fatal(err)
					}
				}
				if err := ref.Logits(0, lr); err != nil {
					t.Fatal(err)
				}
				if err := cand.Logits(0, lc); err != nil {
					t.Fatal(err)
				}
				var ss, maxD float64
				for i := range lr {
					ss += float64(lr[i]) * float64(lr[i])
					maxD = max(maxD, math.Abs(float64(lr[i]-lc[i])))
				}
				rms := math.Sqrt(ss / float64(nv))
				worstRel = max(worstRel, maxD/rms)
				if maxD > 0.15*rms || math.IsNaN(maxD) {
					t.Fatalf("step %d: max |Δlogit| %.3g > 15%% of the logits' RMS %.3g", step, maxD, rms)
				}
				tr, tcand := kernels.Argmax(lr), kernels.Argmax(lc)
				if tr != tcand {
					if gap := topGap(lr); gap > 2*maxD {
						t.Fatalf("step %d: greedy %d (repacked) vs %d, top-2 gap %.3g > 2·max|Δ| %.3g", step, tcand, tr, gap, 2*maxD)
					}
				}
				klSum += sample.KL(lr, lc)
				tok = []int32{tr}
			}
			t.Logf("SYNTHETIC %s Q4_0, %d threads: max |Δlogit| / RMS %.3g, mean KL %.3g", tc.sh.Name, tc.threads, worstRel, klSum/n)
			if kl := klSum / n; kl > 1e-3 {
				t.Errorf("mean KL %.3g > 1e-3", kl)
			}
		})
	}
}

// topGap is the difference between the two largest logits.
func topGap(l []float32) float64 {
	a, b := math.Inf(-1), math.Inf(-1)
	for _, v := range l {
		x := float64(v)
		if x > a {
			a, b = x, a
		} else if x > b {
			b = x
		}
	}
	return a - b
}
