package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/edgellm/edgellm/internal/calib"
	"github.com/edgellm/edgellm/internal/native"
	"github.com/edgellm/edgellm/internal/precision"
)

func init() {
	register(&command{
		Name:    "calibrate",
		Summary: "measure per-layer precision sensitivity on a text and write a precision manifest (native engine weight sets)",
		Usage:   "BASE.gguf --sets A.gguf,B.gguf,... --text FILE -o MANIFEST.json",
		Flags: func(fs *pflag.FlagSet) {
			fs.StringSlice("sets", nil, "GGUF files of the same model at fewer bits (comma-separated); BASE is the reference")
			fs.String("text", "", "calibration text (UTF-8), teacher-forced (required)")
			fs.StringP("output", "o", "", "manifest JSON to write (required; written atomically)")
			fs.String("rule", precision.DefaultRule.String(), "min_bits rule: kl:T4,T56 (KL below T4 → 4-bit class, below T56 → 5/6-bit, else 8-bit) or ppl:P (perplexity change below P %)")
			fs.Float64("clamp-sigma", calib.DefaultClampSigma, "K of the recorded clamp thresholds (±K σ)")
			fs.Int("chunk", 512, "tokens per teacher-forced chunk (the default is capped by the model's training context; a value set above it is an error)")
			addThreadsFlag(fs)
			fs.Bool("eval", false, "proof mode: split the text at the paragraph break nearest its middle, calibrate on the first half and compare, on the second, the calibrated assignment with every assignment at exactly its bits (uniform included), with bootstrap intervals (table on stdout)")
			fs.String("eval-text", "", "proof mode on another text: calibrate on all of --text, judge on this file (any UTF-8 text; never used for calibration)")
			fs.String("plot", "", "with --eval or --eval-text: write the KL-against-bits plot (SVG) here")
			fs.String("eval-json", "", "with --eval or --eval-text: write the proof's numbers (JSON) here")
			fs.String("alloc", calib.AllocAdditive, "with --eval or --eval-text: how (a) is chosen: additive (least sum of the manifest's per-layer KLs, exact), swap (additive's choice or a neighbour of it, one layer moved or two swapped a set up and down, by KL measured on the calibration text with every layer in place) path (a greedy demotion path measured on the calibration text) or twoway (additive's choice or the least sum of each layer's KL gain raised alone from the fewest-bits set, whichever measures lower on the calibration text); measured ones also report additive's")
			fs.String("embed", "", "also write a copy of BASE with the manifest in its GGUF metadata (key "+precision.MetadataKey+") to this path")
		},
		Run: runCalibrate,
	})
}

type calibrateOptions struct {
	Sets       []string `koanf:"sets"`
	Text       string   `koanf:"text"`
	Output     string   `koanf:"output"`
	Rule       string   `koanf:"rule"`
	ClampSigma float64  `koanf:"clamp-sigma"`
	Chunk      int      `koanf:"chunk"`
	Threads    int      `koanf:"threads"`
	Eval       bool     `koanf:"eval"`
	EvalText   string   `koanf:"eval-text"`
	Plot       string   `koanf:"plot"`
	EvalJSON   string   `koanf:"eval-json"`
	Alloc      string   `koanf:"alloc"`
	Embed      string   `koanf:"embed"`
}

