package kernels

import "github.com/edgellm/edgellm/host/engine"

// RowBytes is the size in bytes of a KV row of n elements of type t
// (ggml_row_size), e.g. one token's K for one layer.
func RowBytes(t engine.KVType, n int64) (int64, error) {
	gt, _, err := KVGGMLType(t)
	if err != nil {
		return 0, err
	}
	b, err := QuantRowSize(uint32(gt), int(n))
	return int64(b), err
}
