package host

import (
	"testing"

	"github.com/edgellm/edgellm/abi"
)

// fakeLatency is a LayerLatencySampler with a fixed sample.
type fakeLatency struct {
	ll   LayerLatency
	have bool
}

func (f *fakeLatency) SetLayerLatencyEvery(int) error { return nil }
func (f *fakeLatency) LastLayerLatency(dst *LayerLatency) bool {
	if f.have {
		*dst = f.ll
	}
	return f.have
}

// TestFillLayerLatencyShape: the host reports what a latency sample was
// measured on (ABI 1.6, PresentLatencyShape): a verify batch of K+1 = 5
// tokens at KV position 300 is reported as such, so a policy does not read
// it as a slower plain step; a trace's values (SIMULATED) still win.
func TestFillLayerLatencyShape(t *testing.T) {
	f := &fakeLatency{ll: LayerLatency{Step: 32, Tokens: 5, Pos: 300, Layers: []float64{110, 120, 160}}, have: true}
	var s abi.Sensors
	fillLayerLatency(f, &s)
	if !s.Has(abi.PresentLayerLatency|abi.PresentLatencyShape) || s.LayerCount != 3 || s.LayerLatencyUS[2] != 160 {
		t.Fatalf("present %#x, %d layers, %v", s.Present, s.LayerCount, s.LayerLatencyUS[:3])
	}
	if s.LayerLatencyBatch != 5 || s.LayerLatencyPos != 300 {
		t.Fatalf("batch %d at %d, want 5 at 300", s.LayerLatencyBatch, s.LayerLatencyPos)
	}
	// No sample yet: nothing present.
	var none abi.Sensors
	fillLayerLatency(&fakeLatency{}, &none)
	if none.Present != 0 {
		t.Fatalf("no sample: present %#x", none.Present)
	}
	// A trace that filled the latency keeps its own shape.
	tr := abi.Sensors{Present: abi.PresentLayerLatency | abi.PresentLatencyShape, LayerLatencyBatch: 1, LayerLatencyPos: 7}
	fillLayerLatency(f, &tr)
	if tr.LayerLatencyBatch != 1 || tr.LayerLatencyPos != 7 {
		t.Fatalf("trace overwritten: batch %d at %d", tr.LayerLatencyBatch, tr.LayerLatencyPos)
	}
}
