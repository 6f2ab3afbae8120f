package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// synthCtx128 makes a small synthetic 4-layer model whose training context
// is 128 (the shape of issue #9's report).
func synthCtx128(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "ctx128.gguf")
	vocab := sharedtest.Stories260K(t)
	if _, errs, code := runCLI(t, "synth", "--shape", "tiny", "--n-embd", "64", "--n-ff", "128", "--n-ctx", "128",
		"--type", "q8_0", "--vocab", vocab, "-o", out); code != 0 {
		t.Fatalf("synth: exit %d: %s", code, errs)
	}
	return out
}

// TestRunDefaultsFitModel: with --ctx and -n left at their defaults (2048,
// 128), a model trained on 128 positions runs (ctx 128, -n what fits); an
// explicit --ctx above 128 is an error naming both numbers.
func TestRunDefaultsFitModel(t *testing.T) {
	m := synthCtx128(t)
	for _, engine := range []string{"native", "llamacpp"} {
		t.Run(engine, func(t *testing.T) {
			_, errs, code := runCLI(t, "run", "-m", m, "--engine", engine, "--threads", "1", "--temp", "0")
			if code != 0 {
				t.Fatalf("defaults on a 128-context model: exit %d: %s", code, errs)
			}
			if !strings.Contains(errs, "context: 128 tokens") || !strings.Contains(errs, "generating 127 tokens") {
				t.Errorf("the fitted defaults are not reported: %s", errs)
			}
			_, errs, code = runCLI(t, "run", "-m", m, "--engine", engine, "--ctx", "256", "-n", "4")
			if code != 2 || !strings.Contains(errs, "--ctx 256") || !strings.Contains(errs, "128") {
				t.Errorf("explicit --ctx 256: exit %d, %q; want exit 2 naming 256 and 128", code, errs)
			}
		})
	}
}

// TestRunWindowFlags: run --window/--anchors/--layer-windows without a
// policy, validated like a policy's decision.
func TestRunWindowFlags(t *testing.T) {
	model := sharedtest.Stories260K(t)
	out, errs, code := runCLI(t, "run", "-m", model, "--engine", "native", "--window", "16", "--anchors", "4",
		"-n", "40", "--ctx", "64", "--threads", "1", "--temp", "0")
	if code != 0 || !strings.Contains(errs, "KV window: 16 recent positions + 4 anchors") || !strings.HasPrefix(out, "Once upon a time") {
		t.Fatalf("--window 16 --anchors 4: exit %d, %q, output %q", code, errs, out)
	}
	layered, errs, code := runCLI(t, "run", "-m", model, "--engine", "native", "--window", "16", "--layer-windows", "4,8,16,16,16",
		"-n", "40", "--ctx", "64", "--threads", "1", "--temp", "0")
	if code != 0 || !strings.Contains(errs, "KV windows per layer: [4 8 16 16 16]") {
		t.Fatalf("--layer-windows: exit %d, %q", code, errs)
	}
	// The windows must act, not only be announced: 40 tokens past a window
	// of 16 evict, and greedy text then leaves the full context's (which
	// it follows for the first ~25 tokens), and per-layer windows leave the
	// uniform one's.
	full, errs, code := runCLI(t, "run", "-m", model, "--engine", "native", "-n", "40", "--ctx", "64", "--threads", "1", "--temp", "0")
	if code != 0 {
		t.Fatalf("no window: exit %d, %q", code, errs)
	}
	if out == full || layered == out || layered == full {
		t.Errorf("windows changed nothing:\n full    %q\n window  %q\n layered %q", full, out, layered)
	}
	bad := []struct {
		args []string
		want string
	}{
		{[]string{"--engine", "native", "--window", "-1"}, "--window -1"},
		{[]string{"--engine", "native", "--anchors", "2"}, "need --window"},
		{[]string{"--engine", "native", "--window", "60", "--anchors", "8", "--ctx", "64"}, "exceed --ctx 64"},
		{[]string{"--engine", "llamacpp", "--window", "16"}, "no sliding KV window"},
		{[]string{"--engine", "native", "--window", "16", "--layer-windows", "4,8"}, "2 values, the model has 5 layers"},
		{[]string{"--engine", "native", "--window", "16", "--layer-windows", "4,8,32,1,1"}, "layer 2 window"},
		{[]string{"--engine", "native", "--window", "16", "--policy", "x.wasm"}, "both choose the KV window"},
	}
	for _, b := range bad {
		_, errs, code := runCLI(t, append([]string{"run", "-m", model, "-n", "4", "--threads", "1"}, b.args...)...)
		if code != 2 || !strings.Contains(errs, b.want) || strings.Count(strings.TrimSpace(errs), "\n") > 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line with %q", b.args, code, errs, b.want)
		}
	}
}

