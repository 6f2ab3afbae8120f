package main

import (
	"strings"
	"testing"
	"time"

	"github.com/edgellm/edgellm/host"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestBenchSpecSweep: `bench --spec skip:3 --spec-sweep` on stories260K
// prints K = 0..8 and auto with the analytic column (and, for K ≥ 1, the
// same from the costs its own runs measured), greedy output identical at
// every K; on the SYNTHETIC mix the last lines name it; more
// than one thread is refused (the sweep measures one thread's CPU time).
func TestBenchSpecSweep(t *testing.T) {
	model := sharedtest.Path(t, "models/derived/stories260K-ff192-f32.gguf")
	base := []string{"bench", "-m", model, "--engine", "native", "--spec", "skip:3", "--spec-sweep",
		"-p", "8", "-n", "12", "-r", "1", "--ctx", "128"}
	out, errs, code := runCLI(t, append(base, "-t", "1", "--synth-from", "3", "--synth-agree", "0.9")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"tokens per thread-CPU second", "SYNTHETIC pair: layers ≥ 3", "v(n) =", "measured/analytic", "in-run unit: the K = 0 runs' own step"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	rows := 0
	for _, l := range strings.Split(out, "\n") {
		f := strings.Split(l, "\t")
		if len(f) < 7 || f[0] == "K" {
			continue
		}
		rows++
		if f[6] != "yes" {
			t.Fatalf("greedy output not identical: %q", l)
		}
		// K ≥ 1: the costs its own runs measured, and the share of CPU
		// outside draft steps and verify batches (a percentage in [0, 100]).
		if f[0] != "0" && f[0] != "auto" {
			if len(f) != 11 || !strings.HasSuffix(f[9], "%") {
				t.Fatalf("K %s: no in-run columns: %q", f[0], l)
			}
		}
	}
	if rows != 10 {
		t.Fatalf("%d K rows, want 10 (K = 0..8 and auto):\n%s", rows, out)
	}
	_, errs, code = runCLI(t, append(base, "-t", "2")...)
	if code != 2 || !strings.Contains(errs, "--threads 1 (got 2)") {
		t.Fatalf("2 threads: exit %d, %s", code, errs)
	}
}

// TestPlainStepUnit: the in-run costs' unit is the K = 0 runs' own mean
// plain step (verify time ÷ steps, pooled over the repeats).
func TestPlainStepUnit(t *testing.T) {
	rs := []sweepRun{
		{st: host.DraftStats{VerifyTime: 30 * time.Millisecond, PlainSteps: 10}},
		{st: host.DraftStats{VerifyTime: 50 * time.Millisecond, PlainSteps: 30}},
	}
	if got := plainStep(rs); got != 2*time.Millisecond {
		t.Fatalf("plain step %v, want 2ms", got)
	}
	if got := plainStep(nil); got != 0 {
		t.Fatalf("no runs: %v", got)
	}
}
