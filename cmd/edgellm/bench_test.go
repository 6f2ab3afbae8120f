package main

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"

	"github.com/edgellm/edgellm/cmd/edgellm/internal/bench"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// benchJSON runs `edgellm bench ... --json` and decodes stdout strictly.
func benchJSON(t *testing.T, v any, args ...string) string {
	t.Helper()
	out, errs, code := runCLI(t, append([]string{"bench", "--json", "--threads", "1"}, args...)...)
	if code != 0 {
		t.Fatalf("bench %v: exit %d: %s", args, code, errs)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, out)
	}
	return errs
}

func checkResult(t *testing.T, r *bench.Result, nPrompt, nGen, repeats int) {
	t.Helper()
	if r.Engine != "llamacpp" || r.NPrompt != nPrompt || r.NGen != nGen || r.Repeats != repeats ||
		r.Threads != 1 || r.KVType != "f16" || r.NCtx != 2048 {
		t.Fatalf("echoed settings wrong: %+v", r)
	}
	if !(r.PrefillTPS > 0 && r.DecodeTPS > 0 && r.LoadMS > 0) {
		t.Fatalf("prefill %v tok/s, decode %v tok/s, load %v ms: want > 0", r.PrefillTPS, r.DecodeTPS, r.LoadMS)
	}
	if len(r.PerRepeat) != repeats {
		t.Fatalf("%d per-repeat values, want %d", len(r.PerRepeat), repeats)
	}
	var fill, dec []float64
	for i, p := range r.PerRepeat {
		if !(p.PrefillTPS > 0 && p.DecodeTPS > 0 && p.PrefillMS > 0 && p.DecodeMS > 0) || p.DecodeTokens != nGen-1 {
			t.Fatalf("repeat %d: %+v (want positive values and %d timed decode tokens)", i, p, nGen-1)
		}
		// tok/s and ms agree with each other
		if got := float64(nPrompt) / (p.PrefillMS / 1000); got < p.PrefillTPS*0.99 || got > p.PrefillTPS*1.01 {
			t.Fatalf("repeat %d: %d tokens in %v ms is %v tok/s, reported %v", i, nPrompt, p.PrefillMS, got, p.PrefillTPS)
		}
		fill, dec = append(fill, p.PrefillTPS), append(dec, p.DecodeTPS)
	}
	if r.PrefillTPS != bench.Median(fill) || r.DecodeTPS != bench.Median(dec) {
		t.Fatalf("reported %v/%v tok/s are not the medians of %v / %v", r.PrefillTPS, r.DecodeTPS, fill, dec)
	}
	// stories260K: 5 layers × (K + V) × 4 KV heads × 8 dims × 2 bytes (f16)
	// = 640 bytes of KV per token, plus llama.cpp's per-cell metadata.
	if r.KVStateBytesPerToken < 640 || r.KVStateBytesPerToken > 640+32 {
		t.Fatalf("kv_state_bytes_per_token %d, want 640 + a few metadata bytes", r.KVStateBytesPerToken)
	}
	if !strings.Contains(r.PromptSource, "stories.txt") || r.Sampling == "" {
		t.Fatalf("prompt source %q, sampling %q", r.PromptSource, r.Sampling)
	}
}

func TestBenchJSON(t *testing.T) {
	model := sharedtest.Stories260K(t)
	var r bench.Result
	errs := benchJSON(t, &r, "-m", model, "--engine", "llamacpp", "-p", "48", "-n", "24", "-r", "3")
	checkResult(t, &r, 48, 24, 3)
	if r.Model != model {
		t.Fatalf("model %q, want %q", r.Model, model)
	}
	// The process (Go runtime + llama.cpp + a 1 MiB model) is tens of MiB;
	// PSS never exceeds RSS.
	if !(r.RSSPeakMB > 5 && r.RSSPeakMB < 2048 && r.PSSPeakMB > 1 && r.PSSPeakMB <= r.RSSPeakMB*1.05) {
		t.Fatalf("peak RSS %.1f MiB, PSS %.1f MiB", r.RSSPeakMB, r.PSSPeakMB)
	}
	if r.MemSamples < 2 || r.SmapsSamples < 2 {
		t.Fatalf("%d memory samples (%d smaps): the start and final readings are missing", r.MemSamples, r.SmapsSamples)
	}
	if !strings.Contains(errs, "repeat 3/3") {
		t.Fatalf("no progress on stderr: %q", errs)
	}
}

