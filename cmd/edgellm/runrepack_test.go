package main

import (
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"

	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/kernels"
)

// TestRunRepack: run --repack on both engines reports the anonymous memory
// it costs on stderr, and the two engines, both repacked, generate the same
// greedy text (they run the same kernels on the same repacked matrices:
// internal/native TestParityRepacked). On an F32 model nothing is eligible:
// said on stderr, not an error.
func TestRunRepack(t *testing.T) {
	if runtime.GOARCH != "amd64" || !cpu.X86.HasAVX2 {
		t.Skip("no AVX2: ggml has no repacked Q4_0 kernel on this CPU")
	}
	q4 := filepath.Join(sharedtest.Path(t, "models/derived"), "stories260K-ff192-Q4_0.gguf")
	f32 := sharedtest.Stories260K(t)
	tests := []struct {
		name, model, engine, wantErr string
	}{
		{"native q4_0", q4, "native", "matrices copied into repacked layouts"},
		{"llamacpp q4_0", q4, "llamacpp", "matrices copied into repacked layouts"},
		{"native f32", f32, "native", "nothing to repack"},
		{"llamacpp f32", f32, "llamacpp", "nothing to repack"},
	}
	texts := map[string]string{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := runCLI(t, "run", "-m", tc.model, "-n", "48", "--temp", "0", "--threads", "1", "--engine", tc.engine, "--repack")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			if !strings.Contains(errs, "repack: ") || !strings.Contains(errs, tc.wantErr) {
				t.Fatalf("stderr lacks %q:\n%s", tc.wantErr, errs)
			}
			if tc.model == q4 && strings.Contains(errs, " 0.0 MiB") {
				t.Errorf("repacked 0 MiB:\n%s", errs)
			}
			texts[tc.name] = out
		})
	}
	if a, b := texts["native q4_0"], texts["llamacpp q4_0"]; a == "" || a != b {
		t.Errorf("repacked engines differ:\nnative   %q\nllamacpp %q", a, b)
	}
}

// TestRunRepackLayers: --repack-layers N repacks the first N units at load
// and says so (the rest reserved, read from the mapping); its bad inputs
// are one-line errors.
func TestRunRepackLayers(t *testing.T) {
	if runtime.GOARCH != "amd64" || !cpu.X86.HasAVX2 {
		t.Skip("no AVX2: ggml has no repacked Q4_0 kernel on this CPU")
	}
	q4 := filepath.Join(sharedtest.Path(t, "models/derived"), "stories260K-ff192-Q4_0.gguf")
	base := []string{"run", "-m", q4, "-n", "8", "--temp", "0", "--threads", "1"}
	for _, tc := range []struct {
		args          []string
		code          int
		want, wantOut string
	}{
		{[]string{"--engine", "native", "--repack", "--repack-layers", "2"}, 0, "2 of 5 units (layers from 0, then the output head) copied", ""},
		{[]string{"--engine", "native", "--repack", "--repack-layers", "0"}, 0, "0 of 5 units", ""},
		{[]string{"--engine", "native", "--repack", "--repack-layers", "all"}, 0, "matrices copied into repacked layouts", ""},
		{[]string{"--engine", "native", "--repack-layers", "2"}, 2, "--repack-layers 2 needs --repack", ""},
		{[]string{"--engine", "native", "--repack", "--repack-layers", "-1"}, 2, "want all or a count ≥ 0", ""},
		{[]string{"--engine", "llamacpp", "--repack", "--repack-layers", "2"}, 2, "only the native engine repacks some layers", ""},
	} {
		_, errs, code := runCLI(t, append(base, tc.args...)...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d (want %d), stderr lacks %q:\n%s", tc.args, code, tc.code, tc.want, errs)
		}
	}
}

