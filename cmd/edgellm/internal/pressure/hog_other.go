//go:build !linux

package pressure

// HogMode returns false: hogs are started on Linux only.
func HogMode() (code int, ok bool) { return 0, false }
