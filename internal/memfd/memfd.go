// Package memfd provides byte buffers backed by an anonymous memory file
// (memfd_create: Android's modern ashmem), mapped MAP_SHARED. The memory is
// owned by the host, not the Go heap: it is invisible to the garbage collector,
// can be released page by page with Discard (MADV_DONTNEED on a shared mapping
// of a memfd punches the pages out of RSS and PSS), and could be shared with
// another process through the file descriptor. Page ranges can be moved to
// private anonymous memory at the same addresses (Privatize, private.go), the
// only kind the kernel's samepage merging (KSM) merges.
//
// A Buffer is not safe for concurrent Resize/Close; reading and writing its
// Bytes from several goroutines is the caller's business.
package memfd

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Buffer is a memfd mapping. Close it to release the memory.
type Buffer struct {
	fd   int
	data []byte // the whole mapping; len = capacity
	name string
	priv []bool // per page: private anonymous (private.go), not the memfd
}

// ErrClosed is returned by operations on a closed Buffer.
var ErrClosed = errors.New("memfd: buffer is closed")

// New creates a buffer of size bytes (rounded up to a page; size 0 is allowed
// and maps one page). name shows in /proc/self/maps as memfd:NAME.
func New(name string, size int) (*Buffer, error) {
	if size < 0 {
		return nil, fmt.Errorf("memfd: negative size %d", size)
	}
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd_create %s: %w", name, err)
	}
	b := &Buffer{fd: fd, name: name}
	if err := b.mapSize(roundPage(max(size, 1))); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return b, nil
}

func roundPage(n int) int {
	p := os.Getpagesize()
	return (n + p - 1) / p * p
}

func (b *Buffer) mapSize(size int) error {
	if err := unix.Ftruncate(b.fd, int64(size)); err != nil {
		return fmt.Errorf("memfd %s: ftruncate %d: %w", b.name, size, err)
	}
	data, err := unix.Mmap(b.fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("memfd %s: mmap %d bytes: %w", b.name, size, err)
	}
	b.data = data
	return nil
}

// Bytes returns the mapped memory (its length is the capacity, a whole number
// of pages). The slice is invalid after Resize or Close.
func (b *Buffer) Bytes() []byte { return b.data }

// Len is the mapped size in bytes.
func (b *Buffer) Len() int { return len(b.data) }

// FD is the memfd file descriptor, owned by the Buffer.
func (b *Buffer) FD() int { return b.fd }

// Resize grows or shrinks the buffer to at least size bytes, keeping the
// contents that fit. Earlier Bytes slices become invalid.
func (b *Buffer) Resize(size int) error {
	if b.data == nil {
		return ErrClosed
	}
	size = roundPage(max(size, 1))
	if size == len(b.data) {
		return nil
	}
	if b.PrivateBytes() > 0 {
		return fmt.Errorf("memfd %s: cannot resize with private zones (Share them first)", b.name)
	}
	if err := unix.Munmap(b.data); err != nil {
		return fmt.Errorf("memfd %s: munmap: %w", b.name, err)
	}
	b.data = nil
	return b.mapSize(size)
}

// Discard releases the pages of [off, off+n) back to the kernel
// (MADV_REMOVE frees the memfd's backing pages, MADV_DONTNEED a private
// zone's; they read back as zeros). off and n are rounded inward to whole
// pages.
func (b *Buffer) Discard(off, n int) error {
	if b.data == nil {
		return ErrClosed
	}
	p := os.Getpagesize()
	start := (off + p - 1) / p * p
	end := (off + n) / p * p
	if end > len(b.data) {
		end = len(b.data) / p * p
	}
	if end <= start {
		return nil
	}
	for _, z := range []struct {
		priv   bool
		advice int
		name   string
	}{{false, unix.MADV_REMOVE, "MADV_REMOVE"}, {true, unix.MADV_DONTNEED, "MADV_DONTNEED"}} {
		err := b.runs(start/p, end/p, z.priv, func(lo, hi int) error {
			if err := unix.Madvise(b.data[lo:hi], z.advice); err != nil {
				return fmt.Errorf("memfd %s: madvise(%s) [%d,%d): %w", b.name, z.name, lo, hi, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Close unmaps the memory and closes the file descriptor.
func (b *Buffer) Close() error {
	if b.data == nil && b.fd < 0 {
		return nil
	}
	var err error
	if b.data != nil {
		err = unix.Munmap(b.data) // the private zones too: one address range
		b.data, b.priv = nil, nil
	}
	if b.fd >= 0 {
		err = errors.Join(err, unix.Close(b.fd))
		b.fd = -1
	}
	return err
}
