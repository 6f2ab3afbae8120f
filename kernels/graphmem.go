package kernels

/*
#include "ggml.h"
*/
import "C"

// GraphMemory is what a graph's intermediate tensors (activations) need, by
// two accounts that bracket ggml's graph allocator:
//
//   - KeepAll: every intermediate tensor its own allocation for the whole
//     pass ("keep everything"), the sum of their ggml_nbytes;
//   - PeakLive: the most bytes live at once when each tensor is freed right
//     after its last consumer, walking the nodes in execution order (the
//     lower bound an allocator without in-place reuse can reach; ggml's can
//     go below it where an operation writes over a dead input).
//
// An intermediate is a tensor without data at build time (weights and KV
// already point into their buffers) that is not a view; a view's bytes
// belong to the tensor it views, and a use of the view is a use of it.
// Inputs (tokens, positions, masks) count as live from the first node;
// outputs (ggml_set_output) until the last. Alignment padding is not
// counted.
type GraphMemory struct {
	KeepAll, PeakLive int64
	Tensors           int // intermediate tensors, inputs included
}

// Memory accounts g's intermediates. Call it after the graph is built and
// before an allocator assigns memory (Gallocr.Reserve or Alloc): it tells
// intermediates from allocated tensors by their data pointer.
func (g *Graph) Memory() GraphMemory {
	n := int(C.ggml_graph_n_nodes(g.p))
	type life struct {
		size        int64
		birth, last int
	}
	lives := map[*C.struct_ggml_tensor]*life{}
	root := func(t *C.struct_ggml_tensor) *C.struct_ggml_tensor {
		for t.view_src != nil {
			t = t.view_src
		}
		return t
	}
	// use records that node i reads (or is) t.
	use := func(t *C.struct_ggml_tensor, i int, birth int) {
		r := root(t)
		if r.data != nil {
			return // weights, KV: not activations
		}
		l, ok := lives[r]
		if !ok {
			l = &life{size: int64(C.ggml_nbytes(r)), birth: birth, last: i}
			lives[r] = l
		}
		l.last = max(l.last, i)
		if r.flags&C.GGML_TENSOR_FLAG_OUTPUT != 0 {
			l.last = n
		}
	}
	for i := range n {
		node := C.ggml_graph_node(g.p, C.int(i))
		for _, src := range node.src {
			if src != nil {
				use(src, i, 0) // first seen as an operand: an input, live from the start
			}
		}
		use(node, i, i)
	}
	// Sweep: +size at birth, -size after last use.
	delta := make([]int64, n+2)
	var m GraphMemory
	for _, l := range lives {
		m.KeepAll += l.size
		m.Tensors++
		delta[l.birth] += l.size
		delta[l.last+1] -= l.size
	}
	var live int64
	for _, d := range delta {
		live += d
		m.PeakLive = max(m.PeakLive, live)
	}
	return m
}