// TestBenchRepackSweep: bench --repack-sweep switches one engine between
// none, half and all of its units repacked and prints a row for each (the
// rates themselves are machine-dependent and not checked); llama.cpp is
// refused.
func TestBenchRepackSweep(t *testing.T) {
	if runtime.GOARCH != "amd64" || !cpu.X86.HasAVX2 {
		t.Skip("no AVX2: ggml has no repacked Q4_0 kernel on this CPU")
	}
	q4 := filepath.Join(sharedtest.Path(t, "models/derived"), "stories260K-ff192-Q4_0.gguf")
	out, errs, code := runCLI(t, "bench", "-m", q4, "--repack-sweep", "-t", "1", "-p", "4", "-n", "8", "-r", "2", "--ctx", "32")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, row := range []string{"0 of 5 ", "2 of 5 ", "5 of 5 "} {
		if !strings.Contains(out, row) {
			t.Errorf("no row %q:\n%s", row, out)
		}
	}
	if !strings.Contains(out, "MiB) / ") {
		t.Errorf("no switch times:\n%s", out)
	}
	// --kernels edgellm: the units are in edgellm's q4x4 layout, whose
	// copies of this model take 0.17 MiB (ggml's repacked blocks 0.13).
	if kernels.EdgellmQ4x4Available() {
		out, errs, code := runCLI(t, "bench", "-m", q4, "--repack-sweep", "--kernels", "edgellm", "-t", "1", "-p", "4", "-n", "8", "-r", "1", "--ctx", "32")
		if code != 0 {
			t.Fatalf("--kernels edgellm: exit %d: %s", code, errs)
		}
		if !regexp.MustCompile(`0 of 5 +0\.0 `).MatchString(out) || !regexp.MustCompile(`5 of 5 +0\.2 `).MatchString(out) {
			t.Errorf("--kernels edgellm: want 0 and 0.2 MiB of q4x4 copies at 0 and 5 units:\n%s", out)
		}
	}
	if _, errs, code := runCLI(t, "bench", "-m", q4, "--repack-sweep", "--engine", "llamacpp"); code != 2 || !strings.Contains(errs, "native engine") {
		t.Errorf("llamacpp: exit %d, %s", code, errs)
	}
}

// TestBenchSpinSweep: bench --spin-sweep measures ggml's unbounded barrier
// spin and the bounded one in one process, a row each with the ratio (the
// rates are machine-dependent and not checked), and leaves the process's
// spin limit as it found it.
func TestBenchSpinSweep(t *testing.T) {
	model := sharedtest.Stories260K(t)
	before := kernels.SetSpinLimit(kernels.DefaultSpinLimit)
	kernels.SetSpinLimit(before)
	for _, eng := range []string{"native", "llamacpp"} {
		out, errs, code := runCLI(t, "bench", "-m", model, "--engine", eng, "--spin-sweep", "-t", "2", "-p", "4", "-n", "8", "-r", "2", "--ctx", "32")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", eng, code, errs)
		}
		for _, row := range []string{"unbounded (ggml)", kernels.DefaultSpinLimit.String() + ", then sleep", "÷ unbounded", "1.000, 1.000, 1.000"} {
			if !strings.Contains(out, row) {
				t.Errorf("%s: no %q:\n%s", eng, row, out)
			}
		}
	}
	if got := kernels.SetSpinLimit(before); got != before {
		t.Errorf("spin limit after the sweep %v, want %v as before", got, before)
	}
	for _, bad := range []struct{ args, want string }{
		{"--spin-sweep --spec ngram", "cannot be combined"},
		{"--spin-sweep --hogs 1000", "--hogs 1000"},
		{"--hogs 1", "--hogs is for --spin-sweep"},
	} {
		if _, errs, code := runCLI(t, append([]string{"bench", "-m", model}, strings.Fields(bad.args)...)...); code != 2 || !strings.Contains(errs, bad.want) {
			t.Errorf("%s: exit %d, want 2 and %q in: %s", bad.args, code, bad.want, errs)
		}
	}
}
