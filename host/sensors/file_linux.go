//go:build linux || android

package sensors

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// kfile is a kernel file (procfs, sysfs, cgroupfs) kept open for the life of
// the Reader and re-read with pread at offset 0: the kernel regenerates the
// content on every read from offset 0, so one descriptor serves every sample
// without a path lookup or an allocation.
//
// The zero kfile is absent (fd1 holds the descriptor plus one, so that a
// zero value can never read descriptor 0).
type kfile struct {
	fd1 int
}

// openKFile opens path read-only. A missing or unreadable file is not an
// error: it yields a kfile that reports itself absent.
func openKFile(path string) kfile {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return kfile{}
	}
	return kfile{fd1: fd + 1}
}

func (f kfile) ok() bool { return f.fd1 > 0 }

// read fills buf from offset 0 and returns the bytes read, or false when the
// file is absent or the read fails (a sensor that went away, EIO from a
// powered-down thermal sensor...).
func (f kfile) read(buf []byte) ([]byte, bool) {
	if f.fd1 <= 0 {
		return nil, false
	}
	for {
		n, err := syscall.Pread(f.fd1-1, buf, 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n < 0 {
			return nil, false
		}
		return buf[:n], true
	}
}

func (f *kfile) close() {
	if f.fd1 > 0 {
		syscall.Close(f.fd1 - 1)
		f.fd1 = 0
	}
}

// affinity is the calling thread's CPU affinity mask (CPUs 0-127) and how
// many CPUs it holds in all.
func affinity() (mask [2]uint64, n int, ok bool) {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil {
		return mask, 0, false
	}
	for c := range maxCPUList {
		if set.IsSet(c) {
			mask[c/64] |= 1 << (c % 64)
		}
	}
	return mask, set.Count(), true
}