// TestRunUnwritableOutputs: an output path that cannot be created is one
// line and a non-zero exit, and no other output file is left behind.
func TestRunUnwritableOutputs(t *testing.T) {
	model := sharedtest.Stories260K(t)
	dir := t.TempDir()
	stats, logits := filepath.Join(dir, "stats.jsonl"), filepath.Join(dir, "logits.bin")
	missing := filepath.Join(dir, "no", "such", "dir", "x")
	for _, c := range []struct {
		args     []string
		want     string
		leftover string
	}{
		{[]string{"--stats-json", missing, "--logits-out", logits}, "--stats-json", logits},
		{[]string{"--stats-json", stats, "--logits-out", missing}, "--logits-out", stats},
	} {
		_, errs, code := runCLI(t, append([]string{"run", "-m", model, "-n", "4", "--threads", "1"}, c.args...)...)
		if code == 0 || !strings.Contains(errs, c.want) || !strings.Contains(errs, "no such file") {
			t.Errorf("%v: exit %d, stderr %q", c.args, code, errs)
		}
		if _, err := os.Stat(c.leftover); !os.IsNotExist(err) {
			t.Errorf("%v: %s left behind", c.args, c.leftover)
		}
	}
}

// withoutKey copies the GGUF at src to a temporary file without the
// metadata key: every other key and every tensor byte unchanged.
func withoutKey(t *testing.T, src, key string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "no-"+key+".gguf")
	if err := gguf.Rewrite(src, dst, func(kv []gguf.KV) []gguf.KV {
		return slices.DeleteFunc(kv, func(x gguf.KV) bool { return x.Key == key })
	}); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestRunNoContextLength (issue #9 point 6): a model whose metadata states
// no context length is refused by both engines in one clear line with a
// non-zero exit, and leaves no output file behind.
func TestRunNoContextLength(t *testing.T) {
	m := withoutKey(t, sharedtest.Stories260K(t), "llama.context_length")
	for _, engine := range []string{"native", "llamacpp"} {
		t.Run(engine, func(t *testing.T) {
			stats := filepath.Join(t.TempDir(), "stats.jsonl")
			out, errs, code := runCLI(t, "run", "-m", m, "--engine", engine, "-n", "4", "--threads", "1", "--stats-json", stats)
			t.Logf("exit %d, stderr %q", code, errs)
			// llama.cpp logs its own lines first; edgellm's is the last.
			lines := strings.Split(strings.TrimSpace(errs), "\n")
			last := lines[len(lines)-1]
			if code == 0 || out != "" || !strings.HasPrefix(last, "edgellm run: ") || !strings.Contains(last, "context_length") {
				t.Fatalf("exit %d, stdout %q, stderr %q; want a non-zero exit and a last line naming context_length", code, out, errs)
			}
			if _, err := os.Stat(stats); !os.IsNotExist(err) {
				t.Errorf("--stats-json %s left behind", stats)
			}
		})
	}
}

// withCtx copies the GGUF at src with llama.context_length set to n.
func withCtx(t *testing.T, src string, n uint32) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), fmt.Sprintf("ctx%d.gguf", n))
	if err := gguf.Rewrite(src, dst, func(kv []gguf.KV) []gguf.KV {
		for i := range kv {
			if kv[i].Key == "llama.context_length" {
				kv[i].Value = gguf.Uint32(n)
			}
		}
		return kv
	}); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestDefaultsFitSmallModel (#32 point 4): on a model trained on 128
// positions, parity's and bench's defaults (256 steps; -p 128 -n 128 in a
// 2048 context) give way and say so; explicit values that do not fit are
// usage errors naming the numbers.
func TestDefaultsFitSmallModel(t *testing.T) {
	m := withCtx(t, sharedtest.Stories260K(t), 128)
	out, errs, code := runCLI(t, "parity", "-m", m, "--threads", "1")
	if code != 0 || !strings.Contains(out, "n 127 ") || !strings.Contains(errs, "-n 127") {
		t.Fatalf("parity: exit %d, stdout %q, stderr %q; want 127 steps, said", code, out, errs)
	}
	_, errs, code = runCLI(t, "bench", "-m", m, "-r", "1", "--threads", "1")
	if code != 0 || !strings.Contains(errs, "-p 64, -n 64") || !strings.Contains(errs, "context: 128") {
		t.Fatalf("bench: exit %d, stderr %q; want -p 64 -n 64 in a context of 128, said", code, errs)
	}
	for _, args := range [][]string{{"parity", "-n", "200"}, {"bench", "-p", "100", "-n", "100"}, {"bench", "--ctx", "512"}} {
		_, errs, code := runCLI(t, append(append([]string{}, args...), "-m", m)...)
		if code != 2 || !strings.Contains(errs, "128") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming 128", args, code, errs)
		}
	}
}
