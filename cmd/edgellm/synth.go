package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/synth"
	"github.com/spf13/pflag"
)

func init() {
	register(&command{
		Name:    "synth",
		Summary: "write a SYNTHETIC GGUF (random weights, real tokenizer) in the shape of a real model: llama, qwen2, qwen3, gemma2, gemma3, phi3",
		Usage:   "--shape NAME [--type TYPE] [--vocab VOCAB.gguf] [--seed S] -o OUT",
		Flags: func(fs *pflag.FlagSet) {
			fs.String("shape", "tiny", "shape: "+strings.Join(synth.ShapeNames(), ", "))
			fs.String("type", "q4_0", "weight type: f32, f16, bf16, q8_0, q5_0, q5_1, q4_0, q4_1, q2_k..q6_k (norms stay f32)")
			fs.String("vocab", "", "vocabulary GGUF whose tokenizer is copied (default: the shape's, else ../shared/"+synth.DefaultVocab+")")
			addSeedFlag(fs)
			fs.StringP("output", "o", "", "output GGUF path (required)")
			fs.Int("n-embd", 0, "override the shape's embedding length")
			fs.Int("n-layer", 0, "override the number of layers")
			fs.Int("n-head", 0, "override the number of attention heads")
			fs.Int("n-head-kv", 0, "override the number of KV heads")
			fs.Int("n-ff", 0, "override the feed-forward length")
			fs.Int("n-ctx", 0, "override the training context length")
			fs.Float64("rope-base", 0, "override the RoPE frequency base")
			fs.Int("workers", 2, "parallel generate+quantize workers")
		},
		Run: runSynth,
	})
}

type synthOptions struct {
	Shape    string  `koanf:"shape"`
	Type     string  `koanf:"type"`
	Vocab    string  `koanf:"vocab"`
	Seed     int64   `koanf:"seed"`
	Out      string  `koanf:"output"`
	NEmbd    int     `koanf:"n-embd"`
	NLayer   int     `koanf:"n-layer"`
	NHead    int     `koanf:"n-head"`
	NHeadKV  int     `koanf:"n-head-kv"`
	NFF      int     `koanf:"n-ff"`
	NCtx     int     `koanf:"n-ctx"`
	RopeBase float64 `koanf:"rope-base"`
	Workers  int     `koanf:"workers"`
}

func runSynth(c *cmdEnv, args []string) error {
	var o synthOptions
	if err := c.Decode(&o); err != nil {
		return err
	}
	if len(args) != 0 {
		return usagef("unexpected arguments %q", args)
	}
	if o.Out == "" {
		return usagef("--output (-o) is required")
	}
	shape, ok := synth.Shapes[o.Shape]
	if !ok {
		return usagef("--shape %q: unknown (want %s)", o.Shape, strings.Join(synth.ShapeNames(), ", "))
	}
	typ, err := gguf.ParseType(o.Type)
	if err != nil {
		return usagef("--type: %v", err)
	}
	for _, ov := range []struct {
		flag string
		v    int
		dst  *int
	}{{"n-embd", o.NEmbd, &shape.NEmbd}, {"n-layer", o.NLayer, &shape.NLayer}, {"n-head", o.NHead, &shape.NHead},
		{"n-head-kv", o.NHeadKV, &shape.NHeadKV}, {"n-ff", o.NFF, &shape.NFF}, {"n-ctx", o.NCtx, &shape.NCtx}} {
		if ov.v < 0 {
			return usagef("--%s %d: must be positive", ov.flag, ov.v)
		}
		if ov.v > 0 {
			*ov.dst = ov.v
			shape.Name = o.Shape + "-custom"
		}
	}
	if o.RopeBase < 0 {
		return usagef("--rope-base %g: must be positive", o.RopeBase)
	}
	if o.RopeBase > 0 {
		shape.RopeBase = o.RopeBase
	}
	if o.Workers <= 0 {
		return usagef("--workers %d: must be positive", o.Workers)
	}
	vocab := o.Vocab
	if vocab == "" {
		def := synth.DefaultVocab
		if shape.Vocab != "" {
			def = shape.Vocab // the family's (synth/families.go)
		}
		if vocab = findShared(def); vocab == "" {
			return fmt.Errorf("default vocabulary ../shared/%s not found: set EDGELLM_SHARED or pass --vocab", def)
		}
	}
	opts := synth.Options{Shape: shape, Type: typ, VocabPath: vocab, Seed: uint64(o.Seed), Out: o.Out, Workers: o.Workers}
	if err := opts.Validate(); err != nil {
		return usagef("%v", err)
	}
	c.Logf("synth: SYNTHETIC %s %s %s (random weights, seed %d, tokenizer of %s) -> %s", shape.ArchName(), shape.Name, typ, o.Seed, vocab, o.Out)
	var last time.Time
	progress := func(p synth.Progress) {
		done := p.Tensor == p.NTensors
		if !done && time.Since(last) < 500*time.Millisecond {
			return
		}
		last = time.Now()
		mb := float64(p.Written) / (1 << 20)
		rate := mb / max(p.Elapsed.Seconds(), 1e-9)
		c.Logf("synth: tensor %d/%d %-28s %8.1f / %.1f MB  %6.1f MB/s", p.Tensor, p.NTensors, p.Name, mb, float64(p.Total)/(1<<20), rate)
	}
	if err := synth.Write(c.Ctx, opts, progress); err != nil {
		return err
	}
	st, err := os.Stat(o.Out)
	if err != nil {
		return err
	}
	c.Logf("synth: wrote %s (%s)", o.Out, humanBytes(st.Size()))
	return nil
}
