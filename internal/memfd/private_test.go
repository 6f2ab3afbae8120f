package memfd

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mappingKinds counts the pages of [addr, addr+n) listed in /proc/self/maps
// as the memfd (memfd:NAME) and as anonymous (no path).
func mappingKinds(t *testing.T, b *Buffer, name string) (memfdPages, anonPages int) {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	lo := uint64(uintptrOf(b.Bytes()))
	hi := lo + uint64(b.Len())
	ps := uint64(os.Getpagesize())
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		var a, z uint64
		if _, err := fmtSscanRange(f[0], &a, &z); err != nil || z <= lo || a >= hi {
			continue
		}
		pages := int((min(z, hi) - max(a, lo)) / ps)
		switch {
		case len(f) >= 6 && strings.HasPrefix(f[5], "/memfd:"+name):
			memfdPages += pages
		case len(f) == 5:
			anonPages += pages
		}
	}
	return memfdPages, anonPages
}

func TestPrivatizeShare(t *testing.T) {
	ps := os.Getpagesize()
	b, err := New("edgellm-priv", 8*ps)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i := range b.Bytes() {
		b.Bytes()[i] = byte(i*7 + 3)
	}
	want := bytes.Clone(b.Bytes())
	if err := b.Privatize(2*ps, 3*ps); err != nil {
		t.Fatal(err)
	}
	if err := b.Privatize(3*ps, 2*ps); err != nil { // overlapping: a no-op for private pages
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Fatal("Privatize changed the contents")
	}
	if got := b.PrivateBytes(); got != 3*ps {
		t.Fatalf("PrivateBytes = %d, want %d", got, 3*ps)
	}
	if m, a := mappingKinds(t, b, "edgellm-priv"); m != 5 || a != 3 {
		t.Fatalf("maps: %d memfd pages, %d anonymous, want 5 and 3", m, a)
	}
	// The zone is not in the file: the fd's bytes there are holes (zeros).
	fileZone := make([]byte, ps)
	if _, err := unix.Pread(b.FD(), fileZone, int64(2*ps)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fileZone, make([]byte, ps)) {
		t.Fatal("the memfd still holds the privatized page's bytes")
	}
	if err := b.Advise(0, 8*ps, unix.MADV_MERGEABLE); err != nil {
		t.Fatalf("MADV_MERGEABLE on the private zone: %v", err)
	}
	if err := b.Advise(0, 8*ps, unix.MADV_UNMERGEABLE); err != nil {
		t.Fatal(err)
	}
	if err := b.Resize(16 * ps); err == nil {
		t.Fatal("Resize with a private zone: want an error")
	}
	// Discard across a shared page and a private one zeroes both.
	if err := b.Discard(ps, 2*ps); err != nil {
		t.Fatal(err)
	}
	clear(want[ps : 3*ps])
	if !bytes.Equal(b.Bytes(), want) {
		t.Fatal("Discard over shared and private pages: contents differ")
	}
	if err := b.Share(0, 8*ps); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Fatal("Share changed the contents")
	}
	if b.PrivateBytes() != 0 {
		t.Fatal("private pages left after Share")
	}
	if m, a := mappingKinds(t, b, "edgellm-priv"); m != 8 || a != 0 {
		t.Fatalf("after Share: %d memfd pages, %d anonymous, want 8 and 0", m, a)
	}
	if _, err := unix.Pread(b.FD(), fileZone, int64(3*ps)); err != nil || !bytes.Equal(fileZone, want[3*ps:4*ps]) {
		t.Fatalf("the memfd does not hold the shared-back page (%v)", err)
	}
	if err := b.Privatize(1, ps); err == nil {
		t.Fatal("unaligned Privatize: want an error")
	}
}

func uintptrOf(p []byte) uintptr { return uintptr(unsafe.Pointer(&p[0])) }

func fmtSscanRange(s string, a, z *uint64) (int, error) {
	return fmt.Sscanf(strings.Replace(s, "-", " ", 1), "%x %x", a, z)
}
