// Package buildinfo holds facts fixed when the binary is linked. It is a leaf
// package so every part of the host (engine, policy runtime) can read them
// without importing package host.
package buildinfo

// Version is the edgellm version, set at link time by the Makefile:
// -X github.com/edgellm/edgellm/internal/buildinfo.Version=...
var Version = "dev"
