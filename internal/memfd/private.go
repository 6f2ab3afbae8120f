package memfd

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Private zones: page ranges of a Buffer's mapping backed by private
// anonymous memory instead of the memfd (MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED
// over the same addresses, so pointers into Bytes stay valid). The kernel's
// samepage merging (KSM) only merges private anonymous pages: a zone is
// what Advise(…, MADV_MERGEABLE) can offer it. A zone is not in the file
// (another process mapping the fd does not see it); Discard zeroes its
// pages with MADV_DONTNEED instead of punching the file.

// pageOf returns the page index range of [off, off+n), which must be page
// aligned and inside the mapping.
func (b *Buffer) pageRange(off, n int) (int, int, error) {
	if b.data == nil {
		return 0, 0, ErrClosed
	}
	p := os.Getpagesize()
	if off < 0 || n < 0 || off%p != 0 || n%p != 0 || off+n > len(b.data) {
		return 0, 0, fmt.Errorf("memfd %s: range [%d, %d) is not whole pages inside %d bytes", b.name, off, off+n, len(b.data))
	}
	return off / p, (off + n) / p, nil
}

// Privatize moves the pages of [off, off+n) (page aligned) from the memfd
// to private anonymous memory at the same addresses, keeping their
// contents; the memfd's pages under them are released. Pages already
// private stay as they are.
func (b *Buffer) Privatize(off, n int) error {
	p0, p1, err := b.pageRange(off, n)
	if err != nil {
		return err
	}
	return b.runs(p0, p1, false, func(lo, hi int) error {
		saved := make([]byte, hi-lo)
		copy(saved, b.data[lo:hi])
		// Release the file's pages first: once covered they are unreachable.
		if err := unix.Madvise(b.data[lo:hi], unix.MADV_REMOVE); err != nil {
			return fmt.Errorf("memfd %s: madvise(MADV_REMOVE) [%d,%d): %w", b.name, lo, hi, err)
		}
		if err := b.remap(lo, hi, -1); err != nil {
			return err
		}
		copy(b.data[lo:hi], saved)
		b.setPriv(lo, hi, true)
		return nil
	})
}

// Share moves the pages of [off, off+n) (page aligned) back to the memfd,
// keeping their contents. Pages already shared stay as they are.
func (b *Buffer) Share(off, n int) error {
	p0, p1, err := b.pageRange(off, n)
	if err != nil {
		return err
	}
	return b.runs(p0, p1, true, func(lo, hi int) error {
		saved := make([]byte, hi-lo)
		copy(saved, b.data[lo:hi])
		if err := b.remap(lo, hi, b.fd); err != nil {
			return err
		}
		copy(b.data[lo:hi], saved)
		b.setPriv(lo, hi, false)
		return nil
	})
}

// Advise applies madvise(advice) to the private pages of [off, off+n)
// (page aligned); shared pages in the range are left alone. Use it with
// MADV_MERGEABLE / MADV_UNMERGEABLE, which act on private pages only.
func (b *Buffer) Advise(off, n, advice int) error {
	p0, p1, err := b.pageRange(off, n)
	if err != nil {
		return err
	}
	return b.runs(p0, p1, true, func(lo, hi int) error {
		if err := unix.Madvise(b.data[lo:hi], advice); err != nil {
			return fmt.Errorf("memfd %s: madvise(%d) [%d,%d): %w", b.name, advice, lo, hi, err)
		}
		return nil
	})
}

// PrivateBytes is the size of the mapping's private zones.
func (b *Buffer) PrivateBytes() int {
	n := 0
	for _, v := range b.priv {
		if v {
			n++
		}
	}
	return n * os.Getpagesize()
}

// remap maps [lo, hi) of the buffer afresh at the same address: private
// anonymous memory (fd < 0) or the memfd at offset lo.
func (b *Buffer) remap(lo, hi, fd int) error {
	flags := unix.MAP_FIXED | unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
	off := int64(0)
	if fd >= 0 {
		flags, off = unix.MAP_FIXED|unix.MAP_SHARED, int64(lo)
	}
	addr := unsafe.Pointer(&b.data[lo])
	got, err := unix.MmapPtr(fd, off, addr, uintptr(hi-lo), unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil {
		return fmt.Errorf("memfd %s: mmap(MAP_FIXED) [%d,%d): %w", b.name, lo, hi, err)
	}
	if got != addr { // MAP_FIXED either places it there or fails
		return fmt.Errorf("memfd %s: mmap(MAP_FIXED) [%d,%d) moved", b.name, lo, hi)
	}
	return nil
}

// runs calls f on each maximal run of pages in [p0, p1) whose privacy is
// priv, as byte ranges.
func (b *Buffer) runs(p0, p1 int, priv bool, f func(lo, hi int) error) error {
	ps := os.Getpagesize()
	for i := p0; i < p1; {
		if b.isPriv(i) != priv {
			i++
			continue
		}
		j := i
		for j < p1 && b.isPriv(j) == priv {
			j++
		}
		if err := f(i*ps, j*ps); err != nil {
			return err
		}
		i = j
	}
	return nil
}

func (b *Buffer) isPriv(page int) bool { return page < len(b.priv) && b.priv[page] }

func (b *Buffer) setPriv(lo, hi int, v bool) {
	ps := os.Getpagesize()
	if v && len(b.priv) < len(b.data)/ps {
		b.priv = append(b.priv, make([]bool, len(b.data)/ps-len(b.priv))...)
	}
	for i := lo / ps; i < hi/ps && i < len(b.priv); i++ {
		b.priv[i] = v
	}
}
