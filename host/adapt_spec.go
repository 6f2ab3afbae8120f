package host

import (
	"fmt"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/internal/native"
)

// Speculative decoding under a policy (ABI 1.1): the adapter fills the
// speculation sensors from the Speculator's own measurements (acceptance by
// draft position, draft and verify costs relative to a plain target step,
// all measured on this machine) and applies Decision.SpecK, SpecPMin,
// DraftThreads/DraftCPUMask and VerifyCPUMask to it. Without an attached
// Speculator, K stays 0 and SpecKMax reads 0.

// speculation is what the adapter drives (*native.Speculator, attached by
// AttachDraft with DraftOptions.Policy).
type speculation interface {
	SetK(k int) int
	K() int
	SetPMin(p float32)
	Sensors() native.SpecSensors
	SetDraftThreads(threads int, mask uint64) error
	SetVerifyCPUMask(mask uint64) error
	SetMeasure(on bool)
}

var _ speculation = (*native.Speculator)(nil)

// attachSpeculation makes the adapter drive sp: the decision in force
// starts at sp's K.
func (a *Adapter) attachSpeculation(sp speculation) {
	a.spec = sp
	sp.SetMeasure(true) // the policy needs the costs measured
	a.cur.SpecK = int32(sp.K())
}

// fillSpec writes the 1.1 sensors.
func (a *Adapter) fillSpec(s *abi.Sensors) {
	if a.spec == nil {
		s.SpecKMax = 0
		s.Present |= abi.PresentSpecKMax
		return
	}
	ss := a.spec.Sensors()
	s.SpecKMax = int32(min(ss.KMax, abi.MaxSpecK))
	s.Present |= abi.PresentSpecKMax
	if ss.HaveAccept {
		copy(s.SpecAcceptByPos[:], ss.AcceptByPos[:])
		s.SpecMeanAccepted = ss.MeanAccepted
		s.Present |= abi.PresentSpecAccept
	}
	if ss.HaveCost {
		s.SpecDraftCost = ss.DraftCost
		copy(s.SpecVerifyCost[:], ss.VerifyCost[:])
		s.Present |= abi.PresentSpecCost
	}
}

// setSpecK sets the draft length and p_min (no speculation attached: the
// decision keeps the values in force).
func (a *Adapter) setSpecK(_ int, d *abi.Decision, old abi.Decision) (string, error) {
	if a.spec == nil {
		d.SpecK, d.SpecPMin = old.SpecK, old.SpecPMin
		return "", nil
	}
	if d.SpecPMin != old.SpecPMin {
		a.spec.SetPMin(d.SpecPMin)
	}
	if d.SpecK == old.SpecK {
		return "", nil
	}
	d.SpecK = int32(a.spec.SetK(int(d.SpecK)))
	return fmt.Sprintf("spec k %d→%d", old.SpecK, d.SpecK), nil
}

// setDraftThreads gives the draft its own threads and CPUs.
func (a *Adapter) setDraftThreads(_ int, d *abi.Decision, old abi.Decision) (string, error) {
	if a.spec == nil {
		d.DraftThreads, d.DraftCPUMask = old.DraftThreads, old.DraftCPUMask
		return "", nil
	}
	threads := int(d.DraftThreads)
	if threads == 0 && d.DraftCPUMask != 0 {
		threads = max(1, int(d.Threads))
	}
	if err := a.spec.SetDraftThreads(threads, d.DraftCPUMask); err != nil {
		return "", err
	}
	return fmt.Sprintf("draft threads %d mask %#x", d.DraftThreads, d.DraftCPUMask), nil
}

// setVerifyMask pins the verification to CPUs.
func (a *Adapter) setVerifyMask(_ int, d *abi.Decision, old abi.Decision) (string, error) {
	if a.spec == nil {
		d.VerifyCPUMask = old.VerifyCPUMask
		return "", nil
	}
	if err := a.spec.SetVerifyCPUMask(d.VerifyCPUMask); err != nil {
		return "", err
	}
	return fmt.Sprintf("verify mask %#x", d.VerifyCPUMask), nil
}
