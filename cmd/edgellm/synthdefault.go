package main

import (
	"os"
	"path/filepath"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/synth"
)

// synthDefaultModel makes (once, cached in the user cache directory) the small
// synthetic model used when no real model is available. It has random
// weights: it generates gibberish, and every caller labels it SYNTHETIC.
func synthDefaultModel(c *cmdEnv) (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	dir = filepath.Join(dir, "edgellm")
	out := filepath.Join(dir, "synthetic-tiny-q8_0.gguf")
	if os.Getenv("EDGELLM_TEST_SYNTH_DEFAULT") != "" {
		out = filepath.Join(dir, "synthetic-tiny-q8_0-test.gguf") // tests start from nothing
		os.Remove(out)
	}
	if _, err := gguf.Open(out); err == nil {
		return out, nil
	}
	vocab := findShared(synth.DefaultVocab)
	if vocab == "" {
		vocab = synth.BuiltinByteVocab // no real tokenizer either: bytes
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	c.Logf("no model given and %s not found: making a SYNTHETIC model (random weights, tokenizer %s) at %s", defaultModelName, vocab, out)
	tmp := out + ".tmp"
	opts := synth.Options{Shape: synth.Shapes["tiny"], Type: gguf.Q8_0, VocabPath: vocab, Seed: 1, Out: tmp}
	if err := synth.Write(c.Ctx, opts, nil); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return out, os.Rename(tmp, out)
}
