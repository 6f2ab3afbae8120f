package native

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/sample"
	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/kernels"
)

// kvMemfd is the KV arena's memfd as /proc/self/smaps names it.
const kvMemfd = "/memfd:edgellm-kv (deleted)"

// memfdKB sums Rss and Pss (kB) of this process's mappings whose header
// line ends with name (mappingKB for names with spaces).
func memfdKB(t testing.TB, name string) (rss, pss int64) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if !strings.HasSuffix(f[0], ":") {
			in = strings.HasSuffix(line, " "+name)
			continue
		}
		if in && len(f) >= 2 {
			var n int64
			for _, c := range f[1] {
				n = n*10 + int64(c-'0')
			}
			switch f[0] {
			case "Rss:":
				rss += n
			case "Pss:":
				pss += n
			}
		}
	}
	return rss, pss
}

// TestKVRequantArena: a full 2048-token arena of the llama3.2-1b KV shape
// (16 layers, 8 KV heads × 64) requantized in place F16 → Q8_0 → Q4_0 →
// F16 holds, row for row, the bytes an out-of-place conversion of the same
// rows by the same ggml functions gives (the in-place order never reads a
// row it has overwritten), and after each step down the memfd keeps no
// more pages than the smaller rows cover (computed, no tolerance). Times
// and RSS/PSS are logged (BENCHMARKS.md).
func TestKVRequantArena(t *testing.T) {
	cfg := &Config{NLayer: 16, NEmbd: 2048, NHead: 32, NHeadKV: 8, HeadDim: 64}
	const slots = 2048
	a, err := NewKVArena(cfg, kernels.GGMLTypeF16, slots)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	width := cfg.NEmbdKV()
	rng := rand.New(rand.NewPCG(1, 2))
	f := make([]float32, slots*width)
	for il := range a.K {
		for _, v := range []bool{false, true} {
			for i := range f {
				f[i] = float32(rng.NormFloat64())
			}
			if _, err := kernels.QuantizeRows(uint32(kernels.GGMLTypeF16), f, a.region(il, v), slots, width); err != nil {
				t.Fatal(err)
			}
		}
	}
	used := make([]int, cfg.NLayer)
	for i := range used {
		used[i] = slots
	}
	ps := int64(os.Getpagesize())
	resident := func(typ kernels.GGMLType) int64 { // kB the rows cover
		return 2 * int64(cfg.NLayer) * ((typ.RowSize(int64(width))*slots + ps - 1) / ps * ps) / 1024
	}
	for _, to := range []engine.KVType{engine.KVQ8_0, engine.KVQ4_0, engine.KVF16} {
		from := a.Type
		toT, _ := kvGGMLType(to)
		// The expected bytes, converted out of place.
		var want [][]byte
		for il := range a.K {
			for _, v := range []bool{false, true} {
				if err := kernels.DequantizeRow(from, a.region(il, v)[:from.RowSize(int64(width))*slots], f); err != nil {
					t.Fatal(err)
				}
				w := make([]byte, toT.RowSize(int64(width))*slots)
				if _, err := kernels.QuantizeRows(uint32(toT), f, w, slots, width); err != nil {
					t.Fatal(err)
				}
				want = append(want, w)
			}
		}
		rss0, pss0 := memfdKB(t, kvMemfd)
		r, err := a.Requantize(cfg, to, used)
		if err != nil {
			t.Fatal(err)
		}
		rss1, pss1 := memfdKB(t, kvMemfd)
		t.Logf("llama3.2-1b KV shape, 2048 tokens × 16 layers, %s → %s: convert %v (%d rows), release %v (%d KiB); memfd RSS %d → %d kB, PSS %d → %d kB",
			from, a.Type, r.Convert, r.Rows, r.ReleaseDur, r.Released/1024, rss0, rss1, pss0, pss1)
		if a.Type != toT || a.RowK != toT.RowSize(int64(width)) || a.K[0].Type() != toT {
			t.Fatalf("arena type %s, row %d, tensor %s after requantizing to %s", a.Type, a.RowK, a.K[0].Type(), to)
		}
		for il := range a.K {
			for j, v := range []bool{false, true} {
				if got := a.region(il, v)[:len(want[2*il+j])]; !bytes.Equal(got, want[2*il+j]) {
					t.Fatalf("%s → %s: layer %d (v %v): in-place rows differ from the out-of-place conversion", from, to, il, v)
				}
			}
		}
		if toT.RowSize(1024) < from.RowSize(1024) {
			if max := resident(toT); rss1 > max {
				t.Errorf("%s → %s: the memfd keeps %d kB resident, the rows cover %d kB", from, to, rss1, max)
			}
			if rss0 < resident(from) {
				t.Errorf("%s: only %d kB resident before, the rows cover %d kB: nothing measured", from, rss0, resident(from))
			}
		}
	}
}

