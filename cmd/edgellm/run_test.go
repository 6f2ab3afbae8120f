package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/internal/wasmbuild"
)

// The golden end-to-end test: stories260K, greedy from BOS, 64 tokens.
func TestRunGolden(t *testing.T) {
	model := sharedtest.Stories260K(t)
	out, errs, code := runCLI(t, "run", "-m", model, "-n", "64", "--temp", "0", "--threads", "1", "--engine", "llamacpp")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	const want = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park."
	if !strings.HasPrefix(out, want) {
		t.Fatalf("stdout = %q\nwant prefix %q", out, want)
	}
	if !strings.Contains(errs, "decode: ") || !strings.Contains(errs, "tok/s") {
		t.Fatalf("no throughput on stderr: %q", errs)
	}
}

func TestRunSeedDeterministic(t *testing.T) {
	model := sharedtest.Stories260K(t)
	args := []string{"run", "-m", model, "-n", "40", "--temp", "0.9", "--seed", "7", "--threads", "1", "-p", "Once upon a time"}
	a, _, c1 := runCLI(t, args...)
	b, _, c2 := runCLI(t, args...)
	if c1 != 0 || c2 != 0 || a != b {
		t.Fatalf("same seed, different output:\n%q\n%q", a, b)
	}
	if !strings.HasPrefix(a, "Once upon a time") {
		t.Fatalf("prompt not echoed: %q", a)
	}
}

// TestRunTierSwap: --tiers with a swap plan runs on the native engine by
// default (weight sets: switch and release, KV in place) and on llamacpp
// on request (KV state serialised, model reloaded, state restored); both
// generate the same text, greedy.
func TestRunTierSwap(t *testing.T) {
	d := sharedtest.Path(t, "models/derived")
	tiers := strings.Join([]string{
		filepath.Join(d, "stories260K-ff192-Q8_0.gguf"),
		filepath.Join(d, "stories260K-ff192-Q5_0.gguf"),
		filepath.Join(d, "stories260K-ff192-Q4_0.gguf"),
	}, ",")
	var outs []string
	for _, tc := range []struct {
		engine string
		phases []string
	}{
		{"auto", []string{"switch", "release of the old tier", "KV kept in place"}},
		{"llamacpp", []string{"serialize", "unload", "load", "restore"}},
	} {
		out, errs, code := runCLI(t, "run", "--tiers", tiers, "--engine", tc.engine, "--swap-at", "10,30", "--swap-to", "2,1", "-n", "40", "--temp", "0", "--threads", "1")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.engine, code, errs)
		}
		if strings.Count(errs, "[swap ") != 2 || !strings.Contains(errs, "swap 0→2 at token 10") || !strings.Contains(errs, "swap 2→1 at token 30") {
			t.Fatalf("%s: swap lines missing: %s", tc.engine, errs)
		}
		for _, phase := range tc.phases {
			if !strings.Contains(errs, phase) {
				t.Fatalf("%s: no %s timing: %s", tc.engine, phase, errs)
			}
		}
		if !strings.HasPrefix(out, "Once upon a time") {
			t.Fatalf("%s: output %q", tc.engine, out)
		}
		outs = append(outs, out)
	}
	if outs[0] != outs[1] {
		t.Errorf("native and llamacpp ladders generated different text:\n%q\n%q", outs[0], outs[1])
	}
}

