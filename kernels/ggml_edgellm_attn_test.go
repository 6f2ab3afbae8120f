package kernels

import (
	"math"
	"math/rand"
	"testing"
	"unsafe"

	"github.com/edgellm/edgellm/kernels/matvec"
)

// attnProblem is one decode-attention problem in the native graph's layout:
// q [hd, n_head, n_q] F32 (after RoPE), a KV cache of n_ctx rows of
// hd*n_head_kv F16 values of which the first n_kv are attended, an F16 mask
// [n_kv, n_q] with -inf holes.
type attnProblem struct {
	hd, nh, nhkv, nctx, nkv, nq int
	scale, softcap              float32
	q                           []float32
	k, v, mask                  []uint16 // k, v: n_ctx rows
}

func newAttnProblem(rng *rand.Rand, hd, nh, nhkv, nkv, nq int, softcap float32) *attnProblem {
	p := &attnProblem{hd: hd, nh: nh, nhkv: nhkv, nctx: nkv + 3, nkv: nkv, nq: nq,
		scale: float32(1 / math.Sqrt(float64(hd))), softcap: softcap}
	p.q = make([]float32, hd*nh*nq)
	for i := range p.q {
		p.q[i] = float32(rng.NormFloat64() * 1.5)
	}
	p.k, p.v = make([]uint16, p.nctx*nhkv*hd), make([]uint16, p.nctx*nhkv*hd)
	for i := range p.k {
		p.k[i] = uint16(rng.Intn(2))<<15 | uint16(rng.Intn(5)+11)<<10 | uint16(rng.Intn(1024))
		p.v[i] = uint16(rng.Intn(2))<<15 | uint16(rng.Intn(5)+11)<<10 | uint16(rng.Intn(1024))
	}
	p.mask = make([]uint16, nkv*nq)
	for j := 0; j < nq; j++ {
		last := nkv - nq + j
		for c := 0; c < nkv; c++ {
			if c > last || (c%5 == 2 && c != last) {
				p.mask[j*nkv+c] = 0xfc00
			}
		}
	}
	return p
}

// attnGraph computes p's attention with ggml's FlashAttnExtCap or
// AttnEdgellm, the operands built as internal/native's flash branch builds
// them (q permuted, K/V views of the cache permuted).
type attnGraph struct {
	ctx          *GGMLContext
	ga           *Gallocr
	tp           *Threadpool
	be           *CPUBackend
	g            *Graph
	q, k, v, msk Tensor
	out          Tensor
}

func newAttnGraph(tb testing.TB, p *attnProblem, kvType GGMLType, threads int, own bool) *attnGraph {
	tb.Helper()
	a := &attnGraph{}
	var err error
	if a.ctx, err = NewGGMLContext(16, 16); err != nil {
		tb.Fatal(err)
	}
	a.ga, _ = NewGallocr()
	a.tp, _ = NewThreadpool(ThreadpoolParams{NThreads: threads})
	a.be, _ = NewCPUBackend(a.tp, 0)
	tb.Cleanup(func() { a.be.Close(); a.tp.Close(); a.ga.Close(); a.ctx.Close() })
	c := a.ctx
	hd, nhkv := int64(p.hd), int64(p.nhkv)
	a.q, _ = c.NewTensor(GGMLTypeF32, hd, int64(p.nh), int64(p.nq))
	a.k, _ = c.NewTensor(kvType, hd*nhkv, int64(p.nctx))
	a.v, _ = c.NewTensor(kvType, hd*nhkv, int64(p.nctx))
	a.msk, _ = c.NewTensor(GGMLTypeF16, int64(p.nkv), int64(p.nq))
	for _, t := range []Tensor{a.q, a.k, a.v, a.msk} {
		t.SetInput()
	}
	view := func(t Tensor) Tensor {
		return c.Permute(c.View(t, 0, []int64{hd, nhkv, int64(p.nkv)}, []int64{kvType.RowSize(hd), t.Nb(1)}), 0, 2, 1, 3)
	}
	qp := c.Permute(a.q, 0, 2, 1, 3)
	if own {
		a.out = c.AttnEdgellm(qp, view(a.k), view(a.v), a.msk, p.scale, p.softcap)
	} else {
		a.out = c.FlashAttnExtCap(qp, view(a.k), view(a.v), a.msk, p.scale, p.softcap)
		c.SetPrecF32(a.out)
	}
	if err := c.Err(); err != nil {
		tb.Fatal(err)
	}
	a.out.SetOutput()
	if a.g, err = c.NewGraph(16); err != nil {
		tb.Fatal(err)
	}
	if err := a.g.Expand(a.out); err != nil {
		tb.Fatal(err)
	}
	if err := a.ga.Alloc(a.g); err != nil {
		tb.Fatal(err)
	}
	return a
}

