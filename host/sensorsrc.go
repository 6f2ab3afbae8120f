package host

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/sensors"
	"github.com/edgellm/edgellm/host/trace"
)

// SensorSource fills the device readings of the policy's input.
type SensorSource interface {
	// Fill overlays the readings at decode step `step`, `elapsed` after the
	// start of generation.
	Fill(step int, elapsed time.Duration, dst *abi.Sensors)
	// Describe says where the readings come from, and labels simulated ones.
	Describe() string
	// Close releases what the source holds (sensor files).
	Close() error
}

// liveSensors reads the real machine (/proc, /sys, cgroups) through a
// sensors.Sampler, overlaid with what an embedding app pushes to Platform.
type liveSensors struct {
	Sampler *sensors.Sampler
	reader  *sensors.Reader
}

// newLiveSensors samples this machine's sensors every interval; platform may
// be nil. Close it when done.
func newLiveSensors(interval time.Duration, platform *sensors.Platform) (*liveSensors, error) {
	r, err := sensors.NewReader()
	if err != nil {
		return nil, err
	}
	return &liveSensors{Sampler: sensors.NewSampler(r, platform, interval), reader: r}, nil
}

func (l *liveSensors) Fill(_ int, _ time.Duration, dst *abi.Sensors) { l.Sampler.Fill(dst) }
func (l *liveSensors) Describe() string                              { return "live (this machine's /proc and /sys)" }

// Close releases the sensor files.
func (l *liveSensors) Close() error { return l.reader.Close() }

// traceSensors replays a JSONL sensor trace: SIMULATED readings. Decode step
// n sees the trace at time n × StepMs (so runs are reproducible whatever the
// machine's speed).
type traceSensors struct {
	Path   string
	StepMs int64
	rep    *trace.Replayer
}

// newTraceSensors reads a trace file.
func newTraceSensors(path string, stepMs int64) (*traceSensors, error) {
	recs, err := trace.ReadFile(path, trace.ReadOptions{})
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("trace %s: no records", path)
	}
	if stepMs <= 0 {
		return nil, fmt.Errorf("trace step %d ms: must be > 0", stepMs)
	}
	return &traceSensors{Path: path, StepMs: stepMs, rep: trace.NewReplayer(recs)}, nil
}

func (t *traceSensors) Fill(step int, _ time.Duration, dst *abi.Sensors) {
	t.rep.Fill(int64(step)*t.StepMs, dst)
}

func (t *traceSensors) Describe() string {
	return fmt.Sprintf("trace %s, %d ms per step (SIMULATED readings)", t.Path, t.StepMs)
}

// Close does nothing: the trace was read whole.
func (t *traceSensors) Close() error { return nil }

// mixedSensors reads the machine live and overlays the fields a trace
// carries: real memory readings with a SIMULATED thermal status, say, for a
// scenario that applies real memory pressure and emulates throttling.
type mixedSensors struct {
	Live  *liveSensors
	Trace *traceSensors
}

func (m *mixedSensors) Fill(step int, elapsed time.Duration, dst *abi.Sensors) {
	m.Live.Fill(step, elapsed, dst)
	t := dst.TimeNS // the live clock, not the trace's step time
	m.Trace.Fill(step, elapsed, dst)
	dst.TimeNS = t
}

func (m *mixedSensors) Describe() string {
	return m.Live.Describe() + ", overlaid with the fields of " + m.Trace.Describe()
}

// Close releases the live sensor files.
func (m *mixedSensors) Close() error { return m.Live.Close() }

// Defaults of SensorOptions.
const (
	DefaultSensorInterval = 100 * time.Millisecond
	DefaultTraceStepMs    = 100
)

// SensorOptions configures NewSensorSource.
type SensorOptions struct {
	// Interval is how often live sensors are re-read (not every token); 0
	// means DefaultSensorInterval.
	Interval time.Duration
	// TraceStepMs is the trace milliseconds per decode step of a trace
	// replay; 0 means DefaultTraceStepMs.
	TraceStepMs int64
	// Platform carries what an embedding app pushes (Android's memory,
	// trim level, thermal status); nil for none.
	Platform *sensors.Platform
}

// ErrSensorSpec is returned (wrapped) by NewSensorSource for a spec that
// names no source.
var ErrSensorSpec = errors.New("unknown sensor source")

// NewSensorSource builds the sensor source a spec names:
//
//	live             this machine's /proc, /sys and cgroups (liveSensors); "" means live
//	trace:FILE       a JSONL sensor trace replayed step by step (traceSensors, SIMULATED)
//	live+trace:FILE  live readings with the fields the trace carries replaced by it (mixedSensors)
//
// Close the source when done.
func NewSensorSource(spec string, o SensorOptions) (SensorSource, error) {
	if o.Interval == 0 {
		o.Interval = DefaultSensorInterval
	}
	if o.TraceStepMs == 0 {
		o.TraceStepMs = DefaultTraceStepMs
	}
	live := func() (*liveSensors, error) {
		if o.Interval < 0 {
			return nil, fmt.Errorf("sensor interval %v: must be > 0", o.Interval)
		}
		return newLiveSensors(o.Interval, o.Platform)
	}
	switch {
	case spec == "live" || spec == "":
		return live()
	case strings.HasPrefix(spec, "trace:"):
		return newTraceSensors(strings.TrimPrefix(spec, "trace:"), o.TraceStepMs)
	case strings.HasPrefix(spec, "live+trace:"):
		t, err := newTraceSensors(strings.TrimPrefix(spec, "live+trace:"), o.TraceStepMs)
		if err != nil {
			return nil, err
		}
		l, err := live()
		if err != nil {
			return nil, err
		}
		return &mixedSensors{Live: l, Trace: t}, nil
	}
	return nil, fmt.Errorf("%w %q: want live, trace:FILE or live+trace:FILE", ErrSensorSpec, spec)
}
