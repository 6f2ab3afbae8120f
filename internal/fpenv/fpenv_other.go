//go:build !amd64

package fpenv

// Supported reports whether Read and Clear work on this architecture.
const Supported = false

// Read returns 0: the flags are not read on this architecture.
func Read() Flags { return 0 }

// Clear does nothing on this architecture.
func Clear() {}