func (a *attnGraph) run(tb testing.TB, p *attnProblem) []float32 {
	tb.Helper()
	copy(a.q.Float32s(), p.q)
	if a.k.Type() == GGMLTypeF16 {
		copy(unsafe.Slice((*uint16)(a.k.Data()), len(p.k)), p.k)
		copy(unsafe.Slice((*uint16)(a.v.Data()), len(p.v)), p.v)
	}
	copy(unsafe.Slice((*uint16)(a.msk.Data()), len(p.mask)), p.mask)
	if err := a.be.Compute(a.g); err != nil {
		tb.Fatal(err)
	}
	return append([]float32(nil), a.out.Float32s()...)
}

func f16ToF64(h uint16) float64 {
	e, m := int(h>>10)&0x1f, float64(h&0x3ff)
	v := (1 + m/1024) * math.Ldexp(1, e-15)
	if e == 0 {
		v = m * math.Ldexp(1, -24)
	}
	if h&0x8000 != 0 {
		return -v
	}
	return v
}

// ggmlAttnTol bounds |ggml - edgellm| for (row j, head h), from the F16
// roundings of ggml's CPU flash attention (u16 = 2^-11), everything else
// being F32 (u = 2^-24, terms of order u*n):
//   - ggml rounds q to F16: each score moves by <= u16*scale*sum|q_i k_i|
//     =: ds (plus F32 dot errors, covered by the 2x below); the softmax
//     weights of perturbed scores move the output by <= 2*max|v|*2*ds;
//   - ggml keeps the V sum in F16: every step (the fma of a row, and the
//     rescale on a new maximum) rounds the running sum, |VKQ_t| <=
//     S_t*max|v| with S_t <= S in the final maximum's units, so after the
//     division by S the error is <= u16*max|v| per step, 2 steps per
//     visible position;
//   - edgellm's own error (kernels/matvec TestAttnFloat64's bound) is
//     below u*(n_kv+hd)*max|v|, covered by the extra 2*n_kv*u16 margin's
//     slack (u*(n_kv+hd) << u16).
func ggmlAttnTol(p *attnProblem, j, h int) float64 {
	g := h / (p.nh / p.nhkv)
	q := p.q[(j*p.nh+h)*p.hd:]
	const u16 = 1.0 / 2048
	maxQK, maxV, visible := 0.0, 0.0, 0
	for c := 0; c < p.nkv; c++ {
		if p.mask[j*p.nkv+c] == 0xfc00 {
			continue
		}
		visible++
		abs := 0.0
		for i := 0; i < p.hd; i++ {
			abs += math.Abs(float64(q[i]) * f16ToF64(p.k[(c*p.nhkv+g)*p.hd+i]))
			maxV = math.Max(maxV, math.Abs(f16ToF64(p.v[(c*p.nhkv+g)*p.hd+i])))
		}
		maxQK = math.Max(maxQK, abs)
	}
	ds := 2 * u16 * float64(p.scale) * maxQK
	return maxV * (4*ds + 2*float64(visible)*u16 + float64(p.nkv+p.hd)/(1<<24))
}

