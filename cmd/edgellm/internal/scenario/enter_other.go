//go:build !linux

package scenario

// EnterMode does nothing: cgroups are Linux's.
func EnterMode() error { return nil }