func runCalibrate(c *cmdEnv, args []string) error {
	var o calibrateOptions
	if err := c.Decode(&o); err != nil {
		return err
	}
	if len(args) != 1 {
		return usagef("want BASE.gguf, got %d argument(s)", len(args))
	}
	switch {
	case len(o.Sets) == 0:
		return usagef("--sets: want at least one GGUF of the same model at other precisions")
	case o.Text == "":
		return usagef("--text: required")
	case o.Output == "":
		return usagef("--output (-o): required")
	case o.ClampSigma <= 0:
		return usagef("--clamp-sigma %g: want > 0", o.ClampSigma)
	case o.Eval && o.EvalText != "":
		return usagef("--eval splits --text in two; --eval-text judges on another file: pick one")
	case (o.Plot != "" || o.EvalJSON != "" || (o.Alloc != "" && o.Alloc != calib.AllocAdditive)) && !o.Eval && o.EvalText == "":
		return usagef("--plot, --eval-json and --alloc need --eval or --eval-text")
	case o.Alloc != "" && o.Alloc != calib.AllocAdditive && o.Alloc != calib.AllocSwap && o.Alloc != calib.AllocPath && o.Alloc != calib.AllocTwoWay:
		return usagef("--alloc %q: want %s, %s, %s or %s", o.Alloc, calib.AllocAdditive, calib.AllocSwap, calib.AllocPath, calib.AllocTwoWay)
	}
	rule, err := precision.ParseRule(o.Rule)
	if err != nil {
		return usagef("--rule: %v", err)
	}
	text, err := os.ReadFile(o.Text)
	if err != nil {
		return fmt.Errorf("--text: %w", err)
	}
	start := time.Now()
	eng, err := native.Load(args[0], native.Options{Threads: o.Threads, ExtraSets: o.Sets})
	if err != nil {
		return err
	}
	defer eng.Close()
	if err := calib.CheckLayers(eng.Config().NLayer); err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	if err := fitLengths(c, eng.Config().NCtxTrain, length{"chunk", "--chunk", &o.Chunk}); err != nil {
		return err
	}
	calText, evalText := string(text), ""
	if o.Eval {
		calText, evalText = splitHalves(calText)
	}
	if o.EvalText != "" {
		b, err := os.ReadFile(o.EvalText)
		if err != nil {
			return fmt.Errorf("--eval-text: %w", err)
		}
		evalText = string(b)
		if sameText(calText, evalText) {
			return usagef("--eval-text: the same text as --text; judge on text not used for calibration")
		}
	}
	toks, err := eng.Vocab().Tokenize(calText, true)
	if err != nil {
		return fmt.Errorf("--text: %w", err)
	}
	sets := calib.SetsOf(eng)
	var names []string
	for _, s := range sets {
		names = append(names, fmt.Sprintf("%s (%.2f bits)", s.File, s.BitsPerWeight))
	}
	c.Logf("calibrating %d layers × %d precisions on %d tokens of %s against %s", eng.Config().NLayer, len(sets)-1, len(toks), o.Text, strings.Join(names, ", "))
	m, err := calib.Calibrate(eng, toks, calib.Options{Rule: rule, ClampSigma: o.ClampSigma, Chunk: o.Chunk, Threads: o.Threads,
		Progress: func(done, total, layer int, set precision.Set, sc calib.Score) {
			c.Logf("[%*d/%d] layer %d → %s: KL %.5f, ppl %.4f", len(fmt.Sprint(total)), done, total, layer, set.File, sc.KL, sc.PPL)
		}})
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(calText))
	m.Calibration.Text = filepath.Base(o.Text)
	if o.Eval {
		m.Calibration.Text += " (first half)"
	}

	m.Calibration.TextDigest = "sha256:" + hex.EncodeToString(sum[:])
	if err := m.Write(o.Output); err != nil {
		return fmt.Errorf("write %s: %w", o.Output, err)
	}
	for _, l := range m.Layers {
		c.Logf("layer %d: min_bits %d, max_bits %d, sensitivity rank %d, σ %.4g, outlier share %.4f", l.Layer, l.MinBits, l.MaxBits, l.SensRank, l.Weights.Sigma, l.Weights.OutlierShare)
	}
	c.Logf("wrote %s (rule %s, base perplexity %.4f over %d positions) in %s", o.Output, m.Calibration.Rule, m.Calibration.BasePPL, m.Calibration.Scored, time.Since(start).Round(time.Millisecond))
	if o.Embed != "" {
		if err := precision.Embed(args[0], o.Embed, m); err != nil {
			return fmt.Errorf("--embed: %w", err)
		}
		c.Logf("wrote %s with the manifest in its metadata", o.Embed)
	}
	if evalText != "" {
		return runProof(c, &o, eng, m, calText, evalText)
	}
	return nil
}