func TestBenchCompareSameEngine(t *testing.T) {
	model := sharedtest.Stories260K(t)
	var r bench.CompareResult
	benchJSON(t, &r, "-m", model, "--engine", "llamacpp", "--compare", "llamacpp", "-p", "64", "-n", "64", "-r", "5")
	if r.A == nil || r.B == nil {
		t.Fatalf("missing side: %+v", r)
	}
	checkResult(t, r.A, 64, 64, 5)
	checkResult(t, r.B, 64, 64, 5)
	// The same engine on the same model: the ratios are 1 up to noise (this
	// machine is shared and often overloaded, hence the broad band).
	for name, v := range map[string]float64{"decode_ratio": r.DecodeRatio, "prefill_ratio": r.PrefillRatio} {
		if !(v > 0.3 && v < 3) {
			t.Errorf("%s %.3f outside (0.3, 3)", name, v)
		}
	}
	if r.DecodeRatio != r.A.DecodeTPS/r.B.DecodeTPS {
		t.Fatalf("decode_ratio %v is not A/B = %v/%v", r.DecodeRatio, r.A.DecodeTPS, r.B.DecodeTPS)
	}
	if !(r.PSSPeakMB > 1 && r.PSSPeakMB <= r.RSSPeakMB*1.05) {
		t.Fatalf("process peak RSS %.1f MiB, PSS %.1f MiB", r.RSSPeakMB, r.PSSPeakMB)
	}
	if r.A.RSSPeakMB != 0 || r.B.RSSPeakMB != 0 {
		t.Fatalf("per-side peaks set although both engines share the process")
	}
}

// TestBenchRepackSides: ENGINE:repack repacks one side of a comparison;
// the report labels it and gives the anonymous memory it cost (the
// llama.cpp side's from the header: as many matrices as the native side's
// in-process count, internal/native TestRepackStats).
func TestBenchRepackSides(t *testing.T) {
	if runtime.GOARCH != "amd64" || !cpu.X86.HasAVX2 {
		t.Skip("no AVX2: ggml has no repacked Q4_0 kernel on this CPU")
	}
	q4 := sharedtest.Path(t, "models/derived/stories260K-ff192-Q4_0.gguf")
	var r bench.CompareResult
	benchJSON(t, &r, "-m", q4, "--engine", "native:repack", "--compare", "llamacpp:repack", "-p", "8", "-n", "4", "-r", "1")
	if r.A == nil || r.B == nil {
		t.Fatalf("missing side: %+v", r)
	}
	for _, s := range []*bench.Result{r.A, r.B} {
		if !s.Repack || !strings.HasSuffix(s.Engine, bench.RepackSuffix) || s.RepackTensors == 0 || !(s.RepackMB > 0) {
			t.Errorf("%s: repack %v, %d tensors, %.3f MiB", s.Engine, s.Repack, s.RepackTensors, s.RepackMB)
		}
	}
	if r.A.RepackTensors != r.B.RepackTensors || r.A.RepackMB < r.B.RepackMB {
		t.Errorf("native repacked %d tensors (%.4f MiB), llama.cpp %d (%.4f MiB)", r.A.RepackTensors, r.A.RepackMB, r.B.RepackTensors, r.B.RepackMB)
	}
	var plain bench.CompareResult
	benchJSON(t, &plain, "-m", q4, "--engine", "native", "--compare", "llamacpp", "-p", "8", "-n", "4", "-r", "1")
	if plain.A.Repack || plain.B.Repack || plain.A.RepackMB != 0 || plain.B.RepackMB != 0 {
		t.Errorf("not asked, yet repacked: %+v / %+v", plain.A, plain.B)
	}
}

func TestBenchSwap(t *testing.T) {
	q8 := sharedtest.Path(t, "models/derived/stories260K-ff192-Q8_0.gguf")
	q4 := sharedtest.Path(t, "models/derived/stories260K-ff192-Q4_0.gguf")
	var r bench.SwapResult
	benchJSON(t, &r, "--swap", "--tiers", q8+","+q4, "--ctx-tokens", "200", "-r", "2")
	if r.NCtxTokens != 200 || r.Repeats != 2 || len(r.Tiers) != 2 || r.Tiers[0] != q8 || r.Tiers[1] != q4 {
		t.Fatalf("echoed settings wrong: %+v", r)
	}
	if len(r.Swaps) != 4 {
		t.Fatalf("%d swaps, want 4 (2 round trips)", len(r.Swaps))
	}
	for i, s := range r.Swaps {
		if s.From != i%2 || s.To != 1-i%2 {
			t.Fatalf("swap %d went %d→%d", i, s.From, s.To)
		}
		if !(s.SerializeMS > 0 && s.UnloadMS > 0 && s.LoadMS > 0 && s.RestoreMS > 0) {
			t.Fatalf("swap %d: a phase is not positive: %+v", i, s)
		}
		if sum := s.SerializeMS + s.UnloadMS + s.LoadMS + s.RestoreMS; sum < s.TotalMS*0.999 || sum > s.TotalMS*1.001 {
			t.Fatalf("swap %d: phases add to %v, total %v", i, sum, s.TotalMS)
		}
	}
	if !(r.SwapMSMedian > 0 && r.SerializeMS > 0 && r.UnloadMS > 0 && r.LoadMS > 0 && r.RestoreMS > 0 &&
		r.DownMSMedian > 0 && r.UpMSMedian > 0 && r.InitialLoadMS > 0) {
		t.Fatalf("medians not positive: %+v", r)
	}
	// The migrated state is the 200 tokens' KV: 640 bytes each plus metadata.
	if r.StateBytes < 200*640 || r.StateBytes > 200*700+4096 {
		t.Fatalf("state_bytes %d for 200 tokens", r.StateBytes)
	}
	if !(r.PSSPeakMB > 1 && r.PSSPeakMB <= r.RSSPeakMB*1.05) {
		t.Fatalf("peak RSS %.1f MiB, PSS %.1f MiB", r.RSSPeakMB, r.PSSPeakMB)
	}
}

