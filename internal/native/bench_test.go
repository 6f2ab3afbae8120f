package native

import (
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// BenchmarkGraphBuild measures rebuilding the stories260K decode graph (what
// a step would cost without graph reuse) against a reused step.
func BenchmarkGraphBuild(b *testing.B) {
	e, err := Load(sharedtest.Stories260K(b), Options{NoVocab: true, Threads: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	s, err := e.newSession(engine.SessionConfig{NCtx: 512})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	key := graphKey{nTok: 1, nKV: 256, nOut: 1}
	b.Run("build", func(b *testing.B) {
		for b.Loop() {
			if err := s.gr.build(key, s.cfg, e.w, s.layers, s.kv, false); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("build+alloc", func(b *testing.B) {
		for b.Loop() {
			s.gr.build(key, s.cfg, e.w, s.layers, s.kv, false)
			if err := s.ga.Alloc(s.gr.g); err != nil {
				b.Fatal(err)
			}
		}
	})
	s.gr.key = graphKey{}
}

// BenchmarkDecodeStories260K is steady-state single-token decode (graph reused).
func BenchmarkDecodeStories260K(b *testing.B) {
	e, err := Load(sharedtest.Stories260K(b), Options{NoVocab: true, Threads: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	for _, flash := range []bool{false, true} {
		name := "classic"
		if flash {
			name = "flash"
		}
		b.Run(name, func(b *testing.B) {
			s, err := e.newSession(engine.SessionConfig{NCtx: 2048, Attention: att(flash)})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			tok := []int32{1}
			s.Decode(tok, engine.LogitsLast)
			for b.Loop() {
				if s.Len() == 200 {
					s.Truncate(1)
				}
				if err := s.Decode(tok, engine.LogitsLast); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
			b.ReportMetric(float64(s.Stats().GraphBuilds), "builds")
		})
	}
}

// TestDecodeDoesNotAllocate: a reused-graph decode step allocates nothing in Go.
func TestDecodeDoesNotAllocate(t *testing.T) {
	e, err := Load(sharedtest.Stories260K(t), Options{NoVocab: true, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s, err := e.newSession(engine.SessionConfig{NCtx: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tok := []int32{5}
	logits := make([]float32, e.Config().NVocab)
	s.Decode(tok, engine.LogitsLast)
	n := testing.AllocsPerRun(50, func() {
		s.Truncate(1) // stay within one KV padding bucket: same graph shape
		s.Decode(tok, engine.LogitsLast)
		s.Logits(0, logits)
	})
	if n != 0 {
		t.Fatalf("decode step allocates %v times", n)
	}
	if st := s.Stats(); st.GraphBuilds != 1 {
		t.Fatalf("graph built %d times for 52 same-shape steps", st.GraphBuilds)
	}
}
