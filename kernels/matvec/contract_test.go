package matvec

import (
	"math"
	"math/big"
	"math/rand"
	"testing"
)

// fmaf32 is C's fmaf: a*b+c rounded once to float32 (exactly, through
// big.Float: float64 arithmetic would round twice).
func fmaf32(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(512).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetFloat64(float64(c)))
	f, _ := x.Float32()
	return f
}

// contractModel computes output (r, j) of the contract c in Go, from the
// blocks' bytes and the definition in doc.go alone: lanes of c consecutive
// exact products, one f32 scale product per block, one fmaf per lane and
// block in order, then the contract's fixed tree (C4:
// ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)); C8: (a0+a2) + (a1+a3)).
func contractModel(c Contract, ty Type, w []byte, r int, act []byte, j, k int) float32 {
	nb, bs := k/QK, ty.BlockBytes()
	lanes := QK / int(c)
	acc := make([]float32, lanes)
	for b := 0; b < nb; b++ {
		wb := w[(r*nb+b)*bs:]
		ab := act[(j*nb+b)*ActBlockBytes:]
		var wq [QK]int32
		for i := 0; i < QK; i++ {
			if ty == Q8_0 {
				wq[i] = int32(int8(wb[2+i]))
			} else if i < 16 {
				wq[i] = int32(wb[2+i]&0x0f) - 8
			} else {
				wq[i] = int32(wb[2+i-16]>>4) - 8
			}
		}
		s := float32(float32(f16(uint16(wb[0])|uint16(wb[1])<<8)) * float32(f16(uint16(ab[0])|uint16(ab[1])<<8)))
		for l := 0; l < lanes; l++ {
			var sum int32
			for i := l * int(c); i < (l+1)*int(c); i++ {
				sum += wq[i] * int32(int8(ab[2+i]))
			}
			acc[l] = fmaf32(float32(sum), s, acc[l])
		}
	}
	if c == C8 {
		return float32(acc[0]+acc[2]) + float32(acc[1]+acc[3])
	}
	return float32(float32(acc[0]+acc[4])+float32(acc[2]+acc[6])) + float32(float32(acc[1]+acc[5])+float32(acc[3]+acc[7]))
}

// TestContracts: every available implementation returns, bitwise, the Go
// model of its contract (Impl.Contract), for both weight types and every
// n; and the two contracts' models differ on these inputs, so a kernel
// that followed the other contract could not pass.
func TestContracts(t *testing.T) {
	rng := rand.New(rand.NewSource(8))
	for _, ty := range []Type{Q8_0, Q4_0} {
		for _, sh := range []struct{ rows, k int }{{5, 64}, {9, 256}} {
			w, _ := weights(rng, ty, sh.rows, sh.k)
			a, _ := NewActivations(sh.k)
			differ := 0
			for n := 1; n <= MaxN; n++ {
				_ = a.Set(activations(rng, n, sh.k))
				model := map[Contract][]float32{}
				for _, c := range []Contract{C4, C8} {
					model[c] = make([]float32, n*sh.rows)
					for j := 0; j < n; j++ {
						for r := 0; r < sh.rows; r++ {
							model[c][j*sh.rows+r] = contractModel(c, ty, w, r, a.Bytes(), j, sh.k)
						}
					}
				}
				for i := range model[C4] {
					if math.Float32bits(model[C4][i]) != math.Float32bits(model[C8][i]) {
						differ++
					}
				}
				for _, impl := range Available() {
					y := make([]float32, n*sh.rows)
					if err := Mul(impl, ty, w, sh.rows, a, y, 1); err != nil {
						t.Fatal(err)
					}
					want := model[impl.Contract()]
					for i := range y {
						if math.Float32bits(y[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%v %v (%v) %dx%d n=%d row %d act %d: %g, the %v model %g",
								ty, impl, impl.Contract(), sh.rows, sh.k, n, i%sh.rows, i/sh.rows, y[i], impl.Contract(), want[i])
						}
					}
				}
			}
			if differ == 0 {
				t.Fatalf("%v %dx%d: C4 and C8 gave the same bits everywhere: the inputs do not tell the contracts apart", ty, sh.rows, sh.k)
			}
			t.Logf("%v %dx%d: C4 and C8 differ on %d outputs", ty, sh.rows, sh.k, differ)
		}
	}
}

// TestReference: each implementation's contract and reference.
func TestReference(t *testing.T) {
	for _, tc := range []struct {
		impl Impl
		c    Contract
		ref  Impl
	}{
		{Scalar, C4, Scalar}, {AVX2, C4, Scalar}, {AVX512VNNI, C4, Scalar}, {NEONDot, C4, Scalar},
		{Scalar8, C8, Scalar8}, {NEONI8MM, C8, Scalar8},
	} {
		if c, ref := tc.impl.Contract(), tc.impl.Reference(); c != tc.c || ref != tc.ref {
			t.Errorf("%v: contract %v reference %v, want %v %v", tc.impl, c, ref, tc.c, tc.ref)
		}
	}
}
