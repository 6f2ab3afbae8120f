package main

import (
	"fmt"
	"os"

	"github.com/edgellm/edgellm/internal/shareddir"
)

// defaultModelName is the real model used when none is given.
const defaultModelName = "models/stories260K.gguf"

// findShared returns the path of a file under the shared directory
// (internal/shareddir's rule), or "".
func findShared(rel string) string { return shareddir.Find(rel) }

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
