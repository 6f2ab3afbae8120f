package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/edgellm/edgellm/internal/precision"
)

// manifest-digest re-records a precision manifest's content digest after a
// deliberate edit: the one way to make an edited manifest load again
// (precision.Manifest.CheckDigest), so an edit is never silent.
func init() {
	register(&command{
		Name:    "manifest-digest",
		Summary: "check a precision manifest, or (--write) record the digest of its current content after a deliberate edit",
		Usage:   "MANIFEST.json",
		Flags: func(fs *pflag.FlagSet) {
			fs.Bool("write", false, "rewrite the file with the digest of its current content (after validating it)")
		},
		Run: runManifestDigest,
	})
}

type manifestDigestOptions struct {
	Write bool `koanf:"write"`
}

func runManifestDigest(c *cmdEnv, args []string) error {
	var o manifestDigestOptions
	if err := c.Decode(&o); err != nil {
		return err
	}
	if len(args) != 1 {
		return usagef("want MANIFEST.json, got %d argument(s)", len(args))
	}
	data, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	if !o.Write {
		m, err := precision.Parse(data)
		if err != nil {
			return fmt.Errorf("%s: %w", args[0], err)
		}
		fmt.Fprintf(c.Stdout, "%s: content digest %s matches\n", args[0], m.ContentDigest)
		return nil
	}
	var m precision.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	old := m.ContentDigest
	if err := m.Write(args[0]); err != nil { // validates, records the digest
		return fmt.Errorf("%s: %w", args[0], err)
	}
	fmt.Fprintf(c.Stdout, "%s: content digest %s (was %q)\n", args[0], m.ContentDigest, old)
	return nil
}
