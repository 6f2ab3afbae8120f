package kernels

import "fmt"

// RowBytes is the size in bytes of a KV row of n elements of type t
// (ggml_row_size), e.g. one token's K for one layer.
func RowBytes(t KVType, n int64) (int64, error) {
	gt, _, ok := t.ggml()
	if !ok {
		return 0, fmt.Errorf("%w: KV type %q", ErrInvalidArg, t)
	}
	b, err := QuantRowSize(uint32(gt), int(n))
	return int64(b), err
}
