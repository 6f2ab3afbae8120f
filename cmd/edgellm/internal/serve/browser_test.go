package serve

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// chromium finds Debian's chromium (installed by make test / .ci/run).
func chromium(t *testing.T) string {
	for _, n := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	if os.Getenv("EDGELLM_NO_BROWSER") != "" {
		t.Skip("EDGELLM_NO_BROWSER set")
	}
	t.Fatal("chromium not found: apt-get install -y chromium (make test installs it), or set EDGELLM_NO_BROWSER=1")
	return ""
}

// TestPageInChromium loads GET / in headless Chromium, with the default
// policy on the tier ladder reading a SIMULATED thermal trace, and a
// prompt that runs while the page follows /events for twelve ticks: the
// text streams into its bounded box; every chart (tok/s per token, tier/K/
// acceptance, KV window, memory, temperature) has points and its drawing
// changes at most updates (the page records a hash of each chart's pixels
// after every tick); the per-layer bits strip has a cell per layer; the
// temperature is labelled SIMULATED. A screenshot is saved
// (EDGELLM_SCREENSHOT, else the test's temp dir; the path is logged).
func TestPageInChromium(t *testing.T) {
	bin := chromium(t)
	if _, err := os.Stat(defaultPolicyWasm); err != nil {
		t.Skipf("%s not built (make policies): %v", defaultPolicyWasm, err)
	}
	ts := newTestServer(t, testOptions{policy: defaultPolicyWasm, sensorsAt: "trace:../../../../testdata/traces/thermal_ramp.jsonl",
		cfg: Config{SensorSource: "SIMULATED (trace thermal_ramp.jsonl)", PolicyDesc: "default (SIMULATED thermal trace)"}})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	b := startBrowser(ctx, t, bin)
	const ticks = 12
	if err := b.open(ts.url+"/?prompt=Once%20upon%20a%20time&n=200&ticks=12", 1200, 1400); err != nil {
		t.Fatal(err)
	}
	dom, err := b.eval(ctx, `location.pathname === "/" ? new Promise(done => {
		const f = () => +(document.body && document.body.dataset.ticks) >= 12 ? done(document.documentElement.outerHTML) : setTimeout(f, 20);
		f();
	}) : Promise.reject(new Error("not yet navigated"))`)
	if err != nil {
		t.Fatalf("waiting for %d chart ticks: %v", ticks, err)
	}
	out := regexp.MustCompile(`(?s)<div id="out"[^>]*>(.*?)</div>`).FindStringSubmatch(dom)
	if out == nil || len(strings.TrimSpace(out[1])) < 10 {
		t.Fatalf("no streamed text in the page: %.2000s", dom)
	}
	fm := regexp.MustCompile(`data-frames="([^"]*)"`).FindStringSubmatch(dom)
	if fm == nil {
		t.Fatalf("the page recorded no chart frames: %.600s", dom)
	}
	names := []string{"tok/s", "tier", "window", "memory", "temperature"}
	frames := strings.Fields(fm[1])
	moves := map[string]int{}
	for i := 1; i < len(frames); i++ {
		prev, cur := strings.Split(frames[i-1], ":"), strings.Split(frames[i], ":")
		if len(prev) != len(names) || len(cur) != len(names) {
			t.Fatalf("frame %q", frames[i])
		}
		for j, name := range names {
			if prev[j] != cur[j] {
				moves[name]++
			}
		}
	}
	if len(frames) < ticks {
		t.Fatalf("%d frames, want %d", len(frames), ticks)
	}
	for _, name := range names {
		if moves[name] < (ticks-1)/3 {
			t.Errorf("the %s chart changed at %d of %d updates", name, moves[name], len(frames)-1)
		}
	}
	pts := regexp.MustCompile(`data-points="([^"]*)"`).FindStringSubmatch(dom)
	if pts == nil {
		t.Fatal("no point counts")
	}
	for _, kv := range strings.Split(pts[1], ",") {
		k, v, _ := strings.Cut(kv, "=")
		if n, _ := strconv.Atoi(v); n < 2 {
			t.Errorf("chart %s has %d points", k, n)
		}
	}
	// The tok/s chart has a point per streamed token, not per request.
	if m := regexp.MustCompile(`tps=(\d+)`).FindStringSubmatch(pts[1]); m == nil {
		t.Error("no tok/s points")
	} else if n, _ := strconv.Atoi(m[1]); n < 20 {
		t.Errorf("tok/s chart: %d points while 200 tokens streamed", n)
	}
	if cells := regexp.MustCompile(`id="bits" data-cells="(\d+)"`).FindStringSubmatch(dom); cells == nil || cells[1] != strconv.Itoa(ts.worker.nLayer) {
		t.Errorf("bits strip cells %v, want %d (one per layer)", cells, ts.worker.nLayer)
	}
	if !strings.Contains(dom, `class="sim">(SIMULATED (trace thermal_ramp.jsonl))`) {
		t.Errorf("the temperature source is not labelled SIMULATED")
	}
	// The output box keeps its height however much text streams in.
	h, err := b.eval(ctx, `String(document.getElementById("out").getBoundingClientRect().height <= 12 * 14 * 1.5)`)
	if err != nil || h != "true" {
		t.Errorf("output box unbounded: %q %v", h, err)
	}
	t.Logf("chart updates that changed the drawing: %v; points %s; decisions %s", moves, pts[1],
		regexp.MustCompile(`data-decisions="(\d+)"`).FindString(dom))
	shot := os.Getenv("EDGELLM_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "serve-page.png")
	}
	shot, _ = filepath.Abs(shot)
	if err := b.screenshot(shot); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(shot); err != nil || st.Size() < 1000 {
		t.Fatalf("screenshot %s: %v", shot, err)
	}
	t.Logf("screenshot: %s", shot)
}
