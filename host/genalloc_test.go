package host

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestGenerateAllocsPerToken: Generate allocates nothing per token on any
// decode path: plain, and with a skip:N, self:TYPE, ngram or draft model
// Draft. The per-token figure is the difference between a long and a short
// call on fresh sessions (the per-call allocations cancel) divided by the
// extra tokens; a graph rebuild when the KV crosses a 256-position padding
// boundary costs about one allocation per graph (TestSpecAllocsAmortised),
// so the bound is 0.05 per token, not 0.
func TestGenerateAllocsPerToken(t *testing.T) {
	d := filepath.Join(sharedtest.Dir(), "models", "derived")
	eng, err := Load(filepath.Join(d, "stories260K-ff192-f32.gguf"),
		LoadOptions{Engine: "native", LayerSets: []string{filepath.Join(d, "stories260K-ff192-Q8_0.gguf")}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	const short, long = 16, 400
	mallocs := func(t *testing.T, spec string, n int) uint64 {
		sess, err := eng.NewSession(SessionConfig{NCtx: 512, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		o := GenerateOptions{NPredict: n, Sampling: GreedySampling(), IgnoreEOG: true}
		if o.Prompt, err = Tokenize(sess, "Once upon a time"); err != nil {
			t.Fatal(err)
		}
		if spec != "" {
			dr, err := AttachDraft(eng, sess, DraftOptions{Spec: spec, K: 3, Sampling: GreedySampling()})
			if err != nil {
				t.Fatal(err)
			}
			defer dr.Close()
			o.Draft = dr
		}
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		st, err := Generate(context.Background(), sess, o)
		runtime.ReadMemStats(&m1)
		if err != nil || st.GeneratedTokens != n {
			t.Fatalf("%d tokens, %v", st.GeneratedTokens, err)
		}
		return m1.Mallocs - m0.Mallocs
	}
	for _, spec := range []string{"", "skip:3", "self:Q8_0", "ngram", filepath.Join(d, "stories260K-first4layers.gguf")} {
		name := spec
		if name == "" {
			name = "plain"
		}
		t.Run(filepath.Base(name), func(t *testing.T) {
			mallocs(t, spec, short) // warm: first-use allocations of the process
			// MemStats counts the whole process: a goroutine an earlier
			// test left running can allocate during one call (one stray
			// allocation in a loaded make test). Up to three attempts:
			// an allocation of the decode path recurs in every one.
			var a, b uint64
			for try := 0; try < 3; try++ {
				a, b = mallocs(t, spec, short), mallocs(t, spec, long)
				if b == a {
					break
				}
			}
			per := (float64(b) - float64(a)) / (long - short)
			t.Logf("%s: %d allocations for %d tokens, %d for %d: %.4f per token", name, a, short, b, long, per)
			// An n-gram draft's length varies with its matches: every
			// verify size's graph is built when K is set, so it too
			// allocates nothing per token.
			if b != a {
				t.Errorf("%s: %d more heap allocations for %d more tokens, want 0 (a graph rebuild every 256 positions reuses its Graph)", name, b-a, long-short)
			}
		})
	}
}
