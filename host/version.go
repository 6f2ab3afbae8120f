package host

import "github.com/edgellm/edgellm/internal/buildinfo"

// Version returns the edgellm version (set at link time by the Makefile).
func Version() string { return buildinfo.Version }
