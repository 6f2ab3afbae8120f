package matvec

import (
	"fmt"
	"math"
	"math/rand"
	"sync"
	"testing"
	"unsafe"
)

// plainSplitCase is one plain-block (or float) matrix and its activations,
// run through emv_matvec_split / emv_matvec_f32_split by thread ith of nth.
type plainSplitCase struct {
	t       Type
	w       []byte
	rows, k int
	a       *Activations // Q8_0, Q4_0
	x       []float32    // F32, F16: n rows
}

func (c *plainSplitCase) n() int {
	if c.a != nil {
		return c.a.n
	}
	return len(c.x) / c.k
}

// static is the one-thread static call (the reference); split is thread
// ith of nth's share of the shared-split call.
func (c *plainSplitCase) static(impl Impl, y []float32) {
	if c.a != nil {
		mulRange(impl, c.t, c.w, c.k/QK*c.t.BlockBytes(), 0, c.rows, c.a, y, c.rows)
		return
	}
	mulFloatRange(impl, c.t, c.w, c.k, 0, c.rows, c.x, c.n(), y, c.rows)
}

func (c *plainSplitCase) split(impl Impl, y []float32, s unsafe.Pointer, ith, nth int) int {
	if c.a != nil {
		return mulSplit(impl, c.t, c.w, c.rows, c.a, y, s, ith, nth)
	}
	return mulFloatSplit(impl, c.t, c.w, c.rows, c.k, c.x, y, s, ith, nth)
}

// passRows is the rows per pass of impl's kernel for c at n rows (beyond
// 8: the last pass's n % 8): the units the split counts (matvec.c
// emv_pass_rows, matvec_f32.c emvf_pass_rows).
func (c *plainSplitCase) passRows(impl Impl) int {
	n := (c.n()-1)%MaxN + 1
	switch {
	case impl == AVX512VNNI && c.a != nil:
		return 4
	case impl == AVX512VNNI && n <= 4:
		return 4
	case impl == AVX512VNNI:
		return 2
	case impl == AVX2 && c.a == nil && n <= 2:
		return 2
	}
	return 1
}

// declines reports whether the split leaves c to the caller's static split
// under impl: the NEON quantised kernels, dotprod and i8mm (matvec_arm64.c
// prefetches up to its call's last row only, so it takes no separate
// limit).
func (c *plainSplitCase) declines(impl Impl) bool {
	return c.a != nil && (impl == NEONDot || impl == NEONI8MM)
}

// scalarPath reports whether impl runs c on a scalar C kernel (the
// references; the float kernels off x86, which have no NEON path).
func (c *plainSplitCase) scalarPath(impl Impl) bool {
	return impl == Scalar || impl == Scalar8 || c.a == nil && (impl == NEONDot || impl == NEONI8MM)
}

// plainSplitCases: every plain type over shapes of one to many ~64 KB
// chunks per thread's share, odd row counts (a partial last pass) and, for
// the float kernels, k not a multiple of 16; MaxN activation rows (set n
// with setN).
func plainSplitCases(rng *rand.Rand) []*plainSplitCase {
	var out []*plainSplitCase
	for _, t := range []Type{Q8_0, Q4_0} {
		for _, sh := range []struct{ rows, k int }{{13, 64}, {70, 2048}, {1001, 512}, {1030, 1024}} {
			w, _ := weights(rng, t, sh.rows, sh.k)
			c := &plainSplitCase{t: t, w: w, rows: sh.rows, k: sh.k}
			c.setN(rng, MaxN)
			out = append(out, c)
		}
	}
	for _, t := range []Type{F32, F16} {
		for _, sh := range []struct{ rows, k int }{{7, 37}, {70, 1000}, {301, 2048}, {1003, 192}} {
			w, _ := floatWeights(rng, t, sh.rows, sh.k)
			out = append(out, &plainSplitCase{t: t, w: w, rows: sh.rows, k: sh.k, x: activations(rng, MaxN, sh.k)})
		}
	}
	return out
}

// setN gives c n fresh random activation rows (1..MaxN+1; Activations
// holds MaxN, so a ninth quantised row is appended to the first 8's bytes).
func (c *plainSplitCase) setN(rng *rand.Rand, n int) {
	if c.t.BlockBytes() == 0 { // float weights: F32 rows
		c.x = activations(rng, n, c.k)
		return
	}
	a, _ := NewActivations(c.k)
	_ = a.Set(activations(rng, min(n, MaxN), c.k))
	if n > MaxN {
		b, _ := NewActivations(c.k)
		_ = b.Set(activations(rng, n-MaxN, c.k))
		a = &Activations{buf: append(a.Bytes(), b.Bytes()...), k: c.k, n: n}
	}
	c.a = a
}

