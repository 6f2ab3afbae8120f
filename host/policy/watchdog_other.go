//go:build !linux || !cgo

package policy

import "time"

// nativeWatchdog needs Linux and cgo; elsewhere the Go watchdog runs.
type nativeWatchdog struct{}

func newNativeWatchdog(*stopTimer) *nativeWatchdog { return nil }

func (*nativeWatchdog) arm(time.Duration) {}
func (*nativeWatchdog) disarm()           {}
func (*nativeWatchdog) close()            {}
