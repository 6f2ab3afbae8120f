package host

import "time"

// sensorRefresher is a SensorSource whose cached readings can be dropped.
type sensorRefresher interface{ Refresh() }

// Refresh makes the next Fill read the machine again, whatever the sampling
// interval.
func (l *liveSensors) Refresh() { l.Sampler.Invalidate() }

// Refresh makes the next Fill read the machine again.
func (m *mixedSensors) Refresh() { m.Live.Refresh() }

// RefreshSensors makes the policy's next call see fresh live readings
// rather than the Sampler's cached ones (a trace needs nothing: it is
// indexed by step). The scenario runner's token gate calls it once the
// pressure for the next token is in place, so the policy sees it at that
// very step, however fast the machine decodes.
//
// The time the engine waited at the gate is not decode time: the step that
// spans it is left out of the step clock and the tok/s reading (as the
// first step is), so the wait neither looks like contention nor makes the
// policy's call due.
//
// The reading taken right after the gate also sees the runner that has just
// released the engine, still running; kept for the sensors' interval (the
// CPU run queue for 250 ms), it made a CPU look taken for a whole phase
// after the hogs left. So the sensors are read once more rereadSteps steps
// later, when the runner is done.
func (a *Adapter) RefreshSensors() {
	if r, ok := a.src.(sensorRefresher); ok {
		r.Refresh()
		a.reread = rereadSteps + 1
	}
	a.lastTok = time.Time{}
}

// rereadSteps is how many steps after a RefreshSensors the sensors are read
// again.
const rereadSteps = 2
