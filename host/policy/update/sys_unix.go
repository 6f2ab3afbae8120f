//go:build unix

package update

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockOpenFlags open a state directory's lock file: never through a
// symlink, never blocking.
const lockOpenFlags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// tryLock takes an exclusive flock on f without waiting.
func tryLock(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}

// openNoBlock opens path read-only with O_NONBLOCK|O_NOFOLLOW: a FIFO
// cannot block the open and a symlink is refused.
func openNoBlock(path string) (*os.File, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s: %w (a symlink)", path, ErrNotRegular)
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}
