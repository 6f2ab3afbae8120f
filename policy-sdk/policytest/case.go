package policytest

import (
	"testing"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/policy"
	"github.com/edgellm/edgellm/host/trace"
)

// Case is one scenario: a sequence of calls and the checks on their results.
type Case struct {
	Name string
	// Trace is a JSONL sensor trace (host/trace format). Each record is one
	// call; fields a record does not carry keep their earlier value.
	Trace string
	// Steps are the sensors of each call, used when Trace is "".
	Steps []abi.Sensors
	// Base holds the engine facts the trace or steps do not carry:
	// TiersAvailable (with PresentTiers), LayerCount and LayerLatencyUS (with
	// PresentLayerLatency), RepackLayersMax and RepackMBMax (with
	// PresentRepack: an engine with repacked weights, whose units in use
	// the simulation reports from the decision in force). For a trace it is
	// the starting state every record overlays; for Steps it fills those
	// facts when a step lacks them.
	Base abi.Sensors
	// Start is the engine's state before the first call (the first pre-fill).
	Start abi.Decision
	// Limits, when set, are the engine limits RunWasm's runtime clamps to;
	// otherwise they are derived from Base (see limitsFor).
	Limits *policy.Limits
	// AllowClamps lets RunWasm accept decisions the runtime had to clamp.
	AllowClamps bool
	// Check is called after every call with the sensors the policy saw and
	// the decision as applied.
	Check func(t *testing.T, step int, s *abi.Sensors, d *abi.Decision)
	// After is called once with every step of the run.
	After func(t *testing.T, steps []Step)
}

// Step is one call of a run.
type Step struct {
	Sensors  abi.Sensors
	Decision abi.Decision // as applied
}

// decider runs one call: d is pre-filled on entry and holds the applied
// decision on return.
type decider func(t *testing.T, s *abi.Sensors, d *abi.Decision)

// source yields the sensors of each call of a case.
type source struct {
	c    *Case
	recs []trace.Record
	rp   *trace.Replayer
	i    int
}

func newSource(t *testing.T, c *Case) *source {
	t.Helper()
	src := &source{c: c}
	if c.Trace != "" {
		recs, err := trace.ReadFile(c.Trace, trace.ReadOptions{OnError: trace.Stop})
		if err != nil {
			t.Fatalf("policytest: case %q: %v", c.Name, err)
		}
		src.recs = recs
		src.rp = trace.NewReplayer(recs)
	}
	return src
}

func (src *source) len() int {
	if src.rp != nil {
		return src.rp.Len()
	}
	return len(src.c.Steps)
}

// next fills s with the sensors of call i (engine state excluded).
func (src *source) next(s *abi.Sensors) {
	b := &src.c.Base
	if src.rp != nil {
		acc, _ := src.rp.Next()
		*s = *b
		r := trace.Record{TMs: acc.TimeNS / 1e6, Present: acc.Present & trace.FieldMask, Values: *acc}
		r.Apply(s)
	} else {
		*s = src.c.Steps[src.i]
		if !s.Has(abi.PresentTiers) && b.Has(abi.PresentTiers) {
			s.TiersAvailable = b.TiersAvailable
			s.Present |= abi.PresentTiers
		}
		if !s.Has(abi.PresentLayerLatency) && b.Has(abi.PresentLayerLatency) {
			s.LayerCount = b.LayerCount
			s.LayerLatencyUS = b.LayerLatencyUS
			s.Present |= abi.PresentLayerLatency
		}
		if !s.Has(abi.PresentRepack) && b.Has(abi.PresentRepack) {
			s.RepackLayersMax, s.RepackMBMax = b.RepackLayersMax, b.RepackMBMax
			s.Present |= abi.PresentRepack
		}
	}
	s.Step = uint64(src.i)
	src.i++
}

// engineState is the simulated engine: it applies decisions by the host's
// rule (policy.Apply) with every ability.
type engineState struct {
	cur      abi.Decision
	detached bool // the draft was detached (ABI 1.6 Decision.draft)
}

func (e *engineState) apply(d *abi.Decision) {
	e.cur = policy.Apply(e.cur, *d, policy.AllAbilities)
	switch e.cur.Draft {
	case abi.DraftDetach:
		e.detached = true
	case abi.DraftAttach:
		e.detached = false
	}
	e.cur.Draft = abi.DraftLeave // a request: the host pre-fills "leave"
}

// report writes the engine state into the Cur* fields of s and, when the
// case's engine has repacked weights (Base with PresentRepack and
// RepackLayersMax > 0), the units in use (clamped to the maximum, as the
// host's engine does) and their memory, proportional to the units; when
// the case has a draft (PresentDraft, draft_state not 0, draft_mb what it
// holds attached) its state after the policy's requests, draft_mb 0 while
// detached.
func (e *engineState) report(s *abi.Sensors) {
	c := &e.cur
	s.CurTier, s.CurSpecK, s.CurWindow, s.CurAnchors, s.CurKVType = c.Tier, c.SpecK, c.Window, c.Anchors, c.KVType
	s.CurLayerBits = c.LayerBits
	s.CurThreads = c.Threads
	s.Present |= abi.PresentCurrent
	if s.Has(abi.PresentRepack) && s.RepackLayersMax > 0 {
		c.RepackLayers = min(max(c.RepackLayers, 0), s.RepackLayersMax)
		s.RepackLayers = c.RepackLayers
		s.RepackMB = int32(int64(s.RepackMBMax) * int64(c.RepackLayers) / int64(s.RepackLayersMax))
	} else {
		s.Present &^= abi.PresentRepack
		s.RepackLayers, s.RepackLayersMax, s.RepackMB, s.RepackMBMax = 0, 0, 0, 0
	}
	if s.Has(abi.PresentDraft) && s.DraftState != abi.DraftNone {
		s.DraftState = abi.DraftAttached
		if e.detached {
			s.DraftState, s.DraftMB = abi.DraftDetached, 0
		}
	}
}

// run executes every case with call and returns the number of calls made.
func run(t *testing.T, cases []Case, prepare func(t *testing.T, c *Case) decider) int {
	t.Helper()
	total := 0
	for i := range cases {
		c := &cases[i]
		t.Run(c.Name, func(t *testing.T) {
			if c.Check == nil && c.After == nil {
				t.Fatal("policytest: case has neither Check nor After: it could not fail")
			}
			src := newSource(t, c)
			n := src.len()
			if n == 0 {
				t.Fatal("policytest: case has no steps (empty Trace and Steps)")
			}
			call := prepare(t, c)
			eng := engineState{cur: c.Start}
			steps := make([]Step, 0, n)
			for k := 0; k < n; k++ {
				var s abi.Sensors
				src.next(&s)
				eng.report(&s)
				d := eng.cur // the pre-fill
				seen := s    // the policy must not be able to change what Check sees
				call(t, &s, &d)
				if t.Failed() {
					return
				}
				eng.apply(&d)
				total++
				if c.Check != nil {
					c.Check(t, k, &seen, &d)
				}
				steps = append(steps, Step{Sensors: seen, Decision: d})
			}
			if c.After != nil {
				c.After(t, steps)
			}
		})
	}
	if total == 0 {
		t.Fatal("policytest: no test case ran")
	}
	return total
}