// TestKVRequantStories260K: SetKVType mid-generation keeps the positions
// (Len unchanged), rebuilds the graph, and the logits afterwards differ from
// a never-switched run but stay finite; going back up to F16 keeps what
// Q4_0 lost (the logits still differ). KL against the never-switched run is
// logged (BENCHMARKS.md). Types the arena cannot hold are refused with no
// change.
func TestKVRequantStories260K(t *testing.T) {
	e, err := Load(sharedtest.Stories260K(t), Options{Threads: 1, NoVocab: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	const steps, at1, at2 = 40, 10, 25
	run := func(t1, t2 engine.KVType) [][]float32 {
		s, err := e.newSession(engine.SessionConfig{NCtx: 128})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		return trace(t, s, steps, func(i int) {
			var to engine.KVType
			switch {
			case i == at1 && t1 != "":
				to = t1
			case i == at2 && t2 != "":
				to = t2
			default:
				return
			}
			n := s.Len()
			if _, err := s.SetKVType(to); err != nil {
				t.Fatal(err)
			}
			if s.Len() != n || s.kv.Type.String() != string(to) {
				t.Fatalf("after SetKVType(%s): Len %d (want %d), type %s", to, s.Len(), n, s.kv.Type)
			}
		})
	}
	ref := run("", "")
	meanKL := func(got [][]float32, from, to int) float64 {
		var sum float64
		for i := from; i < to; i++ {
			for _, v := range got[i] {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("step %d: non-finite logit", i)
				}
			}
			sum += sample.KL(ref[i], got[i])
		}
		return sum / float64(to-from)
	}
	for _, c := range []struct{ t1, t2 engine.KVType }{{engine.KVQ8_0, ""}, {engine.KVQ4_0, ""}, {engine.KVQ8_0, engine.KVQ4_0}, {engine.KVQ4_0, engine.KVF16}} {
		got := run(c.t1, c.t2)
		sameLogits(t, "before the switch", ref[:at1], got[:at1])
		k1, k2 := meanKL(got, at1, at2), meanKL(got, at2, steps+1)
		t.Logf("stories260K, F16 KV → %s at step %d → %s at step %d: mean KL vs no switch %.3g (steps %d–%d), %.3g (steps %d–%d)",
			c.t1, at1, c.t2, at2, k1, at1, at2-1, k2, at2, steps)
		if !(k1 > 0) {
			t.Errorf("→ %s: KL %g after the switch: it changed nothing", c.t1, k1)
		}
		if c.t2 == engine.KVF16 && !(k2 > 0) {
			t.Errorf("back up to f16: KL %g, but the Q4_0 rows lost precision for good", k2)
		}
	}

	// 256 slots: q8_0 rows (34 B) take 3 pages a region, f16 (64 B) 4.
	s, err := e.newSession(engine.SessionConfig{NCtx: 256, KVType: engine.KVQ8_0})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	trace(t, s, 2, nil)
	for _, c := range []struct {
		to   engine.KVType
		want string
	}{{engine.KVF16, "does not fit"}, {engine.KVF32, "between f16, q8_0 and q4_0"}, {"q9", "unknown KV type"}} {
		if _, err := s.SetKVType(c.to); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("SetKVType(%s) on a q8_0 arena: %v, want %q", c.to, err, c.want)
		}
		if s.kv.Type != kernels.GGMLTypeQ8_0 {
			t.Fatalf("a refused SetKVType(%s) changed the type to %s", c.to, s.kv.Type)
		}
	}
}
