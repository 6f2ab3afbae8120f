package llamacpp

import (
	"strings"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/kernels"
)

// repackCost is what llama.cpp's use_extra_bufts costs for the model in f:
// the tensors and bytes it copies into the CPU_REPACK buffer. llama.cpp does
// not export its buffer sizes through the C API, so this applies its rule to
// the header: a matrix used by a mul_mat (every 2-D weight but the token
// embedding, which get_rows reads; plus a copy of the embedding as the output
// head when the model ties them) goes to CPU_REPACK when ggml accepts its
// type and shape (kernels.RepackEligible, the test llama.cpp makes).
// Alignment padding (32 bytes a tensor) is not counted. Architectures with
// other 2-D get_rows tables (position embeddings) would be over-counted; the
// native engine's llama models have none.
func repackCost(f *gguf.File) (tensors int, bytes int64) {
	add := func(t *gguf.TensorInfo) {
		if len(t.Dims) == 2 && kernels.RepackEligible(kernels.GGMLType(t.Type), t.Dims[0], t.Dims[1]) {
			tensors++
			bytes += t.Size
		}
	}
	_, hasOutput := f.Tensor("output.weight")
	for i := range f.Tensors {
		t := &f.Tensors[i]
		switch {
		case t.Name == "token_embd.weight":
			if !hasOutput {
				add(t)
			}
		case strings.HasSuffix(t.Name, ".weight"):
			add(t)
		}
	}
	return tensors, bytes
}
