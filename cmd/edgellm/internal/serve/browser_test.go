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

// TestPageInChromium loads GET / in headless Chromium with a prompt that
// runs on load: the generated text streams into the page, the charts get
// six /events ticks and their lines move (the page records a hash of each
// chart's pixels after every tick: the memory chart's must change at four
// updates or more, each tick adding a segment drawn from its readings), and
// a screenshot is saved (EDGELLM_SCREENSHOT, else the test's temp dir; the
// path is logged).
func TestPageInChromium(t *testing.T) {
	bin := chromium(t)
	ts := newTestServer(t, testOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	b := startBrowser(ctx, t, bin)
	if err := b.open(ts.url+"/?prompt=Once%20upon%20a%20time&n=40", 1000, 900); err != nil {
		t.Fatal(err)
	}
	// The page's state once it has drawn six ticks (it follows /events for
	// six, then stops).
	dom, err := b.eval(ctx, `location.pathname === "/" ? new Promise(done => {
		const f = () => +(document.body && document.body.dataset.ticks) >= 6 ? done(document.documentElement.outerHTML) : setTimeout(f, 20);
		f();
	}) : Promise.reject(new Error("not yet navigated"))`)
	if err != nil {
		t.Fatalf("waiting for six chart ticks: %v", err)
	}
	out := regexp.MustCompile(`(?s)<div id="out">(.*?)</div>`).FindStringSubmatch(dom)
	if out == nil || len(strings.TrimSpace(out[1])) < 10 {
		t.Fatalf("no streamed text in the page: %.2000s", dom)
	}
	m := regexp.MustCompile(`data-ticks="(\d+)"`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the charts got no tick: %.600s", dom)
	}
	if n, _ := strconv.Atoi(m[1]); n < 6 {
		t.Fatalf("the charts got %d tick(s), want 6", n)
	}
	fm := regexp.MustCompile(`data-frames="([^"]*)"`).FindStringSubmatch(dom)
	if fm == nil {
		t.Fatalf("the page recorded no chart frames: %.600s", dom)
	}
	frames := strings.Fields(fm[1])
	moves := map[string]int{}
	for i := 1; i < len(frames); i++ {
		prev, cur := strings.Split(frames[i-1], ":"), strings.Split(frames[i], ":")
		if len(prev) != 2 || len(cur) != 2 {
			t.Fatalf("frame %q", frames[i])
		}
		for j, name := range []string{"tok/s", "memory"} {
			if prev[j] != cur[j] {
				moves[name]++
			}
		}
	}
	if len(frames) < 6 || moves["memory"] < 4 {
		t.Fatalf("%d frames, the memory chart changed at %d updates, want ≥ 4 of 5: %v", len(frames), moves["memory"], frames)
	}
	t.Logf("page text: %q, chart ticks %s, updates that changed the drawing: %v", strings.TrimSpace(out[1]), m[1], moves)
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