func TestBenchText(t *testing.T) {
	model := sharedtest.Stories260K(t)
	out, errs, code := runCLI(t, "bench", "-m", model, "--engine", "llamacpp", "-t", "1", "-p", "8", "-n", "4", "-r", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || !strings.Contains(lines[0], "decode tok/s") || !strings.Contains(lines[1], "llamacpp") ||
		!strings.Contains(lines[3], "min/med/max") || !strings.Contains(lines[4], "of 1 threads") {
		t.Fatalf("want a header, one row, a footnote, then the spread and process-CPU table on stdout:\n%s", out)
	}
	if strings.Contains(out, "repeat 1/1") || !strings.Contains(errs, "repeat 1/1") {
		t.Fatalf("progress must go to stderr only:\nstdout %q\nstderr %q", out, errs)
	}
}

func TestBenchErrors(t *testing.T) {
	model := sharedtest.Stories260K(t)
	q8 := sharedtest.Path(t, "models/derived/stories260K-ff192-Q8_0.gguf")
	four := sharedtest.Path(t, "models/derived/stories260K-first4layers.gguf")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown flag", []string{"--bogus"}, 2, "unknown flag"},
		{"not a number", []string{"-p", "many"}, 2, "invalid argument"},
		{"extra argument", []string{"-m", model, "extra"}, 2, "unexpected argument"},
		{"zero prompt", []string{"-m", model, "-p", "0"}, 2, "-p 0"},
		{"too few generated", []string{"-m", model, "-n", "2"}, 2, "-n 2"},
		{"zero repeats", []string{"-m", model, "-r", "0"}, 2, "-r 0"},
		{"negative threads", []string{"-m", model, "-t", "-1"}, 2, "--threads -1"},
		{"bad kv type", []string{"-m", model, "--kv-type", "q3"}, 2, "--kv-type"},
		{"bad engine", []string{"-m", model, "--engine", "gpu"}, 2, `--engine "gpu"`},
		{"bad compare engine", []string{"-m", model, "--compare", "gpu"}, 2, `--compare "gpu"`},
		{"bad repack suffix", []string{"-m", model, "--compare", "native:packed"}, 2, `--compare "native:packed"`},
		{"prompt+gen above ctx", []string{"-m", model, "--ctx", "64", "-p", "60", "-n", "8"}, 2, "exceed the context 64"},
		{"ctx above training ctx", []string{"-m", model, "--ctx", "4096", "-p", "8", "-n", "4", "-r", "1"}, 2, "training context 2048"},
		{"missing model", []string{"-m", "/nonexistent/m.gguf"}, 1, "model /nonexistent/m.gguf: no such file"},
		{"not a gguf", []string{"-m", "bench.go", "-p", "8", "-n", "4", "-r", "1"}, 1, "bench.go"},
		{"swap without tiers", []string{"--swap"}, 2, "--swap needs --tiers"},
		{"swap one tier", []string{"--swap", "--tiers", q8}, 2, "--swap needs --tiers"},
		{"swap and compare", []string{"--swap", "--tiers", q8 + "," + q8, "--compare", "llamacpp"}, 2, "cannot be combined"},
		{"swap on native", []string{"--swap", "--tiers", q8 + "," + q8, "--engine", "native"}, 2, "llamacpp engine"},
		{"swap missing tier", []string{"--swap", "--tiers", q8 + ",/nonexistent/t.gguf"}, 1, "tier /nonexistent/t.gguf: no such file"},
		{"swap ctx tokens above ctx", []string{"--swap", "--tiers", q8 + "," + q8, "--ctx", "100", "--ctx-tokens", "100"}, 2, "--ctx-tokens 100"},
		{"swap bad ladder", []string{"--swap", "--tiers", q8 + "," + four, "--ctx-tokens", "8", "-r", "1"}, 1, "layer count"},
		{"tiers without swap", []string{"-m", model, "--tiers", q8 + "," + q8}, 2, "--tiers is for --swap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := runCLI(t, append([]string{"bench", "-t", "1", "--engine", "llamacpp"}, tc.args...)...)
			if code != tc.code || !strings.Contains(errs, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d mentioning %q", code, errs, tc.code, tc.want)
			}
			if out != "" {
				t.Fatalf("stdout not empty on error: %q", out)
			}
			last := strings.TrimSpace(errs)
			if i := strings.LastIndex(last, "\n"); i >= 0 {
				last = last[i+1:]
			}
			if !strings.HasPrefix(last, "edgellm bench") || !strings.Contains(last, tc.want) {
				t.Fatalf("the error is not one 'edgellm bench: ...' line: %q", errs)
			}
		})
	}
}