// TestAttnEdgellm: the custom op (a) is in the graph instead of
// FLASH_ATTN_EXT, (b) returns bitwise kernels/matvec's Attn on the same
// data (which TestAttnFloat64 holds to a float64 reference), (c) stays
// within the derived tolerance of ggml's flash attention, (d) gives the
// same bits at 1..4 threads and for each row whatever n_q (batch
// invariance through the graph), for the 1B shape (hd 64, GQA 4), hd 128
// GQA 1 and a soft-capped case.
func TestAttnEdgellm(t *testing.T) {
	if !matvec.AttnUsable() {
		t.Skip("no edgellm attention kernel on this CPU")
	}
	rng := rand.New(rand.NewSource(31))
	for _, sh := range []struct {
		hd, nh, nhkv, nkv int
		softcap           float32
	}{{64, 32, 8, 100, 0}, {128, 4, 4, 70, 0}, {64, 8, 2, 40, 30}, {8, 8, 4, 64, 0}} {
		var single [][]float32 // row j of the 9-row problem, computed alone
		full := newAttnProblem(rng, sh.hd, sh.nh, sh.nhkv, sh.nkv, EdgellmMaxN, sh.softcap)
		for nq := EdgellmMaxN; nq >= 1; nq-- {
			p := *full
			p.nq = nq
			p.q = full.q[(EdgellmMaxN-nq)*sh.nh*sh.hd:]
			p.mask = full.mask[(EdgellmMaxN-nq)*sh.nkv:]
			var first []float32
			for threads := 1; threads <= 4; threads++ {
				own := newAttnGraph(t, &p, GGMLTypeF16, threads, true)
				if c, f := own.g.CountAttnEdgellm(), own.g.CountOps("FLASH_ATTN_EXT"); c != 1 || f != 0 {
					t.Fatalf("%+v: %d custom ops and %d FLASH_ATTN_EXT, want 1 and 0", sh, c, f)
				}
				got := own.run(t, &p)
				if threads == 1 {
					first = got
					continue
				}
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(first[i]) {
						t.Fatalf("%+v nq=%d: %d threads [%d] = %g, 1 thread %g", sh, nq, threads, i, got[i], first[i])
					}
				}
			}
			// (b) bitwise the kernel's Attn on the same data
			want := make([]float32, len(first))
			s := matvec.AttnShape{HD: sh.hd, NQ: nq, NHead: sh.nh, NHeadKV: sh.nhkv, NKV: sh.nkv, Scale: p.scale,
				Softcap: p.softcap}
			if err := matvec.Attn(matvec.Best(), s, p.q, p.k, p.v, p.mask, want, 1); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if math.Float32bits(first[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%+v nq=%d: op [%d] = %g, matvec.Attn %g", sh, nq, i, first[i], want[i])
				}
			}
			// (c) ggml's flash attention
			ref := newAttnGraph(t, &p, GGMLTypeF16, 2, false).run(t, &p)
			worst := 0.0
			for j := 0; j < nq; j++ {
				for h := 0; h < sh.nh; h++ {
					tol := ggmlAttnTol(&p, j, h)
					for d := 0; d < sh.hd; d++ {
						i := (j*sh.nh+h)*sh.hd + d
						if e := math.Abs(float64(first[i]) - float64(ref[i])); !(e <= tol) {
							t.Fatalf("%+v nq=%d (row %d head %d)[%d]: edgellm %g, ggml %g (|diff| %g > tol %g)",
								sh, nq, j, h, d, first[i], ref[i], e, tol)
						} else {
							worst = math.Max(worst, e/tol)
						}
					}
				}
			}
			// (d) every row bitwise its one-row graph
			if nq == EdgellmMaxN {
				t.Logf("%+v: worst |edgellm-ggml| %.3f of the tolerance", sh, worst)
				single = make([][]float32, nq)
				for j := 0; j < nq; j++ {
					pj := p
					pj.nq = 1
					pj.q = p.q[j*sh.nh*sh.hd : (j+1)*sh.nh*sh.hd]
					pj.mask = p.mask[j*sh.nkv : (j+1)*sh.nkv]
					single[j] = newAttnGraph(t, &pj, GGMLTypeF16, 2, true).run(t, &pj)
				}
			}
			for j := 0; j < nq; j++ {
				row := first[j*sh.nh*sh.hd : (j+1)*sh.nh*sh.hd]
				for i, w := range single[EdgellmMaxN-nq+j] {
					if math.Float32bits(row[i]) != math.Float32bits(w) {
						t.Fatalf("%+v nq=%d: row %d [%d] = %g, one-row graph %g", sh, nq, j, i, row[i], w)
					}
				}
			}
		}
	}
}

// TestAttnEdgellmFallsBack: operands the kernel does not take (a Q8_0 or
// Q4_0 cache) build ggml's FLASH_ATTN_EXT; more rows than EdgellmMaxN
// (prefill) still run the kernel.
func TestAttnEdgellmFallsBack(t *testing.T) {
	if !matvec.AttnUsable() {
		t.Skip("no edgellm attention kernel on this CPU")
	}
	rng := rand.New(rand.NewSource(5))
	for _, c := range []struct {
		nq  int
		kv  GGMLType
		own bool
	}{{EdgellmMaxN + 1, GGMLTypeF16, true}, {2, GGMLTypeQ8_0, false}, {2, GGMLTypeQ4_0, false}} {
		p := newAttnProblem(rng, 64, 8, 2, 40, c.nq, 0)
		a := newAttnGraph(t, p, c.kv, 1, true)
		want := [2]int{0, 1}
		if c.own {
			want = [2]int{1, 0}
		}
		if got := [2]int{a.g.CountAttnEdgellm(), a.g.CountOps("FLASH_ATTN_EXT")}; got != want {
			t.Fatalf("n_q %d %s: %d edgellm attention ops and %d FLASH_ATTN_EXT, want %v", c.nq, c.kv, got[0], got[1], want)
		}
	}
}
