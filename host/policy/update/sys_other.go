//go:build !unix

package update

import (
	"fmt"
	"os"
)

const lockOpenFlags = 0

// tryLock: no advisory lock on this platform (edgellm's devices are
// Linux and Android); one process per state directory is then the
// caller's duty.
func tryLock(*os.File) error { return nil }

// openNoBlock refuses a symlink, then opens (no FIFOs to fear here).
func openNoBlock(path string) (*os.File, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return nil, fmt.Errorf("%s: %w (a symlink)", path, ErrNotRegular)
	}
	return os.Open(path)
}
