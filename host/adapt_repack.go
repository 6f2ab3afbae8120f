package host

import (
	"fmt"
	"time"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/native"
)

// RepackSetter is implemented by sessions whose engine loaded repacked
// weights and can release and restore them between steps (the native
// engine with LoadOptions.Repack): units are layers from 0 up, then the
// output head; the count applies to the whole engine, every session of it.
// Releasing gives the units' anonymous pages back at once; restoring
// repacks them again from the mapped file.
type RepackSetter interface {
	RepackState() RepackState
	SetRepackLayers(k int) (RepackChange, error)
}

var _ RepackSetter = (*native.Session)(nil)

// RepackState is how much of an engine's repacked weights is in use.
type RepackState = engine.RepackState

// RepackChange is what one SetRepackLayers call did.
type RepackChange = engine.RepackChange

// fillRepack writes the ABI 1.4 repack readings when the engine has
// repacked weights.
func (a *Adapter) fillRepack(s *abi.Sensors) {
	if a.repackable == nil {
		return
	}
	st := a.repackable.RepackState()
	s.RepackLayers, s.RepackLayersMax = int32(st.Layers), int32(st.MaxLayers)
	s.RepackMB, s.RepackMBMax = int32((st.Bytes+(1<<20)-1)>>20), int32((st.MaxBytes+(1<<20)-1)>>20)
	s.Present |= abi.PresentRepack
}

// RepackStepBudget bounds the time a raise of the repacked layers takes
// out of one step: the host repacks units one at a time until the budget
// is spent (at least one unit a step), and goes on at the next steps.
// Releasing is a madvise per unit and happens at once. Repacking all 17
// units of the 1B shape at once stalled one step by 0.2–0.7 s here.
var RepackStepBudget = 20 * time.Millisecond

// repackPacer is a raise in progress: the engine is repacked up to target
// a few units per step.
type repackPacer struct {
	pending        bool
	from, target   int
	steps          int
	bytes          int64
	total, longest time.Duration
	startStep      int
	lastStep       int // the step whose budget was spent last
}

// carryRepack spends this step's budget on a raise in progress, unless the
// decision that started it already did.
func (a *Adapter) carryRepack(step int) {
	if a.repack.pending && a.repack.lastStep != step {
		a.repackStep(step)
	}
}

// setRepack carries out d.RepackLayers: a lower count releases units at
// once; a higher one starts repacking them, RepackStepBudget a step
// (repackStep). A refusal that changed nothing is an error.
func (a *Adapter) setRepack(step int, d *abi.Decision, _ abi.Decision) (string, error) {
	rs := a.repackable
	st := rs.RepackState()
	want := min(max(int(d.RepackLayers), 0), st.MaxLayers)
	d.RepackLayers = int32(want)
	if want > st.Layers {
		a.repack = repackPacer{pending: true, from: st.Layers, target: want, startStep: step}
		a.repackStep(step)
		if !a.repack.pending {
			return a.repackDone(), nil
		}
		return fmt.Sprintf("repacking %d→%d layers (at most %.0f ms a step)", st.Layers, want,
			float64(RepackStepBudget.Microseconds())/1000), nil
	}
	a.repack.pending = false // a lower count cancels a raise in progress
	c, err := rs.SetRepackLayers(want)
	if err != nil && c.Released+c.Restored == 0 {
		return "", err
	}
	d.RepackLayers = int32(c.To)
	if c.To == c.From {
		return "", nil
	}
	a.st.RepackChanges++
	return fmt.Sprintf("repacked %d→%d layers (%.1f MiB released in %.1f ms)", c.From, c.To,
		float64(c.ReleasedBytes)/(1<<20), float64(c.Time.Microseconds())/1000), nil
}

// repackStep repacks units one at a time toward the pending target until
// RepackStepBudget is spent (at least one), and logs the raise when it is
// complete.
func (a *Adapter) repackStep(step int) {
	p := &a.repack
	rs := a.repackable
	t0 := time.Now()
	cur := rs.RepackState().Layers
	for cur < p.target {
		c, err := rs.SetRepackLayers(cur + 1)
		p.bytes += c.RestoredBytes
		if err != nil || c.To <= cur {
			if a.log != nil {
				fmt.Fprintf(a.log, "[policy step %d: repacking layer %d failed, kept %d: %v]\n", step, cur, c.To, err)
			}
			p.target = c.To
			break
		}
		cur = c.To
		if time.Since(t0) >= RepackStepBudget {
			break
		}
	}
	dt := time.Since(t0)
	p.lastStep = step
	// Repacking is not decode time: moving the step clock's last
	// timestamp past it keeps it out of the next step's time (and so out
	// of tok/s and the step-time ratio a policy reads for contention).
	if !a.lastTok.IsZero() {
		a.lastTok = a.lastTok.Add(dt)
	}
	p.steps++
	p.total += dt
	p.longest = max(p.longest, dt)
	if cur >= p.target {
		p.pending = false
		if step != p.startStep && a.log != nil {
			fmt.Fprintf(a.log, "[policy step %d: %s]\n", step, a.repackDone())
		}
	}
}

// repackDone counts a finished raise and describes it.
func (a *Adapter) repackDone() string {
	p := &a.repack
	a.st.RepackChanges++
	return fmt.Sprintf("repacked %d→%d layers (%.1f MiB over %d steps, %.1f ms in all, at most %.1f ms in one)", p.from, p.target,
		float64(p.bytes)/(1<<20), p.steps, float64(p.total.Microseconds())/1000, float64(p.longest.Microseconds())/1000)
}

// RepackNone as LoadOptions.RepackLayers repacks nothing at load.
const RepackNone = engine.RepackNone
