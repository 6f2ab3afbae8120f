package kernels

import "testing"

// A 128-wide KV row (e.g. one head of dim 128): Q8_0 is 8.5 and Q4_0 4.5 bits
// per value, so Q4_0 is 0.28 × F16.
func TestRowBytes(t *testing.T) {
	tests := []struct {
		t    KVType
		n    int64
		want int64
	}{
		{KVF16, 128, 256}, {KVF32, 128, 512}, {KVQ8_0, 128, 136}, {KVQ4_0, 128, 72},
	}
	for _, tt := range tests {
		if got, err := RowBytes(tt.t, tt.n); err != nil || got != tt.want {
			t.Errorf("RowBytes(%s, %d) = %d, %v; want %d", tt.t, tt.n, got, err, tt.want)
		}
	}
	if _, err := RowBytes(KVQ4_0, 8); err == nil {
		t.Error("Q4_0 row of 8: want error (not a multiple of 32)")
	}
	if _, err := RowBytes("q3", 128); err == nil {
		t.Error("unknown type: want error")
	}
}
