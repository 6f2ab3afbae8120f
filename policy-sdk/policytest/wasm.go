package policytest

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/policy"
	"github.com/edgellm/edgellm/internal/wasmbuild"
)

// EnvWasm names the environment variable that holds a prebuilt module for
// the package under test; `edgellm policy test DIR` sets it to the .wasm it
// built from DIR.
const EnvWasm = "EDGELLM_POLICY_WASM"

// Build compiles the policy package in dir (package main with sdk.Register)
// to a .wasm in a temporary directory and returns its path; args are extra
// `go build` flags. It always rebuilds, so a test never runs a stale module
// (Go's build cache keeps it fast).
//
// When EDGELLM_POLICY_WASM is set, dir is the package under test (the test's
// working directory) and there are no extra flags, Build returns that module
// instead of building, so RunWasm(t, Build(t, "."), cases) tests exactly the
// .wasm `edgellm policy test` built. Other builds (another directory, or
// flags such as -ldflags=-X … that the prebuilt module lacks) still compile.
func Build(t testing.TB, dir string, args ...string) string {
	t.Helper()
	p, ok, err := prebuilt(dir, args)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Logf("using %s=%s instead of building %s", EnvWasm, p, dir)
		return p
	}
	p, err = wasmbuild.Build(dir, t.TempDir(), args...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// prebuilt returns $EDGELLM_POLICY_WASM when it applies to a Build of dir
// with args, and an error when it applies but is not a regular file.
func prebuilt(dir string, args []string) (string, bool, error) {
	p := os.Getenv(EnvWasm)
	if p == "" || len(args) > 0 {
		return "", false, nil
	}
	abs, err1 := filepath.Abs(dir)
	wd, err2 := os.Getwd()
	if err1 != nil || err2 != nil || abs != wd {
		return "", false, nil
	}
	fi, err := os.Stat(p)
	if err != nil {
		return "", false, errors.New(EnvWasm + ": " + err.Error())
	}
	if !fi.Mode().IsRegular() {
		return "", false, errors.New(EnvWasm + "=" + p + ": not a regular file")
	}
	return p, true, nil
}

// wasmDeadline is generous: these tests check decisions, not latency, and the
// shared CI machines are noisy. The host's default is 5 ms
// (policy.DefaultDeadline).
const wasmDeadline = 2 * time.Second

// RunWasm runs the cases against the module at wasmPath through the real
// host runtime (host/policy), one fresh Runtime per case. Get wasmPath from
// Build, which honours EDGELLM_POLICY_WASM (the module `edgellm policy test`
// built) instead of building.
func RunWasm(t *testing.T, wasmPath string, cases []Case) {
	t.Helper()
	ctx := context.Background()
	run(t, cases, func(t *testing.T, c *Case) decider {
		lim := limitsFor(c)
		lw := &tlog{t: t}
		cfg := policy.NewConfig().WithInsecure(true).WithLimits(lim).
			WithDeadline(wasmDeadline).WithInitTimeout(30 * time.Second).
			WithLogger(slog.New(slog.NewTextHandler(lw, &slog.HandlerOptions{Level: slog.LevelWarn})))
		rt, err := policy.NewRuntime(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = rt.Close(ctx)
			lw.close()
		})
		if err := rt.LoadFile(ctx, wasmPath); err != nil {
			t.Fatal(err)
		}
		return func(t *testing.T, s *abi.Sensors, d *abi.Decision) {
			res, err := rt.Decide(ctx, s, d)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != policy.OutcomeOK {
				t.Fatalf("step %d: outcome %v (status %v, %s, %v)", s.Step, res.Outcome, res.Status, res.Detail, res.Err)
			}
			if res.Clamps != 0 && !c.AllowClamps {
				t.Fatalf("step %d: decision clamped by the host (%v): %+v", s.Step, res.Clamps, *d)
			}
		}
	})
}

// limitsFor derives engine limits from the case: its Limits if set, else
// Base's tiers and layers, every K up to abi.MaxSpecK, a 4096-token
// window, every KV type, and enough threads for Start and the case's
// CPU readings.
func limitsFor(c *Case) policy.Limits {
	if c.Limits != nil {
		return *c.Limits
	}
	l := policy.DefaultLimits()
	l.NTiers = max(1, int(c.Base.TiersAvailable))
	if c.Base.LayerCount > 0 {
		l.NLayers = min(int(c.Base.LayerCount), abi.MaxLayers)
	}
	l.MaxWindow = 4096
	// Enough threads for Start and for every CPU count the case's readings
	// report (SIMULATED readings must not be clamped by the CPUs this test
	// process happens to have: under taskset -c 0, NumCPU is 1).
	l.MaxThreads = max(runtime.NumCPU(), int(c.Start.Threads), int(c.Base.CPUAllowed), 1)
	for i := range c.Steps {
		l.MaxThreads = max(l.MaxThreads, int(c.Steps[i].CPUAllowed))
	}
	return l
}

// tlog sends the runtime's log lines (written from its own goroutine) to the
// test log until the case ends.
type tlog struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *tlog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *tlog) close() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}
