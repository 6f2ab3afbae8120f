package matvec

import (
	"fmt"
	"math"
	"math/rand"
	"sync"
	"testing"
)

// TestQ4x4SplitBitwise: nth threads sharing the rows through one split
// state give bitwise the one-thread result, for every n and thread count,
// call after call on the same state (the last thread out resets it).
func TestQ4x4SplitBitwise(t *testing.T) {
	if !q4x4AVX512Available() {
		t.Skip("the shared split runs the AVX-512 VNNI q4x4 kernel")
	}
	rng := rand.New(rand.NewSource(11))
	split := splitState()
	defer freeSplitState(split)
	for _, sh := range []struct{ rows, k int }{{70, 2048}, {1000, 256}, {2048, 2048}, {512, 8192}, {13, 64}} {
		w, _ := weights(rng, Q4_0, sh.rows, sh.k)
		p, err := PackQ4x4(w, sh.rows, sh.k)
		if err != nil {
			t.Fatal(err)
		}
		x := activations(rng, MaxN, sh.k)
		a, err := NewActivations(sh.k)
		if err != nil {
			t.Fatal(err)
		}
		for n := 1; n <= MaxN; n++ {
			_ = a.Set(x[:n*sh.k])
			want := make([]float32, n*sh.rows)
			mulQ4x4Range(p, 0, sh.rows, a, want)
			for nth := 1; nth <= 4; nth++ {
				for rep := 0; rep < 3; rep++ {
					y := make([]float32, n*sh.rows)
					for i := range y {
						y[i] = float32(math.NaN())
					}
					units := make([]int, nth)
					var wg sync.WaitGroup
					for ith := range nth {
						wg.Add(1)
						go func() { defer wg.Done(); units[ith] = mulQ4x4Split(p, a, y, split, ith, nth) }()
					}
					wg.Wait()
					total := 0
					for _, u := range units {
						if u < 0 {
							t.Fatalf("%dx%d n=%d nth=%d: split returned %v", sh.rows, sh.k, n, nth, units)
						}
						total += u
					}
					if total != (sh.rows+15)/16 {
						t.Fatalf("%dx%d n=%d nth=%d rep %d: threads computed %v units, want %d in all", sh.rows, sh.k, n, nth, rep, units, (sh.rows+15)/16)
					}
					for i := range y {
						if math.Float32bits(y[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%dx%d n=%d nth=%d rep %d: element %d %g, one thread %g", sh.rows, sh.k, n, nth, rep, i, y[i], want[i])
						}
					}
				}
			}
		}
	}
}

// TestQ4x4SplitLateThread: a thread that arrives after the others left
// finds its share done: the first computes every unit, bitwise the same,
// and the state is reset for the next call, whichever thread comes first.
// With static shares the first thread would compute only its own.
func TestQ4x4SplitLateThread(t *testing.T) {
	if !q4x4AVX512Available() {
		t.Skip("the shared split runs the AVX-512 VNNI q4x4 kernel")
	}
	rng := rand.New(rand.NewSource(12))
	const rows, k = 1000, 512
	w, _ := weights(rng, Q4_0, rows, k)
	p, _ := PackQ4x4(w, rows, k)
	split := splitState()
	defer freeSplitState(split)
	for n := 1; n <= MaxN; n++ {
		a, _ := NewActivations(k)
		_ = a.Set(activations(rng, n, k))
		want := make([]float32, n*rows)
		mulQ4x4Range(p, 0, rows, a, want)
		for _, order := range [][]int{{0, 1, 2}, {2, 1, 0}, {1, 0, 2}} {
			y := make([]float32, n*rows)
			var got []int
			for _, ith := range order { // one after another: each starts after the one before left
				got = append(got, mulQ4x4Split(p, a, y, split, ith, len(order)))
			}
			if want := []int{(rows + 15) / 16, 0, 0}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("n=%d order %v: units computed %v, want %v", n, order, got, want)
			}
			for i := range y {
				if math.Float32bits(y[i]) != math.Float32bits(want[i]) {
					t.Fatalf("n=%d order %v: element %d %g, want %g", n, order, i, y[i], want[i])
				}
			}
		}
	}
	// Where the split does not apply, nothing is touched: the caller splits.
	a, _ := NewActivations(k)
	a.n = MaxN + 1 // the call returns before reading a row
	if got := mulQ4x4Split(p, a, make([]float32, (MaxN+1)*rows), split, 0, 2); got != -2 {
		t.Fatalf("n=%d: split returned %d, want -2", MaxN+1, got)
	}
}
