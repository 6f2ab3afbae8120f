package serve

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// browser is headless Chromium driven over the DevTools protocol on a pipe
// (--remote-debugging-pipe: JSON messages ended by a NUL byte, commands on
// the child's fd 3, answers and events on its fd 4). The test waits on the
// page's own state (Runtime.evaluate with a promise), never on a guessed
// delay; the context's deadline only turns a hang into a failure.
type browser struct {
	cmd     *exec.Cmd
	w       io.WriteCloser
	r       *bufio.Reader
	id      int
	session string
}

func startBrowser(ctx context.Context, t *testing.T, bin string) *browser {
	t.Helper()
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	// The profile directory is ours to remove, after every Chromium process
	// is gone: its helpers (crashpad, utilities) outlive the browser process
	// for a moment and still write there, which made t.TempDir's removal
	// fail with "directory not empty".
	profile, err := os.MkdirTemp("", "edgellm-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir="+profile,
		"--remote-debugging-pipe", "about:blank")
	cmd.ExtraFiles = []*os.File{cmdR, outW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // one group: killed as one
	if err := cmd.Start(); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	cmdR.Close()
	outW.Close()
	b := &browser{cmd: cmd, w: cmdW, r: bufio.NewReader(outR)}
	t.Cleanup(func() {
		b.call("", "Browser.close", nil, nil)
		cmdW.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // helpers left in the group
		outR.Close()
		var err error
		for i := 0; i < 50; i++ { // until the last helper has let go
			if err = os.RemoveAll(profile); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("chromium profile %s: %v", profile, err)
	})
	return b
}

// call sends one command (to the attached page when session is set) and
// decodes its result into out, skipping events.
func (b *browser) call(session, method string, params, out any) error {
	b.id++
	msg := map[string]any{"id": b.id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	data, _ := json.Marshal(msg)
	if _, err := b.w.Write(append(data, 0)); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	for {
		line, err := b.r.ReadBytes(0)
		if err != nil {
			return fmt.Errorf("%s: the browser went away: %w", method, err)
		}
		var resp struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line[:len(line)-1], &resp); err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		if resp.ID != b.id {
			continue // an event, or an answer to an abandoned call
		}
		if resp.Error != nil {
			return fmt.Errorf("%s: %s", method, resp.Error.Message)
		}
		if out != nil {
			return json.Unmarshal(resp.Result, out)
		}
		return nil
	}
}

// open makes a page of the given size, attaches to it and navigates to url.
func (b *browser) open(url string, width, height int) error {
	var tgt struct {
		TargetID string `json:"targetId"`
	}
	if err := b.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &tgt); err != nil {
		return err
	}
	var att struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call("", "Target.attachToTarget", map[string]any{"targetId": tgt.TargetID, "flatten": true}, &att); err != nil {
		return err
	}
	b.session = att.SessionID
	if err := b.call(b.session, "Emulation.setDeviceMetricsOverride",
		map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}, nil); err != nil {
		return err
	}
	return b.call(b.session, "Page.navigate", map[string]any{"url": url}, nil)
}

// eval evaluates a JavaScript expression in the page, awaiting a promise,
// and returns its value as a string. A navigation in progress destroys the
// context an evaluation runs in: that is retried.
func (b *browser) eval(ctx context.Context, expr string) (string, error) {
	for {
		var res struct {
			Result struct {
				Value any `json:"value"`
			} `json:"result"`
			Exception *struct {
				Text string `json:"text"`
			} `json:"exceptionDetails"`
		}
		err := b.call(b.session, "Runtime.evaluate", map[string]any{"expression": expr, "awaitPromise": true, "returnByValue": true}, &res)
		switch {
		case err == nil && res.Exception == nil:
			return fmt.Sprint(res.Result.Value), nil
		case ctx.Err() != nil:
			return "", errors.Join(ctx.Err(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// screenshot saves the page as PNG.
func (b *browser) screenshot(path string) error {
	var res struct {
		Data string `json:"data"`
	}
	if err := b.call(b.session, "Page.captureScreenshot", map[string]any{"format": "png"}, &res); err != nil {
		return err
	}
	png, err := base64.StdEncoding.DecodeString(res.Data)
	if err != nil {
		return err
	}
	return os.WriteFile(path, png, 0o644)
}