func TestRunBadInput(t *testing.T) {
	dir := t.TempDir()
	notGGUF := filepath.Join(dir, "x.gguf")
	os.WriteFile(notGGUF, []byte("definitely not a model file, just text"), 0o644)
	truncated := filepath.Join(dir, "trunc.gguf")
	full, _ := os.ReadFile(sharedtest.Stories260K(t))
	os.WriteFile(truncated, full[:4096], 0o644)
	model := sharedtest.Stories260K(t)
	vocab := sharedtest.Path(t, "models/vocab/ggml-vocab-llama-spm.gguf")
	q8 := sharedtest.Path(t, "models/derived/stories260K-ff192-Q8_0.gguf")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing model", []string{"-m", filepath.Join(dir, "none.gguf")}, 1, "none.gguf"},
		{"not GGUF", []string{"-m", notGGUF}, 1, "x.gguf"},
		{"truncated", []string{"-m", truncated}, 1, "trunc.gguf"},
		{"vocab only", []string{"-m", vocab}, 1, "vocabulary-only"},
		{"bad kv type", []string{"-m", model, "--kv-type", "q3"}, 2, "kv-type"},
		{"ctx above training", []string{"-m", model, "--ctx", "100000"}, 2, "training context"},
		{"prompt longer than context", []string{"-m", model, "--ctx", "16", "-p", strings.Repeat("Once upon a time ", 10)}, 2, "exceed --ctx"},
		{"bad temperature", []string{"-m", model, "--temp", "-nan"}, 2, `invalid argument "-nan" for "--temp"`},
		{"NaN temperature", []string{"-m", model, "--temp", "nan"}, 2, "temperature NaN out of range"},
		{"temperature above range", []string{"-m", model, "--temp", "101"}, 2, "temperature 101"},
		{"swap without tiers", []string{"-m", model, "--swap-at", "5", "--swap-to", "1"}, 2, "--tiers"},
		{"swap-to out of range", []string{"--tiers", q8 + "," + q8, "--swap-at", "5", "--swap-to", "3"}, 2, "swap-to"},
		{"unknown engine", []string{"-m", model, "--engine", "gpu"}, 1, "unknown engine"},
		{"stray argument", []string{"-m", model, "hello"}, 2, "unexpected argument"},
		{"unknown flag", []string{"--frobnicate"}, 2, "unknown flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs, code := runCLI(t, append([]string{"run", "-n", "4", "--threads", "1"}, tt.args...)...)
			if code != tt.code || !strings.Contains(errs, tt.want) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", code, tt.code, errs, tt.want)
			}
			if strings.Contains(errs, "panic") || strings.Contains(errs, "goroutine ") {
				t.Fatalf("panic: %s", errs)
			}
		})
	}
}

func TestRunWithPolicy(t *testing.T) {
	d := sharedtest.Path(t, "models/derived")
	tiers := filepath.Join(d, "stories260K-ff192-Q8_0.gguf") + "," + filepath.Join(d, "stories260K-ff192-Q4_0.gguf")
	wasm := buildPolicy(t, "default")
	out, errs, code := runCLI(t, "run", "--tiers", tiers, "--policy", wasm, "--policy-insecure",
		"--sensors", "trace:../../testdata/traces/thermal_ramp.jsonl", "--trace-step-ms", "50",
		"-n", "100", "--temp", "0", "--threads", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "SIMULATED") {
		t.Fatalf("trace sensors not labelled simulated: %s", errs)
	}
	if !strings.Contains(errs, "[policy step ") || !strings.Contains(errs, "tier 0→1") {
		t.Fatalf("no tier change printed under the thermal ramp: %s", errs)
	}
	if !strings.HasPrefix(out, "Once upon a time") {
		t.Fatalf("output %q", out)
	}
	// Unsigned policy without --policy-insecure is refused.
	_, errs, code = runCLI(t, "run", "--tiers", tiers, "--policy", wasm, "-n", "4", "--threads", "1")
	if code == 0 || !strings.Contains(errs, "--policy") {
		t.Fatalf("unsigned policy accepted: exit %d %s", code, errs)
	}
	// Bad --sensors value.
	_, errs, code = runCLI(t, "run", "--tiers", tiers, "--policy", wasm, "--policy-insecure", "--sensors", "thermometer", "-n", "4")
	if code != 2 || !strings.Contains(errs, "--sensors") {
		t.Fatalf("bad --sensors: exit %d %s", code, errs)
	}
}

