//go:build linux

package policy

import (
	"encoding/binary"
	"time"

	"golang.org/x/sys/unix"
)

// eventfdSleeper sleeps in ppoll on an eventfd; wake writes the eventfd.
type eventfdSleeper struct {
	fd  int
	one [8]byte
	buf [8]byte
}

// newWatchSleeper is an eventfdSleeper, or a chanSleeper without an eventfd.
func newWatchSleeper() watchSleeper {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return newChanSleeper()
	}
	e := &eventfdSleeper{fd: fd}
	binary.NativeEndian.PutUint64(e.one[:], 1)
	return e
}

func (e *eventfdSleeper) sleep(d time.Duration) {
	fds := [1]unix.PollFd{{Fd: int32(e.fd), Events: unix.POLLIN}}
	var ts *unix.Timespec
	if d >= 0 {
		t := unix.NsecToTimespec(d.Nanoseconds())
		ts = &t
	}
	if n, _ := unix.Ppoll(fds[:], ts, nil); n > 0 {
		_, _ = unix.Read(e.fd, e.buf[:]) // reset the counter
	}
}

func (e *eventfdSleeper) wake()  { _, _ = unix.Write(e.fd, e.one[:]) }
func (e *eventfdSleeper) close() { _ = unix.Close(e.fd) }
