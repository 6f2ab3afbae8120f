package kernels

import (
	"errors"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStateSeqRoundTrip: the state of sequence 0 after 32 tokens, set into a
// fresh context of the same model, continues with exactly the tokens an
// uninterrupted decode produces. The state lives in a memfd mapping, as the
// host will use it.
func TestStateSeqRoundTrip(t *testing.T) {
	m := loadStories(t)
	const first, rest = 32, 32
	bos := m.Vocab().BOS()

	// Uninterrupted: BOS then 64 greedy tokens.
	ref := newCtx(t, m, ContextParams{NCtx: 256})
	want := greedy(t, ref, newBatch(t, 8, 1), []int32{bos}, 0, first+rest)

	// Interrupted: BOS + 31 greedy tokens decoded (32 cells), save.
	a := newCtx(t, m, ContextParams{NCtx: 256})
	ab := newBatch(t, 8, 1)
	got := greedy(t, a, ab, []int32{bos}, 0, first)
	// greedy decoded BOS and first-1 sampled tokens; the last one is pending.
	if pmax, err := a.MemorySeqPosMax(0); err != nil || pmax != first-1 {
		t.Fatalf("MemorySeqPosMax = %d, %v; want %d", pmax, err, first-1)
	}
	size, err := a.StateSeqSize(0)
	if err != nil || size <= 0 {
		t.Fatalf("StateSeqSize = %d, %v", size, err)
	}
	buf := memfdBuffer(t, size)
	if _, err := a.StateSeqGet(buf[:size/2], 0); !errors.Is(err, ErrShortBuffer) {
		t.Fatalf("StateSeqGet into half a buffer = %v, want ErrShortBuffer", err)
	}
	n, err := a.StateSeqGet(buf, 0)
	if err != nil || n != size {
		t.Fatalf("StateSeqGet = %d, %v; want %d", n, err, size)
	}

	// Restore into a fresh context and continue from the pending token.
	b := newCtx(t, m, ContextParams{NCtx: 256})
	if err := b.StateSeqSet(buf[:n], 0); err != nil {
		t.Fatal(err)
	}
	if pmin, _ := b.MemorySeqPosMin(0); pmin != 0 {
		t.Fatalf("restored MemorySeqPosMin = %d", pmin)
	}
	if pmax, _ := b.MemorySeqPosMax(0); pmax != first-1 {
		t.Fatalf("restored MemorySeqPosMax = %d", pmax)
	}
	more := greedy(t, b, newBatch(t, 8, 1), got[first-1:], first, rest)
	got = append(got, more...)
	if !slices.Equal(got, want) {
		t.Fatalf("restored decode diverges:\n got %v\nwant %v", got, want)
	}

	// Bad states are rejected, the sequence left empty; no crash.
	for name, bad := range map[string][]byte{
		"truncated": buf[:n/3],
		"garbage":   slices.Repeat([]byte{0xA5}, 256),
		"header":    {1, 0, 0, 0},
	} {
		c := newCtx(t, m, ContextParams{NCtx: 256})
		if err := c.StateSeqSet(bad, 0); !errors.Is(err, ErrState) {
			t.Errorf("StateSeqSet(%s) = %v, want ErrState", name, err)
		}
		if pmax, _ := c.MemorySeqPosMax(0); pmax != -1 {
			t.Errorf("after rejected %s state MemorySeqPosMax = %d", name, pmax)
		}
	}
	if err := b.StateSeqSet(nil, 0); !errors.Is(err, ErrState) {
		t.Errorf("StateSeqSet(nil) = %v", err)
	}
	if _, err := b.StateSeqGet(buf, 3); !errors.Is(err, ErrInvalidSeq) {
		t.Errorf("StateSeqGet(seq 3) = %v", err)
	}
}

// memfdBuffer maps n bytes of a memfd (MAP_SHARED), like the host's KV arena.
func memfdBuffer(t *testing.T, n int) []byte {
	t.Helper()
	fd, err := unix.MemfdCreate("edgellm-state-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Skipf("memfd_create: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Ftruncate(fd, int64(n)); err != nil {
		t.Fatal(err)
	}
	b, err := unix.Mmap(fd, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

func TestMemoryOps(t *testing.T) {
	m := loadStories(t)
	c := newCtx(t, m, ContextParams{NCtx: 256, NSeqMax: 3, KVUnified: true})
	b := newBatch(t, 16, 3)
	// A 10-token prefix shared by sequences 0 and 1.
	for i := 0; i < 10; i++ {
		if err := b.AddSeqs(int32(100+i), i, []int{0, 1}, i == 9); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Decode(b); err != nil {
		t.Fatal(err)
	}
	span := func(seq int) [2]int {
		lo, err1 := c.MemorySeqPosMin(seq)
		hi, err2 := c.MemorySeqPosMax(seq)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		return [2]int{lo, hi}
	}
	steps := []struct {
		name string
		op   func() error
		want map[int][2]int
	}{
		{"decoded", func() error { return nil }, map[int][2]int{0: {0, 9}, 1: {0, 9}, 2: {-1, -1}}},
		{"cp 0->2 [0,5)", func() error { return c.MemorySeqCp(0, 2, 0, 5) }, map[int][2]int{2: {0, 4}}},
		{"rm 1 [5,inf)", func() error { return c.MemorySeqRm(1, 5, -1) }, map[int][2]int{0: {0, 9}, 1: {0, 4}}},
		// Cells [0,5) are shared with sequences 1 and 2; shifting a cell moves
		// it for every sequence, so drop them from 0 before shifting 0.
		{"rm 0 [0,5)", func() error { return c.MemorySeqRm(0, 0, 5) }, map[int][2]int{0: {5, 9}, 1: {0, 4}, 2: {0, 4}}},
		{"add 0 [0,inf) +3", func() error { return c.MemorySeqAdd(0, 0, -1, 3) }, map[int][2]int{0: {8, 12}, 1: {0, 4}}},
		{"div 0 by 2", func() error { return c.MemorySeqDiv(0, 0, -1, 2) }, map[int][2]int{0: {4, 6}, 1: {0, 4}}},
		{"keep 2", func() error { return c.MemorySeqKeep(2) }, map[int][2]int{0: {-1, -1}, 1: {-1, -1}, 2: {0, 4}}},
		{"rm all seqs [2,inf)", func() error { return c.MemorySeqRm(-1, 2, -1) }, map[int][2]int{2: {0, 1}}},
		{"clear", func() error { return c.MemoryClear(true) }, map[int][2]int{2: {-1, -1}}},
	}
	if !c.MemoryCanShift() {
		t.Fatal("llama KV cache should shift")
	}
	for _, s := range steps {
		if err := s.op(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		for seq, want := range s.want {
			if got := span(seq); got != want {
				t.Fatalf("after %s: seq %d spans %v, want %v", s.name, seq, got, want)
			}
		}
	}
	// Invalid sequence ids never reach llama.cpp's asserts.
	for name, err := range map[string]error{
		"rm":   c.MemorySeqRm(3, 0, -1),
		"rm-2": c.MemorySeqRm(-2, 0, -1),
		"cp":   c.MemorySeqCp(0, 7, 0, -1),
		"keep": c.MemorySeqKeep(-1),
		"add":  c.MemorySeqAdd(5, 0, -1, 1),
	} {
		if !errors.Is(err, ErrInvalidSeq) {
			t.Errorf("%s with bad seq = %v, want ErrInvalidSeq", name, err)
		}
	}
	if _, err := c.MemorySeqPosMax(99); !errors.Is(err, ErrInvalidSeq) {
		t.Errorf("MemorySeqPosMax(99) = %v", err)
	}
}
