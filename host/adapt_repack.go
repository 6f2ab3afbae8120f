package host

import (
	"fmt"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/internal/native"
)

// RepackSetter is implemented by sessions whose engine loaded repacked
// weights and can release and restore them between steps (the native
// engine with LoadOptions.Repack): units are layers from 0 up, then the
// output head; the count applies to the whole engine, every session of it.
// Releasing gives the units' anonymous pages back at once; restoring
// repacks them again from the mapped file.
type RepackSetter interface {
	RepackState() native.RepackState
	SetRepackLayers(k int) (native.RepackChange, error)
}

var _ RepackSetter = (*native.Session)(nil)

// RepackState is how much of an engine's repacked weights is in use.
type RepackState = native.RepackState

// RepackChange is what one SetRepackLayers call did.
type RepackChange = native.RepackChange

// repackUnits is the units the session's engine can repack (0: none, or
// not a RepackSetter).
func repackUnits(sess Session) int {
	if rs, ok := sess.(RepackSetter); ok {
		return rs.RepackState().MaxLayers
	}
	return 0
}

// fillRepack writes the ABI 1.4 repack readings when the engine has
// repacked weights.
func (a *Adapter) fillRepack(s *abi.Sensors) {
	rs, ok := a.sess.(RepackSetter)
	if !ok {
		return
	}
	st := rs.RepackState()
	if st.MaxLayers == 0 {
		return
	}
	s.RepackLayers, s.RepackLayersMax = int32(st.Layers), int32(st.MaxLayers)
	s.RepackMB, s.RepackMBMax = int32((st.Bytes+(1<<20)-1)>>20), int32((st.MaxBytes+(1<<20)-1)>>20)
	s.Present |= abi.PresentRepack
}

// applyRepack keeps d.RepackLayers units repacked; what the engine refuses
// keeps old's count.
func (a *Adapter) applyRepack(step int, d *abi.Decision, old abi.Decision, changes []string) []string {
	c, err := a.sess.(RepackSetter).SetRepackLayers(int(d.RepackLayers))
	if err != nil && c.Released+c.Restored == 0 {
		if a.log != nil {
			fmt.Fprintf(a.log, "[policy step %d: repacked layers %d not applied: %v]\n", step, d.RepackLayers, err)
		}
		d.RepackLayers = old.RepackLayers
		return changes
	}
	d.RepackLayers = int32(c.To)
	if c.To == c.From {
		return changes
	}
	a.st.RepackChanges++
	what := fmt.Sprintf("repacked %d→%d layers (", c.From, c.To)
	if c.Released > 0 {
		what += fmt.Sprintf("%.1f MiB released", float64(c.ReleasedBytes)/(1<<20))
	} else {
		what += fmt.Sprintf("%.1f MiB repacked", float64(c.RestoredBytes)/(1<<20))
	}
	return append(changes, what+fmt.Sprintf(" in %.1f ms)", float64(c.Time.Microseconds())/1000))
}

// RepackNone as LoadOptions.RepackLayers repacks nothing at load.
const RepackNone = native.RepackNone