// buildPolicy compiles policies/NAME to WebAssembly in a temp dir.
func buildPolicy(t *testing.T, name string) string {
	t.Helper()
	out, err := wasmbuild.Build("../../policies/"+name, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRunLayerSets(t *testing.T) {
	d := sharedtest.Path(t, "models/derived")
	q8, q4 := filepath.Join(d, "stories260K-ff192-Q8_0.gguf"), filepath.Join(d, "stories260K-ff192-Q4_0.gguf")
	out, errs, code := runCLI(t, "run", "-m", q8, "--layer-sets", q4, "-n", "16", "--temp", "0", "--threads", "1")
	if code != 0 || !strings.Contains(errs, "weight sets: 0: stories260K-ff192-Q8_0.gguf") || !strings.HasPrefix(out, "Once upon a time") {
		t.Fatalf("exit %d\nstdout %q\nstderr %s", code, out, errs)
	}
	_, errs, code = runCLI(t, "run", "-m", q8, "--layer-sets", filepath.Join(d, "stories260K-first4layers.gguf"), "-n", "4", "--threads", "1")
	if code != 1 || !strings.Contains(errs, "first4layers") {
		t.Fatalf("mismatched set accepted: exit %d %s", code, errs)
	}
}

// TestRunDecisionLog (#32 point 7): run --decision-log writes the file that
// `policy log` reads, with the tier changes the thermal ramp causes; the
// flag without a policy is a usage error.
func TestRunDecisionLog(t *testing.T) {
	d := sharedtest.Path(t, "models/derived")
	tiers := filepath.Join(d, "stories260K-ff192-Q8_0.gguf") + "," + filepath.Join(d, "stories260K-ff192-Q4_0.gguf")
	wasm := buildPolicy(t, "default")
	log := filepath.Join(t.TempDir(), "decisions.jsonl")
	_, errs, code := runCLI(t, "run", "--tiers", tiers, "--policy", wasm, "--policy-insecure",
		"--sensors", "trace:../../testdata/traces/thermal_ramp.jsonl", "--trace-step-ms", "50",
		"-n", "100", "--temp", "0", "--threads", "1", "--decision-log", log)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	out, errs, code := runCLI(t, "policy", "log", log)
	if code != 0 || !strings.Contains(out, "change") {
		t.Fatalf("policy log: exit %d, stdout %q, stderr %q; want the logged changes", code, out, errs)
	}
	_, errs, code = runCLI(t, "run", "--tiers", tiers, "-n", "4", "--decision-log", log)
	if code != 2 || !strings.Contains(errs, "--decision-log") {
		t.Fatalf("--decision-log without a policy: exit %d, %q", code, errs)
	}
}

// TestRunThreadsCap: an explicit --threads is a cap the policy may lower
// but not raise past (#32: the default policy raised an explicit
// --threads 1 to 2). The test policy asks for 64 threads at every step.
func TestRunThreadsCap(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: no policy can raise past one thread here")
	}
	wasm, err := wasmbuild.Build("./testdata/morethreads", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	model := sharedtest.Stories260K(t)
	_, errs, code := runCLI(t, "run", "-m", model, "--policy", wasm, "--policy-insecure", "-n", "8", "--temp", "0", "--threads", "1")
	if code != 0 || strings.Contains(errs, "threads 1→") {
		t.Fatalf("--threads 1: exit %d; the policy raised threads past it:\n%s", code, errs)
	}
	t.Setenv("EDGELLM_THREADS", "1") // the environment is as explicit as the flag
	if _, errs, _ = runCLI(t, "run", "-m", model, "--policy", wasm, "--policy-insecure", "-n", "8", "--temp", "0"); strings.Contains(errs, "threads 1→") {
		t.Fatalf("EDGELLM_THREADS=1: the policy raised threads past it:\n%s", errs)
	}
}

// TestRunInsecureKeepsNoRollbackState (#27): --policy-insecure is for
// development: a bundle it loads must not move the device's persisted
// rollback index, so the state directory gets no rollback.json.
func TestRunInsecureKeepsNoRollbackState(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "k")
	if _, errs, code := runCLI(t, "policy", "keygen", "-o", key); code != 0 {
		t.Fatalf("keygen: %s", errs)
	}
	bundle := filepath.Join(dir, "b.tar.gz")
	if _, errs, code := runCLI(t, "policy", "sign", "--key", key+".key", "--name", "default", "--revision", "7",
		buildPolicy(t, "default"), "-o", bundle); code != 0 {
		t.Fatalf("sign: %s", errs)
	}
	state := filepath.Join(dir, "state")
	_, errs, code := runCLI(t, "run", "-m", sharedtest.Stories260K(t), "-n", "4", "--threads", "1",
		"--policy", bundle, "--policy-insecure", "--policy-state", state)
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(state, "rollback.json")); !os.IsNotExist(err) {
		t.Fatalf("--policy-insecure wrote the rollback index (%v)", err)
	}
}
