package main

import (
	"testing"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/policy-sdk/policytest"
)

// A latency model of a 6-layer model with five sliding-window layers
// (window 64) and one full-attention layer (layer 5), the 5:1 pattern of
// the families with sliding layers: a layer's time is its weight reads,
// which a batch of B tokens makes 1 + 0.3·(B−1) times longer (a verify
// batch of 9 costs 3.4 plain steps, about what stories260K's
// spec_verify_cost reads here), plus attention, B × the positions it
// attends × 0.05 µs. Nothing else varies: the trace is exact, so a move
// is the controller's, not noise's.
const (
	latLayers = 6
	latWindow = 64
)

func latencyModel(l, batch, pos int) float32 {
	mat := 20 * (1 + 0.3*float32(batch-1))
	att := pos
	if l != latLayers-1 {
		att = min(pos, latWindow)
	}
	return mat + 0.05*float32(batch)*float32(att)
}

// latencySteps is n samples, one per call, as the host fills them: sample
// i was measured at context pos(i) on a batch of batch(i) tokens, with
// ABI 1.6's shape when shape is set; slow(i, l) multiplies a layer's time
// (the SIMULATED slowdown).
func latencySteps(n int, shape bool, batch func(i int) int, slow func(i, l int) float32) []abi.Sensors {
	out := make([]abi.Sensors, n)
	for i := range out {
		s := &out[i]
		s.Present = abi.PresentManifest | abi.PresentTiers | abi.PresentTokPerSecSmoothed | abi.PresentLayerLatency
		s.TiersAvailable, s.LayerCount = 1, latLayers
		s.TokPerSecSmoothed = TargetTokPerSec // in band: no throughput move
		for l := 0; l < latLayers; l++ {
			s.LayerSensRank[l], s.LayerMinBits[l], s.LayerMaxBits[l] = uint8(l), 4, 8
		}
		pos, b := 15+4*i, batch(i) // 4 tokens of context per sample
		for l := 0; l < latLayers; l++ {
			s.LayerLatencyUS[l] = latencyModel(l, b, pos) * slow(i, l)
		}
		if shape {
			s.Present |= abi.PresentLatencyShape
			s.LayerLatencyBatch, s.LayerLatencyPos = int32(b), int32(pos)
		}
	}
	return out
}

// kBlocks is speculation switching K every 10 samples: off, 8, 4, 8, 2.
func kBlocks(i int) int { return 1 + []int{0, 8, 4, 8, 2}[(i/10)%5] }

func noSlow(int, int) float32 { return 1 }

func layerMoves(steps []policytest.Step) []move {
	var out []move
	for k, st := range steps {
		for l := 0; l < latLayers; l++ {
			if a, b := st.Sensors.CurLayerBits[l], st.Decision.LayerBits[l]; a != b {
				out = append(out, move{k, l, int(a), int(b)})
			}
		}
	}
	return out
}

func latStart() abi.Decision {
	d := abi.Decision{Window: 4096, Threads: 2, CadenceSteps: 1}
	for i := 0; i < latLayers; i++ {
		d.LayerBits[i] = 8
	}
	return d
}

// slowAt is the sample at which the SIMULATED slowdown starts: in a K = 8
// block (samples 30–39), five samples after K came back to 8, long after
// the context passed every window. (Started at sample 30 or 33, the first
// samples after K returned, the threshold is still relaxed by the context
// grown while K was elsewhere, and the slowdown is folded into the average
// unseen: a limit of per-K baselines, stated in precision.go.)
const slowAt = 35

func latencyCases() []policytest.Case {
	return []policytest.Case{{
		// Issue #30.3: K changing between 0 and 8 while the context grows
		// from 15 to 811 tokens moves no layer, with the batch size and
		// position the host reports (ABI 1.6).
		Name:  "latency: growing context and changing K are no spike",
		Steps: latencySteps(200, true, kBlocks, noSlow),
		Start: latStart(),
		After: func(t *testing.T, steps []policytest.Step) {
			if ms := layerMoves(steps); len(ms) != 0 {
				t.Fatalf("spurious demotions: %v", ms)
			}
		},
	}, {
		// A SIMULATED 2× slowdown of sliding layer 2 from sample 35 (in a
		// K = 8 block) is caught at that sample: N = 1 sample, 16 decode
		// steps at the host's DefaultLayerLatencyEvery.
		Name: "latency: one slow layer is caught at its first sample within a run of one K",
		Steps: latencySteps(60, true, kBlocks, func(i, l int) float32 {
			if i >= slowAt && l == 2 {
				return 2 // SIMULATED
			}
			return 1
		}),
		Start: latStart(),
		After: func(t *testing.T, steps []policytest.Step) {
			if ms := layerMoves(steps); len(ms) != 1 || ms[0] != (move{slowAt, 2, 8, 4}) {
				t.Fatalf("moves %v, want only layer 2 8→4 at sample %d", ms, slowAt)
			}
		},
	}}
}

func TestLatencyShapeNative(t *testing.T) {
	policytest.RunNative(t, Decide, latencyCases(), policytest.WithReset(reset))
}

func TestLatencyShapeWasm(t *testing.T) {
	policytest.RunWasm(t, policytest.Build(t, "."), latencyCases())
}

// Without the 1.6 shape (an older host) the same trace does read as
// spikes: the full-attention layer's ratio to its siblings jumps when K
// goes from 0 to 8. This is what the batch-keyed baselines fix; if it ever
// stops failing, the trace no longer tests them.
func TestLatencyShapeNeeded(t *testing.T) {
	reset()
	var moved int
	s := latencySteps(200, false, kBlocks, noSlow)
	cur := latStart()
	for i := range s {
		s[i].Present |= abi.PresentCurrent
		s[i].CurLayerBits = cur.LayerBits
		d := cur
		Decide(&s[i], &d)
		for l := 0; l < latLayers; l++ {
			if d.LayerBits[l] != cur.LayerBits[l] {
				moved++
			}
		}
		cur = d
	}
	reset()
	if moved == 0 {
		t.Fatal("no spurious move without the batch size: the trace does not exercise it")
	}
	t.Logf("%d spurious moves without ABI 1.6's batch size", moved)
}
