package kernels

import (
	"math"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// anonBytes is an anonymous mapping of n bytes (page-aligned, outside the
// Go heap, as the engine's copies are), unmapped at cleanup.
func anonBytes(tb testing.TB, n int) []byte {
	tb.Helper()
	m, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = unix.Munmap(m) })
	return m
}

// TestMulMatEdgellmQ4x4: the op on the q4x4 copy gives bitwise the
// plain-block op's result (hence its batch invariance) for n = 1..
// EdgellmMaxN and 1..3 threads, on a row count that leaves partial 16-row

// placedQ4x4 places the plain Q4_0 blocks wb (rows x k) as a tensor in
// anonymous memory and makes its q4x4 copy (returned with the bytes it
// lives in); all live until the test ends.
func placedQ4x4(t *testing.T, wb []byte, rows, k int) (Tensor, *EdgellmQ4x4, []byte) {
	t.Helper()
	mem := anonBytes(t, len(wb))
	copy(mem, wb)
	buf, err := NewBufferFromPtr(unsafe.Pointer(&mem[0]), int64(len(mem)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { buf.Close() })
	meta, _ := NewGGMLContext(2, 0)
	t.Cleanup(func() { meta.Close() })
	w, _ := meta.NewTensor(GGMLTypeQ4_0, int64(k), int64(rows))
	if err := buf.Place(w, 0); err != nil {
		t.Fatal(err)
	}
	size := EdgellmQ4x4Size(w)
	if size == 0 {
		t.Fatal("q4x4 size 0 for a plain Q4_0 matrix")
	}
	packed := anonBytes(t, int(size))
	p, err := NewEdgellmQ4x4(w, unsafe.Pointer(&packed[0]))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Free)
	return w, p, packed
}

// units and 4-row groups.
func TestMulMatEdgellmQ4x4(t *testing.T) {
	if !EdgellmQ4x4Available() {
		t.Skip("q4x4 kernels need AVX-512 VNNI or AVX2 with FMA and F16C")
	}
	const rows, k = 67, 512
	wb, x := edgellmProblem(t, GGMLTypeQ4_0, rows, k, 3)
	w, p, packed := placedQ4x4(t, wb, rows, k)
	for n := 1; n <= EdgellmMaxN; n++ {
		for threads := 1; threads <= 3; threads++ {
			want := newMMGraph(t, GGMLTypeQ4_0, wb, rows, k, n, threads, true).run(t, x[:n*k])
			ctx, _ := NewGGMLContext(8, 8)
			ga, _ := NewGallocr()
			tp, _ := NewThreadpool(ThreadpoolParams{NThreads: threads})
			be, _ := NewCPUBackend(tp, 0)
			xt, _ := ctx.NewTensor(GGMLTypeF32, k, int64(n))
			xt.SetInput()
			out := ctx.MulMatEdgellmQ4x4(w, xt, p)
			out.SetOutput()
			g, _ := ctx.NewGraph(8)
			if err := g.Expand(out); err != nil {
				t.Fatal(err)
			}
			if err := ga.Alloc(g); err != nil {
				t.Fatal(err)
			}
			copy(xt.Float32s(), x[:n*k])
			if err := be.Compute(g); err != nil {
				t.Fatal(err)
			}
			got := out.Float32s()
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("n=%d threads=%d row %d act %d: q4x4 %g, plain %g", n, threads, i%rows, i/rows, got[i], want[i])
				}
			}
			if n == 1 && threads == 3 {
				// The op reads the copy, not the mapped blocks: with the
				// copy zeroed (all scales 0) every output is 0.
				clear(packed)
				if err := be.Compute(g); err != nil {
					t.Fatal(err)
				}
				for i, v := range out.Float32s() {
					if v != 0 {
						t.Fatalf("copy zeroed: row %d = %g, want 0 (the op did not read the q4x4 copy)", i, v)
					}
				}
				if _, err := NewEdgellmQ4x4(w, unsafe.Pointer(&packed[0])); err != nil { // refill (descriptor leaked: test only)
					t.Fatal(err)
				}
			}
			be.Close()
			tp.Close()
			ga.Close()
			ctx.Close()
		}
	}
}
