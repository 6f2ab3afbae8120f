// Package shareddir finds the project's shared assets directory (models,
// vocabularies, text; ../shared beside the repository) by one rule, for the
// CLI's defaults and for tests alike:
//
//  1. $EDGELLM_SHARED when set;
//  2. else the first directory named "shared" beside the working directory
//     or one of its parents (../shared, ../../shared, ...);
//  3. else the same search from the running binary's directory (bin/edgellm
//     finds the shared directory beside the repository it was built in).
package shareddir

import (
	"os"
	"path/filepath"
)

// Dir returns the shared directory, or "" if none is found.
func Dir() string {
	if d := os.Getenv("EDGELLM_SHARED"); d != "" {
		return d
	}
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, start := range starts {
		if d := besideAncestor(start); d != "" {
			return d
		}
	}
	return ""
}

// besideAncestor is the first "shared" directory beside start or one of its
// parents.
func besideAncestor(start string) string {
	for d := start; filepath.Dir(d) != d; d = filepath.Dir(d) {
		cand := filepath.Join(filepath.Dir(d), "shared")
		if st, err := os.Stat(cand); err == nil && st.IsDir() {
			return cand
		}
	}
	return ""
}

// Find returns the path of rel under the shared directory, or "" when there
// is no shared directory or no such file.
func Find(rel string) string {
	d := Dir()
	if d == "" {
		return ""
	}
	p := filepath.Join(d, rel)
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}
