package native

import (
	"math"
	"runtime"
	"sort"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/cputime"
)

// TestLayerLatency: sampled every 3rd step only; on a sampled step every
// layer has a positive time, the segments (embedding, layers, head) tile
// the node stamps exactly, and they add up to the step's compute time
// measured around the graph within 10% (median over the samples: the tail
// after the last node is the threadpool's return).
func TestLayerLatency(t *testing.T) {
	files := ladder(t)
	e, err := Load(files[0], Options{Threads: 1, NoVocab: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s, err := e.newSession(engine.SessionConfig{NCtx: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.SetLayerLatencyEvery(3); err != nil {
		t.Fatal(err)
	}
	var ll LayerLatency
	if s.LastLayerLatency(&ll) {
		t.Fatal("a sample before any step")
	}
	var ratios []float64
	for i := 0; i < 60; i++ {
		if err := s.Decode([]int32{int32(1 + i%500)}, engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
		got := s.LastLayerLatency(&ll)
		if (i+1) < 3 && got {
			t.Fatalf("step %d: sampled before step 3", i+1)
		}
		if !got || ll.Step != i+1 {
			continue
		}
		// What the sample was measured on (ABI 1.6's layer_latency_batch
		// and layer_latency_pos): one token at KV position i.
		if ll.Step%3 != 0 || len(ll.Layers) != 5 || ll.Tokens != 1 || ll.Pos != i {
			t.Fatalf("sample %+v", ll)
		}
		sum := ll.Embed + ll.Head
		for il, us := range ll.Layers {
			if !(us > 0) {
				t.Fatalf("step %d layer %d: %v µs", ll.Step, il, us)
			}
			sum += us
		}
		ratios = append(ratios, sum/ll.Total)
	}
	if len(ratios) != 20 {
		t.Fatalf("%d samples in 60 steps, want 20", len(ratios))
	}
	sort.Float64s(ratios)
	if med := ratios[len(ratios)/2]; math.Abs(med-1) > 0.10 || ratios[len(ratios)-1] > 1+1e-9 {
		t.Fatalf("segments / step time: median %.3f, all %v", med, ratios)
	}
	// Steps 61, 62 plain, step 63 (sampled) a verify-like batch of 5 tokens
	// at position 62.
	for _, batch := range [][]int32{{7}, {8}, {9, 10, 11, 12, 13}} {
		if err := s.Decode(batch, engine.LogitsAll); err != nil {
			t.Fatal(err)
		}
	}
	if !s.LastLayerLatency(&ll) || ll.Step != 63 || ll.Tokens != 5 || ll.Pos != 62 {
		t.Fatalf("batch sample: step %d, %d tokens at %d; want step 63, 5 tokens at 62", ll.Step, ll.Tokens, ll.Pos)
	}
	if err := s.SetLayerLatencyEvery(0); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkLayerLatencyOverhead times decode steps with every step sampled
// against none, alternating blocks in one process, over the thread's CPU
// time (one thread: the caller computes the graph, and a loaded machine's
// descheduling does not count); it reports the ratio (sampled / plain) of
// the median block time. go test ./internal/native
// -run XXX -bench LayerLatencyOverhead -benchtime 1x
func BenchmarkLayerLatencyOverhead(b *testing.B) {
	e, err := Load(ladder(b)[0], Options{Threads: 1, NoVocab: true})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	s, err := e.newSession(engine.SessionConfig{NCtx: 256})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	block := func(every int) float64 {
		if err := s.SetLayerLatencyEvery(every); err != nil {
			b.Fatal(err)
		}
		s.Truncate(0)
		c0 := cputime.Thread()
		for i := 0; i < 100; i++ {
			if err := s.Decode([]int32{int32(1 + i%500)}, engine.LogitsLast); err != nil {
				b.Fatal(err)
			}
		}
		return (cputime.Thread() - c0).Seconds()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var on, off []float64
	for r := 0; r < 41; r++ {
		off = append(off, block(0))
		on = append(on, block(1))
	}
	sort.Float64s(on)
	sort.Float64s(off)
	b.ReportMetric(on[len(on)/2]/off[len(off)/2], "sampled/plain")
}
