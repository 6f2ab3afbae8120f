package kernels

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// TestQuantizeRowsRoundTrip quantizes Gaussian rows, dequantizes them with
// ggml's to_float (DequantizeRow) and checks the relative RMS error per type.
func TestQuantizeRowsRoundTrip(t *testing.T) {
	tests := []struct {
		typ    GGMLType
		maxErr float64 // relative RMS error bound
	}{
		{GGMLTypeF32, 0},
		{GGMLTypeF16, 1e-3},
		{GGMLTypeBF16, 8e-3},
		{GGMLTypeQ8_0, 0.01},
		{GGMLTypeQ6_K, 0.03},
		{GGMLTypeQ5_0, 0.06},
		{GGMLTypeQ5_K, 0.06},
		{GGMLTypeQ4_0, 0.12},
		{GGMLTypeQ4_K, 0.12},
		{GGMLTypeQ3_K, 0.25},
		{GGMLTypeQ2_K, 0.45},
	}
	const nrows, nPerRow = 8, 512
	rng := rand.New(rand.NewPCG(7, 7))
	src := make([]float32, nrows*nPerRow)
	for i := range src {
		src[i] = float32(rng.NormFloat64())
	}
	for _, tc := range tests {
		t.Run(tc.typ.String(), func(t *testing.T) {
			rs, err := QuantRowSize(uint32(tc.typ), nPerRow)
			if err != nil || int64(rs) != tc.typ.RowSize(nPerRow) {
				t.Fatalf("QuantRowSize = %d, %v", rs, err)
			}
			dst := make([]byte, nrows*rs)
			n, err := QuantizeRows(uint32(tc.typ), src, dst, nrows, nPerRow)
			if err != nil || n != len(dst) {
				t.Fatalf("QuantizeRows = %d, %v", n, err)
			}
			back := make([]float32, nPerRow)
			var num, den float64
			for r := 0; r < nrows; r++ {
				if err := DequantizeRow(tc.typ, dst[r*rs:(r+1)*rs], back); err != nil {
					t.Fatal(err)
				}
				for i, v := range back {
					d := float64(v - src[r*nPerRow+i])
					num += d * d
					den += float64(src[r*nPerRow+i]) * float64(src[r*nPerRow+i])
				}
			}
			rel := math.Sqrt(num / den)
			if rel > tc.maxErr || (tc.maxErr > 0 && rel == 0) {
				t.Errorf("relative RMS error %.4g, want <= %g", rel, tc.maxErr)
			}
			t.Logf("%s: %d bytes/row, rel RMS error %.4g", tc.typ, rs, rel)
		})
	}
}

func TestQuantizeRowsRejects(t *testing.T) {
	src := make([]float32, 64)
	dst := make([]byte, 64)
	tests := []struct {
		name          string
		typ           uint32
		src           []float32
		dst           []byte
		nrows, perRow int
	}{
		{"removed type 4", 4, src, dst, 1, 32},
		{"out of range type", 1000, src, dst, 1, 32},
		{"needs imatrix IQ2_XXS", 16, src, dst, 1, 256},
		{"I32 not quantizable", uint32(GGMLTypeI32), src, dst, 1, 32},
		{"row not multiple of block", uint32(GGMLTypeQ8_0), src, dst, 1, 33},
		{"zero rows", uint32(GGMLTypeQ8_0), src, dst, 0, 32},
		{"src short", uint32(GGMLTypeQ8_0), src, dst, 3, 32},
		{"dst short", uint32(GGMLTypeQ8_0), src, dst[:40], 2, 32},
		{"empty", uint32(GGMLTypeQ4_0), nil, nil, 1, 32},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := QuantizeRows(tc.typ, tc.src, tc.dst, tc.nrows, tc.perRow); !errors.Is(err, ErrQuantizeArgs) {
				t.Errorf("err = %v", err)
			}
		})
	}
}