// TestPlainSplitBitwise: nth threads sharing the rows through one split
// state give bitwise the one-thread result, for every plain type (Q8_0,
// Q4_0, F32, F16), implementation this CPU runs, n (1..9) and thread
// count, call after call on the same state, and compute every unit exactly
// once.
func TestPlainSplitBitwise(t *testing.T) {
	rng := rand.New(rand.NewSource(31))
	split := splitState()
	defer freeSplitState(split)
	for _, c := range plainSplitCases(rng) {
		for _, impl := range Available() {
			if c.scalarPath(impl) && c.rows*c.k > 600_000 {
				continue // the scalar C kernels: the smaller shapes give them many chunks too (time under qemu)
			}
			if c.declines(impl) {
				if got := c.split(impl, make([]float32, c.n()*c.rows), split, 0, 2); got != -2 {
					t.Fatalf("%v %v: split returned %d, want -2 (static split)", c.t, impl, got)
				}
				continue
			}
			for n := 1; n <= MaxN+1; n++ { // 9: two passes over each chunk
				c.setN(rng, n)
				want := make([]float32, n*c.rows)
				c.static(impl, want)
				units := (c.rows + c.passRows(impl) - 1) / c.passRows(impl)
				for nth := 1; nth <= 4; nth++ {
					for rep := 0; rep < 3; rep++ {
						y := make([]float32, n*c.rows)
						for i := range y {
							y[i] = float32(math.NaN())
						}
						got := make([]int, nth)
						var wg sync.WaitGroup
						for ith := range nth {
							wg.Add(1)
							go func() { defer wg.Done(); got[ith] = c.split(impl, y, split, ith, nth) }()
						}
						wg.Wait()
						total := 0
						for _, u := range got {
							if u < 0 {
								t.Fatalf("%v %v %dx%d n=%d nth=%d: split returned %v", c.t, impl, c.rows, c.k, n, nth, got)
							}
							total += u
						}
						if total != units {
							t.Fatalf("%v %v %dx%d n=%d nth=%d rep %d: threads computed %v units, want %d in all", c.t, impl, c.rows, c.k, n, nth, rep, got, units)
						}
						for i := range y {
							if math.Float32bits(y[i]) != math.Float32bits(want[i]) {
								t.Fatalf("%v %v %dx%d n=%d nth=%d rep %d: element %d %g, one thread %g", c.t, impl, c.rows, c.k, n, nth, rep, i, y[i], want[i])
							}
						}
					}
				}
			}
		}
	}
}

// TestPlainSplitLateThread: a thread that arrives after the others left
// finds its share done: the first computes every unit, bitwise the same,
// and the state is reset for the next call, whichever thread comes first.
// With static shares the first thread would compute only its own. Where
// the split does not apply (more threads than the state holds) the call
// returns -2 and touches nothing.
func TestPlainSplitLateThread(t *testing.T) {
	rng := rand.New(rand.NewSource(32))
	split := splitState()
	defer freeSplitState(split)
	for _, c := range plainSplitCases(rng) {
		if c.rows < 1000 {
			continue
		}
		for _, impl := range Available() {
			if c.declines(impl) {
				continue // TestPlainSplitBitwise checks the -2
			}
			for _, n := range []int{1, 3, MaxN + 1} {
				c.setN(rng, n)
				want := make([]float32, n*c.rows)
				c.static(impl, want)
				units := (c.rows + c.passRows(impl) - 1) / c.passRows(impl)
				for _, order := range [][]int{{0, 1, 2}, {2, 1, 0}, {1, 0, 2}} {
					y := make([]float32, n*c.rows)
					var got []int
					for _, ith := range order { // one after another: each starts after the one before left
						got = append(got, c.split(impl, y, split, ith, len(order)))
					}
					if want := []int{units, 0, 0}; fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("%v %v n=%d order %v: units computed %v, want %v", c.t, impl, n, order, got, want)
					}
					for i := range y {
						if math.Float32bits(y[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%v %v n=%d order %v: element %d %g, want %g", c.t, impl, n, order, i, y[i], want[i])
						}
					}
				}
			}
			// More threads than emv_split.h holds: the caller splits
			// statically; the state stays zeroed (the next call deals afresh).
			if got := c.split(impl, make([]float32, c.n()*c.rows), split, 0, splitMaxThreads+1); got != -2 {
				t.Fatalf("%v %v nth=%d: split returned %d, want -2", c.t, impl, splitMaxThreads+1, got)
			}
		}
	}
}
