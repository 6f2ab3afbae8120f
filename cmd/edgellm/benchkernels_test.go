package main

import (
	"strings"
	"testing"

	"github.com/edgellm/edgellm/cmd/edgellm/internal/bench"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestBenchCompareEdgellm: ENGINE:edgellm runs one side on edgellm's
// kernels, and a second --compare engine is a third column measured in
// the same rounds, with its own ratios.
func TestBenchCompareEdgellm(t *testing.T) {
	q8 := sharedtest.Path(t, "models/derived/stories260K-ff192-Q8_0.gguf")
	var r bench.CompareResult
	benchJSON(t, &r, "-m", q8, "--engine", "native:edgellm", "--compare", "native,llamacpp", "-p", "8", "-n", "4", "-r", "1")
	if r.A == nil || r.B == nil || r.C == nil {
		t.Fatalf("missing side: %+v", r)
	}
	if r.A.Engine != "native"+bench.KernelsSuffix || r.B.Engine != "native" || r.C.Engine != "llamacpp" {
		t.Fatalf("engines %q, %q, %q", r.A.Engine, r.B.Engine, r.C.Engine)
	}
	if r.DecodeRatioC != r.A.DecodeTPS/r.C.DecodeTPS || r.PrefillRatioC != r.A.PrefillTPS/r.C.PrefillTPS {
		t.Fatalf("A/C ratios %v, %v; want %v, %v", r.DecodeRatioC, r.PrefillRatioC, r.A.DecodeTPS/r.C.DecodeTPS, r.A.PrefillTPS/r.C.PrefillTPS)
	}
}

// TestBenchKernelsVn: --kernels-vn prints v(n) for n = 1..8 for ggml's
// kernels and edgellm's, beside the bandwidth measured in the run.
func TestBenchKernelsVn(t *testing.T) {
	q8 := sharedtest.Path(t, "models/derived/stories260K-ff192-Q8_0.gguf")
	out, errs, code := runCLI(t, "bench", "-m", q8, "--kernels-vn", "-t", "1", "-r", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"memory read bandwidth, 1 thread(s)", "v(n)"} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %q in\n%s", want, out)
		}
	}
	rows := map[string]int{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 11 && (f[0] == "ggml" || f[0] == "edgellm") {
			rows[f[0]]++
		}
	}
	if rows["ggml"] != 8 || rows["edgellm"] != 8 {
		t.Fatalf("rows per kernel %v, want 8 each:\n%s", rows, out)
	}
	if _, _, code := runCLI(t, "bench", "-m", q8, "--kernels", "mine"); code == 0 {
		t.Fatal("--kernels mine accepted")
	}
}

// TestRunKernelsEdgellm: run --kernels edgellm generates the ggml path's
// greedy text (stories260K Q8_0), and the flag reaches the engine (a bad
// value is refused by host.Load).
func TestRunKernelsEdgellm(t *testing.T) {
	q8 := sharedtest.Path(t, "models/derived/stories260K-ff192-Q8_0.gguf")
	var texts [2]string
	for i, k := range []string{"ggml", "edgellm"} {
		out, errs, code := runCLI(t, "run", "-m", q8, "--engine", "native", "--kernels", k, "--temp", "0", "-n", "48", "-p", "Tom and Sam went to the park. They", "-t", "1")
		if code != 0 {
			t.Fatalf("--kernels %s: exit %d: %s", k, code, errs)
		}
		texts[i] = out
	}
	if texts[0] != texts[1] || len(texts[0]) < 40 {
		t.Fatalf("ggml %q\nedgellm %q", texts[0], texts[1])
	}
	if _, errs, code := runCLI(t, "run", "-m", q8, "--engine", "native", "--kernels", "mine", "-n", "4", "-p", "Tom"); code == 0 || !strings.Contains(errs, "Kernels") {
		t.Fatalf("--kernels mine: exit %d, stderr %q", code, errs)
	}
}
