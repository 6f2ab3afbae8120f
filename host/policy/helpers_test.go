package policy

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/policy/internal/guestbuild"
)

// fixture is the path of a committed WAT fixture's .wasm.
func fixture(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join("testdata", name+".wasm")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("fixture %s: %v (regenerate with make -C host/policy/testdata)", name, err)
	}
	return p
}

// testConfig is an insecure config with an in-memory compilation cache and a
// quiet logger (set EDGELLM_POLICY_LOG=1 to see the log).
func testConfig() Config {
	var h slog.Handler = slog.DiscardHandler
	if os.Getenv("EDGELLM_POLICY_LOG") != "" {
		h = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})
	}
	return NewConfig().WithInsecure(true).WithCacheDir("-").WithLogger(slog.New(h)).
		WithDeadline(20 * time.Millisecond).
		WithLimits(Limits{NTiers: 4, NLayers: 8, MaxK: 8, MaxWindow: 512,
			KVTypes: []abi.KVType{abi.KVF16, abi.KVQ8_0}, MaxThreads: 4, MaxCadence: 64})
}

func newRuntime(t testing.TB, cfg Config) *Runtime {
	t.Helper()
	r, err := NewRuntime(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return r
}

// testSensors returns readings with plenty of memory.
func testSensors() abi.Sensors {
	return abi.Sensors{Present: abi.PresentMemAvailable, MemAvailableMB: 4000, CtxLen: 10, TiersAvailable: 4, LayerCount: 8}
}

// current is the engine state the tests pre-fill: tier 0, K 0, f16.
func current() abi.Decision { return abi.Decision{KVType: abi.KVF16} }

// decideOK calls Decide and fails the test unless the module decided.
func decideOK(t testing.TB, r *Runtime) abi.Decision {
	t.Helper()
	s, d := testSensors(), current()
	res, err := r.Decide(context.Background(), &s, &d)
	if err != nil || res.Outcome != OutcomeOK {
		t.Fatalf("Decide = %+v, %v; want OK", res, err)
	}
	return d
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// goGuest builds testdata/goguest (the rule of sensor.wat, in Go) to Wasm.
func goGuest(t testing.TB) string { return buildGuest(t, filepath.Join("testdata", "goguest")) }

// defaultPolicy builds policies/default when it exists, else testdata/goguest.
func defaultPolicy(t testing.TB) string { return guestbuild.Default(t, ".") }

// buildGuest compiles the Go package main in dir to a WASI reactor.
func buildGuest(t testing.TB, dir string) string { return guestbuild.Build(t, dir) }

// policyModules are every committed fixture plus the Go guests.
func policyModules(t testing.TB) map[string]string { return guestbuild.Modules(t, ".") }

func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

func filepathWalk(t testing.TB, dir string, f func()) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			f()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
