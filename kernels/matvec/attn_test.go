package matvec

import (
	"math"
	"math/rand"
	"testing"
)

const (
	f16NegInf = 0xfc00
	attnU     = 1.0 / (1 << 24) // f32 unit roundoff
)

// randHalf is random half bits of magnitude in [2^-4, 2) (and some zeros).
func randHalf(rng *rand.Rand) uint16 {
	if rng.Intn(32) == 0 {
		return 0
	}
	return uint16(rng.Intn(2))<<15 | uint16(rng.Intn(5)+11)<<10 | uint16(rng.Intn(1024))
}

// attnCase is one attention problem: q, K, V, mask as the kernel takes them.
type attnCase struct {
	s       AttnShape
	q       []float32
	k, v    []uint16
	mask    []uint16
	holes   bool // mask rows have -inf holes
	window  int  // > 0: positions older than window before the row are masked
	fullRow int  // >= 0: this row is masked entirely
}

// newAttnCase makes random q, K, V and a causal mask: row j sees positions
// up to nkv-nq+j, minus holes and outside the window.
func newAttnCase(rng *rand.Rand, s AttnShape, holes bool, window, fullRow int) *attnCase {
	c := &attnCase{s: s, holes: holes, window: window, fullRow: fullRow}
	c.q = make([]float32, s.NQ*s.NHead*s.HD)
	for i := range c.q {
		c.q[i] = float32(rng.NormFloat64() * 1.5)
	}
	n := s.NKV * s.NHeadKV * s.HD
	c.k, c.v = make([]uint16, n), make([]uint16, n)
	for i := range c.k {
		c.k[i], c.v[i] = randHalf(rng), randHalf(rng)
	}
	c.mask = make([]uint16, s.NQ*s.NKV)
	for j := 0; j < s.NQ; j++ {
		last := s.NKV - s.NQ + j
		for p := 0; p < s.NKV; p++ {
			if p > last || (holes && p%7 == 3 && p != last) || (window > 0 && p <= last-window) || j == fullRow {
				c.mask[j*s.NKV+p] = f16NegInf
			}
		}
	}
	return c
}

// row is the one-row problem of row j (its q rows and mask row).
func (c *attnCase) row(j int) *attnCase {
	s := c.s
	s.NQ = 1
	r := *c
	r.s = s
	r.q = c.q[j*c.s.NHead*c.s.HD : (j+1)*c.s.NHead*c.s.HD]
	r.mask = c.mask[j*c.s.NKV : (j+1)*c.s.NKV]
	return &r
}

func (c *attnCase) run(t testing.TB, impl Impl, threads int) []float32 {
	t.Helper()
	out := make([]float32, c.s.NQ*c.s.NHead*c.s.HD)
	for i := range out {
		out[i] = float32(math.NaN()) // every element must be written
	}
	if err := Attn(impl, c.s, c.q, c.k, c.v, c.mask, out, threads); err != nil {
		t.Fatal(err)
	}
	return out
}

// ref is the float64 attention of (row j, head h) and the contract's error
// bound for it (see TestAttnFloat64).
func (c *attnCase) ref(j, h int) (out []float64, bound float64) {
	s := c.s
	g := h / (s.NHead / s.NHeadKV)
	q := c.q[(j*s.NHead+h)*s.HD:]
	sc := make([]float64, s.NKV)
	M, maxAbsQK := math.Inf(-1), 0.0
	for p := 0; p < s.NKV; p++ {
		if c.mask[j*s.NKV+p] == f16NegInf {
			sc[p] = math.Inf(-1)
			continue
		}
		kr := c.k[(p*s.NHeadKV+g)*s.HD:]
		dot, abs := 0.0, 0.0
		for i := 0; i < s.HD; i++ {
			dot += float64(q[i]) * f16(kr[i])
			abs += math.Abs(float64(q[i]) * f16(kr[i]))
		}
		x := dot * float64(s.Scale)
		if s.Softcap != 0 {
			x = float64(s.Softcap) * math.Tanh(dot*float64(s.Scale)/float64(s.Softcap))
		}
		sc[p] = x
		M = math.Max(M, x)
		maxAbsQK = math.Max(maxAbsQK, abs*float64(s.Scale))
	}
	out = make([]float64, s.HD)
	if math.IsInf(M, -1) {
		return out, 0
	}
	S, maxV := 0.0, 0.0
	for p := 0; p < s.NKV; p++ {
		if math.IsInf(sc[p], -1) {
			continue
		}
		w := math.Exp(sc[p] - M)
		S += w
		vr := c.v[(p*s.NHeadKV+g)*s.HD:]
		for d := 0; d < s.HD; d++ {
			out[d] += w * f16(vr[d])
			maxV = math.Max(maxV, math.Abs(f16(vr[d])))
		}
	}
	for d := range out {
		out[d] /= S
	}
	// The bound (u = 2^-24): a score's dot has hd/16 terms per lane and a
	// 4-level fold, then * scale (and a tanhf, ~2u, and its scale /cap):
	// |ds| <= 2*(hd/16+6)*u*sum|q_i k_i|*scale; softmax of perturbed
	// scores moves out by <= 2*max|v|*(|ds|+|dM|+e_exp), e_exp <= 4u (the
	// polynomial and 2^n); V's sum of n_kv fmas per element, S's
	// n_kv/16+4-term lanes, 1/S and the product: (n_kv + n_kv/16 + 8)*u.
	ds := 2 * float64(s.HD/16+6) * attnU * maxAbsQK
	bound = maxV * (2*(2*ds+4*attnU) + float64(s.NKV+s.NKV/16+8)*attnU)
	return out, bound
}

