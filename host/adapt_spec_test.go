package host

import (
	"testing"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/internal/native"
)

// fakeSpec records what the adapter applies.
type fakeSpec struct {
	k         int
	pMin      float32
	dThreads  int
	dMask     uint64
	vMask     uint64
	measuring bool
	ss        native.SpecSensors
}

func (f *fakeSpec) SetK(k int) int                     { f.k = min(max(k, 0), 8); return f.k }
func (f *fakeSpec) K() int                             { return f.k }
func (f *fakeSpec) SetPMin(p float32)                  { f.pMin = p }
func (f *fakeSpec) Sensors() native.SpecSensors        { return f.ss }
func (f *fakeSpec) SetMeasure(on bool)                 { f.measuring = on }
func (f *fakeSpec) SetVerifyCPUMask(mask uint64) error { f.vMask = mask; return nil }
func (f *fakeSpec) SetDraftThreads(threads int, mask uint64) error {
	f.dThreads, f.dMask = threads, mask
	return nil
}

// TestAdapterSpec: the 1.1 sensors come from the Speculator's
// measurements with their presence bits, and the decision's K, p_min,
// draft threads/mask and verify mask reach it.
func TestAdapterSpec(t *testing.T) {
	a := &Adapter{}
	var s abi.Sensors
	a.fillSpec(&s)
	if !s.Has(abi.PresentSpecKMax) || s.SpecKMax != 0 || s.Has(abi.PresentSpecAccept) {
		t.Fatalf("no speculator: KMax %d, present %#x", s.SpecKMax, s.Present)
	}
	f := &fakeSpec{k: 3}
	f.ss.KMax, f.ss.HaveAccept, f.ss.HaveCost = 8, true, true
	f.ss.AcceptByPos[0], f.ss.AcceptByPos[1], f.ss.MeanAccepted = 0.9, 0.8, 1.7
	f.ss.DraftCost, f.ss.VerifyCost[0], f.ss.VerifyCost[3] = 0.2, 1, 1.3
	a.attachSpeculation(f)
	if !f.measuring || a.cur.SpecK != 3 {
		t.Fatalf("attach: measuring %v, K %d", f.measuring, a.cur.SpecK)
	}
	s = abi.Sensors{}
	a.fillSpec(&s)
	if !s.Has(abi.PresentSpecAccept|abi.PresentSpecCost|abi.PresentSpecKMax) || s.SpecKMax != 8 ||
		s.SpecAcceptByPos[1] != 0.8 || s.SpecMeanAccepted != 1.7 || s.SpecDraftCost != 0.2 || s.SpecVerifyCost[3] != 1.3 {
		t.Fatalf("sensors %+v", s)
	}
	old := a.cur
	d := old
	d.SpecK, d.SpecPMin, d.DraftThreads, d.DraftCPUMask, d.VerifyCPUMask = 12, 0.4, 1, 0b01, 0b10
	changes := a.applyKnobs(1, &d, old)
	if f.k != 8 || d.SpecK != 8 || f.pMin != 0.4 || f.dThreads != 1 || f.dMask != 0b01 || f.vMask != 0b10 {
		t.Fatalf("applied: %+v, decision K %d", f, d.SpecK)
	}
	if len(changes) != 3 {
		t.Fatalf("changes %q", changes)
	}
}
