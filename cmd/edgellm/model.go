package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// defaultModelName is the real model used when none is given.
const defaultModelName = "models/stories260K.gguf"

// sharedCandidates are the places ../shared may be: $EDGELLM_SHARED, ../shared
// from the working directory, and ../shared beside the repository the binary
// was built in (bin/edgellm → ../../shared).
func sharedCandidates() []string {
	var c []string
	if d := os.Getenv("EDGELLM_SHARED"); d != "" {
		c = append(c, d)
	}
	c = append(c, filepath.Join("..", "shared"))
	if exe, err := executable(); err == nil {
		c = append(c, filepath.Join(filepath.Dir(exe), "..", "..", "shared"))
	}
	return c
}

// executable is os.Executable; tests point it elsewhere.
var executable = os.Executable

// findShared returns the path of a file under the shared directory, or "".
func findShared(rel string) string {
	for _, d := range sharedCandidates() {
		p := filepath.Join(d, rel)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// resolveModel picks the model: the --model flag or $EDGELLM_MODEL (both
// arrive as the "model" setting), else ../shared/models/stories260K.gguf,
// else a small synthetic model made on the fly. The returned label says which.
func resolveModel(c *cmdEnv, model string) (path, label string, err error) {
	if model != "" {
		if _, err := os.Stat(model); err != nil {
			return "", "", fmt.Errorf("model %s: %w", model, errNotFound(err))
		}
		return model, model, nil
	}
	if p := findShared(defaultModelName); p != "" {
		return p, p + " (default)", nil
	}
	p, err := synthDefaultModel(c)
	if err != nil {
		return "", "", fmt.Errorf("no model given, %s not found, and making a synthetic one failed: %w", defaultModelName, err)
	}
	return p, p + " (SYNTHETIC: random weights, generates gibberish)", nil
}

func errNotFound(err error) error {
	if os.IsNotExist(err) {
		return fmt.Errorf("no such file")
	}
	return err
}
