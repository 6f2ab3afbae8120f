package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/precision"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestCalibrateCLI: calibrate writes a valid manifest (progress on stderr),
// run accepts it for the model and refuses it for another model, with an
// unknown version or with min above max; bad input leaves no file.
func TestCalibrateCLI(t *testing.T) {
	d := filepath.Dir(sharedtest.Path(t, "models/derived/stories260K-ff192-f32.gguf")) + "/"
	f32, q8, q4 := d+"stories260K-ff192-f32.gguf", d+"stories260K-ff192-Q8_0.gguf", d+"stories260K-ff192-Q4_0.gguf"
	text := sharedtest.Path(t, "text/stories.txt")
	dir := t.TempDir()
	man := filepath.Join(dir, "m.json")
	emb := filepath.Join(dir, "emb.gguf")
	_, errs, code := runCLI(t, "calibrate", f32, "--sets", q8+","+q4, "--text", text, "-o", man, "--threads", "1", "--chunk", "256", "--embed", emb)
	if code != 0 {
		t.Fatalf("calibrate: exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "[10/10] layer 4") || !strings.Contains(errs, "wrote "+man) {
		t.Fatalf("progress: %s", errs)
	}
	m, err := precision.Load(man)
	if err != nil {
		t.Fatal(err)
	}
	// run accepts it (and the embedded copy) for the same model ...
	_, errs, code = runCLI(t, "run", "-m", q8, "--layer-sets", q4, "--manifest", man, "-n", "4", "--threads", "1", "--temp", "0")
	if code != 0 || !strings.Contains(errs, "precision manifest "+man+": 5 layers") {
		t.Fatalf("run --manifest: exit %d: %s", code, errs)
	}
	_, errs, code = runCLI(t, "run", "-m", emb, "-n", "2", "--threads", "1")
	if code != 0 || !strings.Contains(errs, "(embedded): 5 layers") {
		t.Fatalf("run embedded: exit %d: %s", code, errs)
	}
	// ... and refuses it for another model, another version, min > max.
	bad := func(name string, change func(m *precision.Manifest)) string {
		c := *m
		c.Layers = append([]precision.Layer(nil), m.Layers...)
		change(&c)
		b, _ := jsonMarshal(&c)
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct{ file, model, want string }{
		{bad("other.json", func(m *precision.Manifest) {}), sharedtest.Path(t, "models/derived/stories260K-first4layers.gguf"), "for another model"},
		{bad("v2.json", func(m *precision.Manifest) { m.Version = 2 }), q8, "unsupported precision manifest version 2"},
		{bad("minmax.json", func(m *precision.Manifest) { m.Layers[2].MinBits = 40 }), q8, "layer 2: min_bits 40 above max_bits 32"},
	} {
		_, errs, code := runCLI(t, "run", "-m", tc.model, "--manifest", tc.file, "-n", "2", "--threads", "1")
		if code == 0 || !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") > 3 {
			t.Errorf("%s: exit %d, stderr %q, want %q", tc.file, code, errs, tc.want)
		}
	}
	// Bad input: sets of another model, a text too short; no file left.
	out := filepath.Join(dir, "bad.json")
	short := filepath.Join(dir, "short.txt")
	os.WriteFile(short, []byte("Once upon a time."), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{f32, "--sets", sharedtest.Path(t, "models/derived/stories260K-first4layers.gguf"), "--text", text, "-o", out}, "not the same model"},
		{[]string{f32, "--sets", q4, "--text", short, "-o", out}, "text too short"},
		{[]string{f32, "--sets", q4, "--text", text, "-o", out, "--rule", "kl:0.1"}, "min-bits rule"},
		{[]string{f32, "--sets", q4, "--text", text, "-o", out, "--alloc", "swap"}, "need --eval"},
		{[]string{f32, "--sets", q4, "--text", text, "-o", out, "--eval", "--alloc", "best"}, `--alloc "best"`},
	} {
		_, errs, code := runCLI(t, append([]string{"calibrate", "--threads", "1"}, tc.args...)...)
		if code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, %q, want %q", tc.args, code, errs, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%v left %s", tc.args, out)
		}
	}
	if ents, _ := filepath.Glob(filepath.Join(dir, ".*tmp*")); len(ents) != 0 {
		t.Fatalf("temporary files left: %v", ents)
	}
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// TestProofTitle: the proof plot's title names the model it was run on
// (issue #30: it was hard-coded to one model), from general.name or else
// the base weight set's file, and the judging text.
func TestProofTitle(t *testing.T) {
	m := &precision.Manifest{Model: precision.Model{Name: "SmolLM2-135M"}}
	if got := proofTitle(m, "/x/held-out.txt"); !strings.HasPrefix(got, "SmolLM2-135M: ") || !strings.Contains(got, "held-out.txt") {
		t.Errorf("title %q", got)
	}
	m = &precision.Manifest{Sets: []precision.Set{{File: "q4.gguf"}, {File: "base-f32.gguf", Base: true}}}
	if got := proofTitle(m, "b.txt"); !strings.HasPrefix(got, "base-f32.gguf: ") || strings.Contains(got, "stories260K") {
		t.Errorf("title %q", got)
	}
}
