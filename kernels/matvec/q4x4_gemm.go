package matvec

/*
#include "matvec_q4x4.h"
#include "matvec_q4x4_gemm.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// MulQ4x4Rows is MulQ4x4 for any number of activation rows: act holds n
// rows of k/QK quantised blocks (ActBlockBytes each, as Activations.Bytes
// lays them out), y receives n*rows outputs. Above MaxN rows the tiled
// kernel (matvec_q4x4_gemm.c) runs; every output is bitwise the 1-row
// call's.
func MulQ4x4Rows(p *Q4x4, act []byte, n int, y []float32, threads int) error {
	as := p.k / QK * ActBlockBytes
	switch {
	case !Q4x4Available():
		return fmt.Errorf("%w: q4x4 kernel not available on this CPU", ErrArgs)
	case n < 1 || len(act) < n*as || len(y) < n*p.rows:
		return fmt.Errorf("%w: q4x4 rows=%d k=%d, n=%d, len(act)=%d, len(y)=%d", ErrArgs, p.rows, p.k, n, len(act), len(y))
	}
	groups := Q4x4Groups(p.rows)
	threads = max(1, min(threads, groups))
	if threads == 1 {
		mulQ4x4Rows(p, act, as, n, y, 0, p.rows)
		return nil
	}
	var wg sync.WaitGroup
	for i := 0; i < threads; i++ {
		r0, r1 := min(4*(groups*i/threads), p.rows), min(4*(groups*(i+1)/threads), p.rows)
		wg.Add(1)
		go func() { defer wg.Done(); mulQ4x4Rows(p, act, as, n, y, r0, r1) }()
	}
	wg.Wait()
	return nil
}

func mulQ4x4Rows(p *Q4x4, act []byte, as, n int, y []float32, r0, r1 int) {
	C.emv_q4x4_matvec(unsafe.Pointer(&p.buf[p.off]), C.int64_t(p.rows), C.int64_t(p.k), C.int64_t(r0), C.int64_t(r1),
		unsafe.Pointer(&act[0]), C.size_t(as), C.int64_t(n), (*C.float)(unsafe.Pointer(&y[0])), C.size_t(p.rows))
}

// q4x4GemmDirect calls the tiled kernel itself, whatever n (tests: it must
// give the same bits at n <= MaxN too).
func q4x4GemmDirect(p *Q4x4, act []byte, n int, y []float32) int {
	return int(C.emv_q4x4_gemm(unsafe.Pointer(&p.buf[p.off]), C.int64_t(p.rows), C.int64_t(p.k), 0, C.int64_t(p.rows),
		unsafe.Pointer(&act[0]), C.size_t(p.k/QK*ActBlockBytes), C.int64_t(n), (*C.float)(unsafe.Pointer(&y[0])), C.size_t(p.rows)))
}
