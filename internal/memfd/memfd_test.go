package memfd

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestBufferLifecycle(t *testing.T) {
	b, err := New("edgellm-test", 10000)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Len() < 10000 || b.Len()%os.Getpagesize() != 0 {
		t.Fatalf("Len = %d", b.Len())
	}
	copy(b.Bytes(), "hello")
	if err := b.Resize(1 << 20); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b.Bytes(), []byte("hello")) {
		t.Fatal("contents lost on grow")
	}
	if err := b.Resize(100); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b.Bytes(), []byte("hello")) {
		t.Fatal("contents lost on shrink")
	}
	maps, _ := os.ReadFile("/proc/self/maps")
	if !strings.Contains(string(maps), "memfd:edgellm-test") {
		t.Fatal("mapping not visible as memfd:edgellm-test in /proc/self/maps")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := b.Resize(10); err != ErrClosed {
		t.Fatalf("Resize after Close: %v", err)
	}
	if _, err := New("x", -1); err == nil {
		t.Fatal("negative size: want error")
	}
}

func rssKB(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		t.Skipf("no smaps_rollup: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "Rss:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	t.Fatal("no Rss line")
	return 0
}

// Touching the buffer raises RSS; Discard gives the pages back.
func TestDiscardReleasesRSS(t *testing.T) {
	const size = 64 << 20
	b, err := New("edgellm-discard", size)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	before := rssKB(t)
	data := b.Bytes()
	for i := 0; i < len(data); i += os.Getpagesize() {
		data[i] = 1
	}
	touched := rssKB(t)
	if touched-before < 60<<10 {
		t.Fatalf("RSS grew %d KB after touching 64 MB", touched-before)
	}
	if err := b.Discard(0, size); err != nil {
		t.Fatal(err)
	}
	after := rssKB(t)
	if touched-after < 60<<10 {
		t.Fatalf("RSS fell only %d KB after Discard of 64 MB", touched-after)
	}
	if data[0] != 0 {
		t.Fatal("discarded page did not read back as zero")
	}
}
