//go:build !linux

package policy

// newWatchSleeper is the portable sleeper: no eventfd here.
func newWatchSleeper() watchSleeper { return newChanSleeper() }