// runProof evaluates the calibrated, uniform and random assignments on the
// held-out half.
func runProof(c *cmdEnv, o *calibrateOptions, eng *native.Engine, m *precision.Manifest, calText, evalText string) error {
	toks, err := eng.Vocab().Tokenize(evalText, true)
	if err != nil {
		return err
	}
	t0 := time.Now()
	judge := "the second half"
	if o.EvalText != "" {
		judge = o.EvalText
	}
	c.Logf("evaluating on %s: %d tokens, %d budgets", judge, len(toks), len(calib.DefaultBudgets))
	po := calib.ProofOptions{Threads: o.Threads, Chunk: o.Chunk, Seed: 1, Allocator: o.Alloc,
		EvalProgress: func(done int, e *calib.Eval) {
			if done%16 == 0 {
				c.Logf("evaluated %d assignments", done)
			}
		}}
	if o.Alloc != calib.AllocAdditive {
		if po.CalTokens, err = eng.Vocab().Tokenize(calText, true); err != nil {
			return err
		}
		po.PathProgress = func(p calib.PathPoint) {
			c.Logf("path: %v, %.2f bits, KL %.5f", p.Sets, p.AvgBits, p.KL)
		}
	}
	p, err := calib.RunProof(eng, m, toks, po)
	if err != nil {
		return err
	}
	fmt.Fprint(c.Stdout, p.Table())
	holds, bad := p.Holds()
	if holds {
		fmt.Fprintln(c.Stdout, "\n(a) strictly below the uniform assignment and the median at exactly its bits, beyond the 95% interval, at every budget that has another assignment at its bits")
	} else {
		fmt.Fprintf(c.Stdout, "\n(a) NOT strictly below (beyond the 95%% interval) the uniform assignment or the median at exactly its bits at budgets %v\n", bad)
	}
	if o.Plot != "" {
		if err := precision.WriteFileAtomic(o.Plot, []byte(p.SVG(proofTitle(m, judge)))); err != nil {
			return err
		}
	}
	if o.EvalJSON != "" {
		if err := writeJSONAtomic(o.EvalJSON, p); err != nil {
			return err
		}
	}
	c.Logf("proof done in %s", time.Since(t0).Round(time.Millisecond))
	return nil
}

// proofTitle names the model the proof is about (its general.name, else
// the base file) and the text it was judged on.
func proofTitle(m *precision.Manifest, judge string) string {
	name := m.Model.Name
	if name == "" {
		for _, s := range m.Sets {
			if s.Base {
				name = s.File
			}
		}
	}
	return fmt.Sprintf("%s: per-layer precision, KL vs base on %s (not calibrated on)", name, filepath.Base(judge))
}

// splitHalves cuts text at the paragraph break ("\n\n") nearest its middle
// (at the middle byte's line break when there is none).
func splitHalves(text string) (string, string) {
	mid := len(text) / 2
	best := -1
	for i := 0; i+1 < len(text); i++ {
		if text[i] == '\n' && text[i+1] == '\n' && (best < 0 || abs(i-mid) < abs(best-mid)) {
			best = i
		}
	}
	if best < 0 {
		best = strings.IndexByte(text[mid:], '\n')
		if best < 0 {
			return text[:mid], text[mid:]
		}
		best += mid
	}
	return strings.TrimSpace(text[:best]), strings.TrimSpace(text[best:])
}

// sameText reports whether two texts are identical up to surrounding space.
func sameText(a, b string) bool { return strings.TrimSpace(a) == strings.TrimSpace(b) }

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// writeJSONAtomic writes v as indented JSON through a temporary file.
func writeJSONAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return precision.WriteFileAtomic(path, append(b, '\n'))
}
