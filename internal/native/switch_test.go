package native

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/synth"
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

// switchGoal is the goal for switching every layer of a 22-layer model
// (SetLayerSets + the next step's graph rebuild). The tests assert it with
// no slack on the bound: each measurement is already the median of many
// switches, and a loaded machine gets up to switchTries measurements, the
// best of which counts. A machine that is simply slower than the goal fails.
const (
	switchGoal  = time.Millisecond
	switchTries = 5
)

// bestSwitch measures up to switchTries times (rounds switches each) and
// returns the measurement with the smallest switch cost, stopping at the
// first that meets switchGoal.
func bestSwitch(t testing.TB, e *Engine, name string, rounds int) switchCost {
	t.Helper()
	var best switchCost
	for try := 0; try < switchTries; try++ {
		c := measureSwitch(t, e, rounds)
		logSwitch(t, name, e.Config().NLayer, c)
		if try == 0 || c.extra() < best.extra() {
			best = c
		}
		if best.extra() <= switchGoal {
			break
		}
	}
	return best
}

// TestSwitchCostStories260K: switching all layers costs a pointer change and
// one graph rebuild, nothing else.
func TestSwitchCostStories260K(t *testing.T) {
	files := ladder(t)
	e, err := Load(files[1], Options{Threads: 1, NoVocab: true, ExtraSets: files[2:]})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if c := bestSwitch(t, e, "stories260K Q8_0↔Q4_0", 21); c.extra() > switchGoal {
		t.Errorf("switch costs %v (goal %v, best of %d)", c.extra(), switchGoal, switchTries)
	}
}

// TestSwitchCostTinyLlama: switching all 22 layers of a synthetic model of
// TinyLlama's depth and head layout (tinyLlamaQuarter, made by the test),
// Q8_0 ↔ Q4_0, costs at most switchGoal.
func TestSwitchCostTinyLlama(t *testing.T) {
	testSwitchCost22(t, tinyLlamaQuarter)
}

// TestSoakSwitchCostTinyLlamaFull (EDGELLM_SOAK=1, make soak): the same on
// the full synthetic TinyLlama 1.1B shape (1.1 GB at Q8_0 + 0.6 GB at Q4_0
// written to a temp dir).
func TestSoakSwitchCostTinyLlamaFull(t *testing.T) {
	if os.Getenv("EDGELLM_SOAK") != "1" {
		t.Skip("set EDGELLM_SOAK=1 (make soak)")
	}
	testSwitchCost22(t, synth.Shapes["tinyllama-1.1b"])
}

func testSwitchCost22(t *testing.T, sh synth.Shape) {
	if sh.NLayer != 22 {
		t.Fatalf("shape %s has %d layers, want 22", sh.Name, sh.NLayer)
	}
	files := []string{synthModel(t, sh, gguf.Q8_0), synthModel(t, sh, gguf.Q4_0)}
	e, err := Load(files[0], Options{NoVocab: true, Threads: 1, ExtraSets: files[1:]})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if c := bestSwitch(t, e, "SYNTHETIC "+sh.Name+" Q8_0↔Q4_0", 9); c.extra() > switchGoal {
		t.Errorf("switching all 22 layers costs %v (goal %v, best of %d)", c.extra(), switchGoal, switchTries)
	}
}

// tlSets are the files of BenchmarkLayerSwitch with EDGELLM_NATIVE_SETS
// (comma-separated, base first), e.g. made by `edgellm synth --shape
// tinyllama-1.1b --type q8_0 --seed 1 -o tl-q8.gguf` and the same with
// --type q4_0.
func tlSets(t testing.TB) []string {
	files := strings.Split(os.Getenv("EDGELLM_NATIVE_SETS"), ",")
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("EDGELLM_NATIVE_SETS: %v", err)
		}
	}
	if len(files) < 2 {
		t.Fatal("EDGELLM_NATIVE_SETS names fewer than 2 files")
	}
	return files
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
