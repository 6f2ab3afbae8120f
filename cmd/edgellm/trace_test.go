package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/trace"
)

func TestTraceGen(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "osc.jsonl")
	_, errs, code := runCLI(t, "trace", "gen", "memory-oscillate", "--steps", "40", "--interval-ms", "50",
		"--param", "threshold_mb=700", "--param", "amplitude_mb=100", "--seed", "3", "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	recs, err := trace.ReadFile(out, trace.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 40 || recs[39].TMs != 39*50 || recs[0].Values.MemThresholdMB != 700 {
		t.Errorf("records %d, last t %d, threshold %d", len(recs), recs[39].TMs, recs[0].Values.MemThresholdMB)
	}
	// stdout and the file carry the same bytes for the same seed.
	stdout, _, code := runCLI(t, "trace", "gen", "memory-oscillate", "--steps", "40", "--interval-ms", "50",
		"--param", "threshold_mb=700", "--param", "amplitude_mb=100", "--seed", "3")
	file, _ := os.ReadFile(out)
	if code != 0 || stdout != string(file) {
		t.Errorf("stdout differs from the file for the same seed")
	}
}

func TestTraceGenErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no name", []string{"trace", "gen"}, 2, "thermal-ramp"},
		{"unknown", []string{"trace", "gen", "meteor"}, 2, `unknown scenario "meteor"`},
		{"bad param syntax", []string{"trace", "gen", "thermal-ramp", "--param", "peak_c"}, 2, `--param "peak_c": want k=v`},
		{"unknown param", []string{"trace", "gen", "thermal-ramp", "--param", "x=1"}, 2, `unknown parameter "x"`},
		{"bad output dir", []string{"trace", "gen", "thermal-ramp", "-o", "/nonexistent/dir/x.jsonl"}, 1, "--output /nonexistent/dir/x.jsonl"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, code := runCLI(t, tc.args...)
			if code != tc.code || !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
				t.Errorf("exit %d, stderr %q; want exit %d containing %q on one line", code, errs, tc.code, tc.want)
			}
		})
	}
}

func TestTraceHelpListsScenarios(t *testing.T) {
	out, _, _ := runCLI(t, "help", "trace", "gen")
	for _, n := range trace.ScenarioNames() {
		if !strings.Contains(out, n) {
			t.Errorf("help lacks %s", n)
		}
	}
	if !strings.Contains(out, "threshold_mb=500") {
		t.Errorf("help lacks parameter defaults:\n%s", out)
	}
}

func TestTraceRecord(t *testing.T) {
	out := filepath.Join(t.TempDir(), "live.jsonl")
	_, errs, code := runCLI(t, "trace", "record", "--interval", "20ms", "--duration", "200ms", "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	recs, err := trace.ReadFile(out, trace.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) < 5 || len(recs) > 11 {
		t.Errorf("%d records for 200 ms at 20 ms", len(recs))
	}
	for _, r := range recs {
		if r.Present&abi.PresentMemTotal == 0 || r.Values.MemTotalMB <= 0 || r.Values.MemAvailableMB <= 0 {
			t.Fatalf("record without memory: %+v", r)
		}
	}
	if !strings.Contains(errs, "sensors: meminfo: yes") || !strings.Contains(errs, "recorded ") {
		t.Errorf("stderr: %s", errs)
	}
}

// TestTraceRecordStopsOnCancel records with no duration until the context
// (Ctrl-C in the real CLI) is cancelled; the lines written so far are whole.
func TestTraceRecordStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb bytes.Buffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"trace", "record", "--interval", "10ms", "--duration", "0"}, &out, &errb)
	}()
	time.Sleep(150 * time.Millisecond)
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("trace record did not stop on cancel")
	}
	recs, err := trace.Read(&out, trace.ReadOptions{})
	if err != nil || len(recs) < 3 {
		t.Errorf("%d records, err %v", len(recs), err)
	}
}

// TestGeneratedTracesUpToDate checks the committed traces in
// testdata/traces/gen against the generators (defaults, seed 42).
func TestGeneratedTracesUpToDate(t *testing.T) {
	for _, name := range trace.ScenarioNames() {
		want, err := os.ReadFile(filepath.Join("..", "..", "testdata", "traces", "gen", name+".jsonl"))
		if err != nil {
			t.Errorf("%s: %v (see testdata/traces/gen/README.md)", name, err)
			continue
		}
		got, errs, code := runCLI(t, "trace", "gen", name)
		if code != 0 || got != string(want) {
			t.Errorf("%s: testdata/traces/gen/%s.jsonl is out of date (exit %d %s); regenerate it (README.md)", name, name, code, errs)
		}
	}
}
