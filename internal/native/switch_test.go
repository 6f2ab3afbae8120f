package native

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgellm/edgellm/host/engine"
)

// switchCost measures a weight-set switch of every layer on a loaded engine
// with two sets or more: the SetLayerSets call, the next step's graph
// rebuild (build + allocate) and that step's wall time against the next
// step on the same selection without a switch. Medians of rounds switches.
type switchCost struct {
	set, rebuild, stepSwitch, stepReuse time.Duration
}

func (c switchCost) extra() time.Duration { return c.set + c.rebuild }

func measureSwitch(t testing.TB, e *Engine, rounds int) switchCost {
	t.Helper()
	s, err := e.newSession(engine.SessionConfig{NCtx: 256, NBatch: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	nl := e.Config().NLayer
	sel := [2][]int{make([]int, nl), make([]int, nl)}
	for i := range sel[1] {
		sel[1][i] = 1
	}
	step := func(tok int32) time.Duration {
		t0 := time.Now()
		if err := s.Decode([]int32{tok}, engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
		return time.Since(t0)
	}
	if err := s.Decode([]int32{1, 2, 3, 4}, engine.LogitsLast); err != nil {
		t.Fatal(err)
	}
	// Warm both sets (page faults are not the switch's cost) and the 1-token graph.
	for _, sl := range sel {
		s.SetLayerSets(sl)
		step(5)
		step(6)
	}
	var set, rebuild, sw, reuse []time.Duration
	for r := range rounds {
		sl := sel[r%2]
		b0 := s.Stats().GraphBuildTime
		t0 := time.Now()
		if err := s.SetLayerSets(sl); err != nil {
			t.Fatal(err)
		}
		set = append(set, time.Since(t0))
		sw = append(sw, step(int32(7+r)))
		rebuild = append(rebuild, s.Stats().GraphBuildTime-b0)
		reuse = append(reuse, step(int32(8+r)))
		if s.Len() > 200 {
			s.Truncate(4)
		}
	}
	med := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	return switchCost{set: med(set), rebuild: med(rebuild), stepSwitch: med(sw), stepReuse: med(reuse)}
}

func logSwitch(t testing.TB, name string, nl int, c switchCost) {
	t.Logf("%s (%d layers): SetLayerSets(all) %v + graph rebuild %v = %v per switch; step after a switch %v vs without %v (Δ %v)",
		name, nl, c.set, c.rebuild, c.extra(), c.stepSwitch, c.stepReuse, c.stepSwitch-c.stepReuse)
}

// switchBound is the test's limit on SetLayerSets + rebuild: the goal is
// 1 ms on a 22-layer model; the limit leaves room for a loaded shared CPU.
const switchBound = 5 * time.Millisecond

// TestSwitchCostStories260K: switching all layers costs a pointer change and
// one graph rebuild, nothing else.
func TestSwitchCostStories260K(t *testing.T) {
	files := ladder(t)
	e, err := Load(files[1], Options{Threads: 1, NoVocab: true, ExtraSets: files[2:]})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	c := measureSwitch(t, e, 21)
	logSwitch(t, "stories260K Q8_0↔Q4_0", e.Config().NLayer, c)
	if c.extra() > switchBound {
		t.Errorf("switch costs %v (limit %v)", c.extra(), switchBound)
	}
}

// tlSets are the 22-layer files of the switch-cost test: EDGELLM_NATIVE_SETS
// (comma-separated, base first) or /tmp/tl-q8.gguf,/tmp/tl-q4.gguf (made by
// `edgellm synth --shape tinyllama-1.1b --type q8_0 --seed 1 -o /tmp/tl-q8.gguf`
// and the same with --type q4_0).
func tlSets(t testing.TB) []string {
	files := []string{"/tmp/tl-q8.gguf", "/tmp/tl-q4.gguf"}
	if v := os.Getenv("EDGELLM_NATIVE_SETS"); v != "" {
		files = strings.Split(v, ",")
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("switch cost on a 22-layer model: %s missing (set EDGELLM_NATIVE_SETS=base.gguf,other.gguf or synth /tmp/tl-q8.gguf and /tmp/tl-q4.gguf)", f)
		}
	}
	if len(files) < 2 {
		t.Skip("EDGELLM_NATIVE_SETS names fewer than 2 files")
	}
	return files
}

// TestSwitchCostTinyLlama: the same on a synthetic TinyLlama 1.1B (22
// layers), Q8_0 ↔ Q4_0.
func TestSwitchCostTinyLlama(t *testing.T) {
	files := tlSets(t)
	e, err := Load(files[0], Options{NoVocab: true, Threads: 1, ExtraSets: files[1:]})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	c := measureSwitch(t, e, 5)
	logSwitch(t, filepath.Base(files[0])+"↔"+filepath.Base(files[1]), e.Config().NLayer, c)
	if c.extra() > switchBound {
		t.Errorf("switch costs %v (limit %v)", c.extra(), switchBound)
	}
}

// BenchmarkLayerSwitch: one all-layer switch + the next step, against a
// step without a switch, in one process. EDGELLM_NATIVE_SETS selects the
// files (default: stories260K Q8_0 and Q4_0).
func BenchmarkLayerSwitch(b *testing.B) {
	files := ladder(b)[1:]
	if os.Getenv("EDGELLM_NATIVE_SETS") != "" {
		files = tlSets(b)
	}
	e, err := Load(files[0], Options{NoVocab: true, ExtraSets: files[1:]})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	var c switchCost
	for b.Loop() {
		c = measureSwitch(b, e, 9)
	}
	b.ReportMetric(float64(c.extra().Microseconds()), "switch-µs")
	b.ReportMetric(float64(c.stepSwitch.Microseconds()), "step-after-switch-µs")
	b.ReportMetric(float64(c.stepReuse.Microseconds()), "step-µs")
	b.ReportMetric(float64(c.stepSwitch)/float64(c.stepReuse), "ratio")
}
