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
// ticks, and a screenshot is saved (EDGELLM_SCREENSHOT, else the test's
// temp dir; the path is logged).
func TestPageInChromium(t *testing.T) {
	bin := chromium(t)
	ts := newTestServer(t, testOptions{})
	url := ts.url + "/?prompt=Once%20upon%20a%20time&n=40"
	run := func(extra ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
			"--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir=" + t.TempDir(),
			"--virtual-time-budget=10000"}, extra...)
		out, err := exec.CommandContext(ctx, bin, append(args, url)...).Output()
		if err != nil {
			t.Fatalf("chromium %v: %v", extra, err)
		}
		return string(out)
	}
	dom := run("--dump-dom")
	out := regexp.MustCompile(`(?s)<div id="out">(.*?)</div>`).FindStringSubmatch(dom)
	if out == nil || len(strings.TrimSpace(out[1])) < 10 {
		t.Fatalf("no streamed text in the page: %.2000s", dom)
	}
	m := regexp.MustCompile(`data-ticks="(\d+)"`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the charts got no tick: %.600s", dom)
	}
	if n, _ := strconv.Atoi(m[1]); n < 1 {
		t.Fatalf("the charts got %d tick(s)", n)
	}
	t.Logf("page text: %q, chart ticks %s", strings.TrimSpace(out[1]), m[1])
	shot := os.Getenv("EDGELLM_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "serve-page.png")
	}
	shot, _ = filepath.Abs(shot)
	run("--screenshot="+shot, "--window-size=1000,900")
	if st, err := os.Stat(shot); err != nil || st.Size() < 1000 {
		t.Fatalf("screenshot %s: %v", shot, err)
	}
	t.Logf("screenshot: %s", shot)
}
