package kernels

/*
#include <stdint.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include "ggml.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

typedef struct {
	int64_t *ts;
	int n, cap;
} edgellm_node_timer;

static int64_t edgellm_now_ns(void) {
	struct timespec s;
	clock_gettime(CLOCK_MONOTONIC, &s);
	return (int64_t)s.tv_sec * 1000000000 + s.tv_nsec;
}

// Called by ggml-cpu's thread 0 after each node (ggml_graph_compute_thread
// polls the abort callback there); never aborts.
static bool edgellm_node_timer_cb(void *p) {
	edgellm_node_timer *t = p;
	if (t->n < t->cap) t->ts[t->n] = edgellm_now_ns();
	t->n++;
	return false;
}

// Prefix counts of the nodes ggml-cpu computes (and stamps): it skips the
// empty ops (none, reshape, view, permute, transpose).
static void edgellm_graph_computed_prefix(struct ggml_cgraph *g, int32_t *dst) {
	int n = ggml_graph_n_nodes(g), c = 0;
	dst[0] = 0;
	for (int i = 0; i < n; i++) {
		enum ggml_op op = ggml_graph_node(g, i)->op;
		if (op != GGML_OP_NONE && op != GGML_OP_RESHAPE && op != GGML_OP_VIEW &&
		    op != GGML_OP_PERMUTE && op != GGML_OP_TRANSPOSE) c++;
		dst[i + 1] = c;
	}
}

static void edgellm_node_timer_set(ggml_backend_t b, edgellm_node_timer *t) {
	ggml_backend_cpu_set_abort_callback(b, t ? edgellm_node_timer_cb : NULL, t);
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// NodeTimer records, for one graph compute, the time at which ggml-cpu's
// first thread finished each node (CLOCK_MONOTONIC, ns). It uses the CPU
// backend's abort callback, which thread 0 calls after every node, and is
// installed only for a ComputeTimed call: a plain Compute costs nothing
// extra. The memory is C-allocated; Close frees it.
type NodeTimer struct {
	p *C.edgellm_node_timer
}

// NewNodeTimer holds timestamps for graphs of up to maxNodes nodes.
func NewNodeTimer(maxNodes int) (*NodeTimer, error) {
	if maxNodes <= 0 {
		return nil, fmt.Errorf("node timer: %d nodes", maxNodes)
	}
	p := (*C.edgellm_node_timer)(C.calloc(1, C.size_t(unsafe.Sizeof(C.edgellm_node_timer{}))))
	ts := (*C.int64_t)(C.calloc(C.size_t(maxNodes), 8))
	if p == nil || ts == nil {
		C.free(unsafe.Pointer(p))
		C.free(unsafe.Pointer(ts))
		return nil, fmt.Errorf("node timer: out of memory")
	}
	p.ts, p.cap = ts, C.int(maxNodes)
	return &NodeTimer{p: p}, nil
}

// Close frees the timer. Safe to call twice.
func (t *NodeTimer) Close() {
	if t == nil || t.p == nil {
		return
	}
	C.free(unsafe.Pointer(t.p.ts))
	C.free(unsafe.Pointer(t.p))
	t.p = nil
}

// ComputeTimed runs the graph like Compute and returns the start time and
// the finish time of each computed node (ns, CLOCK_MONOTONIC): ggml-cpu
// skips empty ops (views, reshapes), so entry k is the k-th computed node;
// Graph.ComputedPrefix maps node indices to entries. An entry is when
// thread 0 left the node, so entry k − entry k−1 includes the barrier wait
// of the node before. The slice aliases the timer's memory until the next
// ComputeTimed.
func (b *CPUBackend) ComputeTimed(g *Graph, t *NodeTimer) (start int64, nodes []int64, err error) {
	t.p.n = 0
	C.edgellm_node_timer_set(b.p, t.p)
	start = int64(C.edgellm_now_ns())
	err = b.Compute(g)
	C.edgellm_node_timer_set(b.p, nil)
	n := min(int(t.p.n), int(t.p.cap))
	return start, unsafe.Slice((*int64)(unsafe.Pointer(t.p.ts)), n), err
}

// MonotonicNS is CLOCK_MONOTONIC in ns, the clock of ComputeTimed.
func MonotonicNS() int64 { return int64(C.edgellm_now_ns()) }

// ComputedPrefix fills dst[i] (len NNodes()+1, reused when it has room) with
// how many of the first i nodes ggml-cpu computes (the others are empty
// ops it skips): the index into ComputeTimed's stamps.
func (g *Graph) ComputedPrefix(dst []int32) []int32 {
	n := g.NNodes() + 1
	if cap(dst) < n {
		dst = make([]int32, n)
	}
	dst = dst[:n]
	C.edgellm_graph_computed_prefix(g.p, (*C.int32_t)(unsafe.Pointer(&dst[0])))
	return dst
}