func attnImpls() []Impl {
	var out []Impl
	for _, i := range Available() {
		if i == Scalar || i == AVX2 || i == AVX512VNNI { // the others run attn.c's scalar path
			out = append(out, i)
		}
	}
	return out
}

func attnShapes() []AttnShape {
	var out []AttnShape
	for _, hd := range []int{64, 128, 40, 8} {
		for _, g := range []int{1, 4} {
			out = append(out, AttnShape{HD: hd, NQ: AttnMaxN, NHead: 2 * g, NHeadKV: 2, NKV: 77 + hd,
				Scale: float32(1 / math.Sqrt(float64(hd)))})
		}
	}
	out = append(out, AttnShape{HD: 64, NQ: AttnMaxN, NHead: 8, NHeadKV: 2, NKV: 50, Scale: 0.125, Softcap: 3})
	return out
}

// TestAttnBatchInvariant: the #31 point 2 contract. Every row of an n_q-row
// call (n_q = 1..9, threads 1..4, every implementation) is bitwise the
// one-row single-thread call on that row, masks with holes and a window.
func TestAttnBatchInvariant(t *testing.T) {
	rng := rand.New(rand.NewSource(31))
	for _, s := range attnShapes() {
		for _, mk := range []struct {
			holes  bool
			window int
		}{{false, 0}, {true, 0}, {true, 20}} {
			full := newAttnCase(rng, s, mk.holes, mk.window, 4)
			for _, impl := range attnImpls() {
				single := make([][]float32, s.NQ)
				for j := range single {
					single[j] = full.row(j).run(t, impl, 1)
				}
				for nq := 1; nq <= s.NQ; nq++ {
					for threads := 1; threads <= 4; threads++ {
						// rows 9-nq .. 8: the last rows, as a verify batch
						c := *full
						c.s.NQ = nq
						j0 := s.NQ - nq
						c.q = full.q[j0*s.NHead*s.HD:]
						c.mask = full.mask[j0*s.NKV:]
						got := c.run(t, impl, threads)
						for j := 0; j < nq; j++ {
							want := single[j0+j]
							for i, w := range want {
								g := got[j*s.NHead*s.HD+i]
								if math.Float32bits(g) != math.Float32bits(w) {
									t.Fatalf("%+v %+v %v nq=%d threads=%d: row %d [%d] = %g, one-row call %g",
										s, mk, impl, nq, threads, j0+j, i, g, w)
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestAttnImplsAgree: scalar, AVX2 and AVX-512 return the same bits.
func TestAttnImplsAgree(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	impls := attnImpls()
	if len(impls) < 2 {
		t.Skip("only", impls)
	}
	for _, s := range attnShapes() {
		c := newAttnCase(rng, s, true, 30, -1)
		want := c.run(t, Scalar, 1)
		for _, impl := range impls[1:] {
			got := c.run(t, impl, 2)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%+v: %v [%d] = %g, scalar %g", s, impl, i, got[i], want[i])
				}
			}
		}
	}
}

// TestAttnFloat64: within the bound derived in ref of the float64
// attention, masked positions (holes, window, a fully masked row: 0, as
// ggml) contributing nothing, GQA heads mapped as ggml maps them.
func TestAttnFloat64(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for _, s := range attnShapes() {
		c := newAttnCase(rng, s, true, 40, 2)
		// garbage where the mask says -inf: it must never be read
		for p := 0; p < s.NKV; p++ {
			if p%7 == 3 && p < s.NKV-s.NQ {
				for i := 0; i < s.NHeadKV*s.HD; i++ {
					c.k[p*s.NHeadKV*s.HD+i], c.v[p*s.NHeadKV*s.HD+i] = 0x7e00, 0x7c00 // NaN, +inf
				}
			}
		}
		for _, impl := range attnImpls() {
			got := c.run(t, impl, 3)
			worst := 0.0
			for j := 0; j < s.NQ; j++ {
				for h := 0; h < s.NHead; h++ {
					want, bound := c.ref(j, h)
					for d, w := range want {
						g := float64(got[(j*s.NHead+h)*s.HD+d])
						if e := math.Abs(g - w); !(e <= bound) {
							t.Fatalf("%+v %v (row %d, head %d)[%d] = %g, float64 %g (err %g > bound %g)",
								s, impl, j, h, d, g, w, e, bound)
						} else if bound > 0 {
							worst = math.Max(worst, e/bound)
						}
					}
				}
			}
			t.Logf("%+v %v: worst error %.3f of the bound", s, impl, worst)
		}
	}
}

func TestAttnArgs(t *testing.T) {
	s := AttnShape{HD: 16, NQ: 1, NHead: 3, NHeadKV: 2, NKV: 4}
	err := Attn(Scalar, s, make([]float32, 48), make([]uint16, 128), make([]uint16, 128), nil, make([]float32, 48), 1)
	if err == nil {
		t.Fatal("n_head not a multiple of n_head_kv accepted")
	}
}
