package kernels

/*
#include <stdlib.h>
#include <string.h>
#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

static void edgellm_tp_set_cpu(struct ggml_threadpool_params * p, int i) { p->cpumask[i] = true; }
*/
import "C"

import (
	"errors"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrCompute means ggml_backend_graph_compute did not finish (allocation
// failure or abort); it wraps ErrGGML.
var ErrCompute = errors.New("ggml: graph compute failed")

// MaxThreads is ggml's limit on threads and CPU-mask entries.
const MaxThreads = C.GGML_MAX_N_THREADS

// ThreadpoolParams configures a Threadpool.
type ThreadpoolParams struct {
	NThreads int
	// CPUs pins the pool to these CPU ids (big-core pinning); empty = the
	// inherited affinity. Ids the process may not use (taskset, cgroup
	// cpuset) are dropped; if none is left NewThreadpool fails.
	CPUs []int
	// Strict places thread i on the i-th CPU of the mask (else any of them).
	Strict bool
	// Poll is the busy-wait level between graphs, 0 (sleep) to 100.
	Poll int
}

// Threadpool is a ggml CPU threadpool, reused across graph computations. It
// must outlive every CPUBackend it is attached to (close the backend first).
type Threadpool struct {
	p        *C.struct_ggml_threadpool
	nThreads int
	// masked: the pool has a CPU mask. ggml's worker 0 is the thread that
	// calls compute, and it applies the mask to that thread too; Compute
	// then restores the caller's affinity, or a Go thread would stay pinned
	// to the draft's CPUs (and AllowedCPUs, read on it, would shrink).
	masked bool
}

// NewThreadpool starts a threadpool.
func NewThreadpool(tp ThreadpoolParams) (*Threadpool, error) {
	if tp.NThreads <= 0 || tp.NThreads > MaxThreads {
		return nil, ggmlErr("threadpool: %d threads (want 1-%d)", tp.NThreads, MaxThreads)
	}
	if tp.Poll < 0 || tp.Poll > 100 {
		return nil, ggmlErr("threadpool: poll %d (want 0-100)", tp.Poll)
	}
	cpus, err := allowedMask(tp.CPUs, AllowedCPUs())
	if err != nil {
		return nil, err
	}
	p := C.ggml_threadpool_params_default(C.int(tp.NThreads))
	for _, cpu := range cpus {
		if cpu < 0 || cpu >= MaxThreads {
			return nil, ggmlErr("threadpool: cpu %d out of range 0-%d", cpu, MaxThreads-1)
		}
		C.edgellm_tp_set_cpu(&p, C.int(cpu))
	}
	p.strict_cpu = C.bool(tp.Strict)
	p.poll = C.uint32_t(tp.Poll)
	if len(cpus) > 0 {
		defer keepAffinity()()
	}
	pool := C.ggml_threadpool_new(&p)
	if pool == nil {
		return nil, ggmlErr("ggml_threadpool_new(%d threads) failed", tp.NThreads)
	}
	return &Threadpool{p: pool, nThreads: tp.NThreads, masked: len(cpus) > 0}, nil
}

// NThreads is the pool size.
func (t *Threadpool) NThreads() int { return t.nThreads }

// Close stops the threads. Safe to call twice.
func (t *Threadpool) Close() error {
	if t != nil && t.p != nil {
		C.ggml_threadpool_free(t.p)
		t.p = nil
	}
	return nil
}

// CPUBackend is ggml's CPU backend: it computes graphs with its threadpool.
type CPUBackend struct {
	p     C.ggml_backend_t
	tp    *Threadpool
	sched schedPass
}

// NewCPUBackend creates a CPU backend running on tp (nil: ggml's own threads,
// nThreads of them).
func NewCPUBackend(tp *Threadpool, nThreads int) (*CPUBackend, error) {
	if tp != nil {
		nThreads = tp.nThreads
	}
	if nThreads <= 0 || nThreads > MaxThreads {
		return nil, ggmlErr("cpu backend: %d threads", nThreads)
	}
	b := C.ggml_backend_cpu_init()
	if b == nil {
		return nil, ggmlErr("ggml_backend_cpu_init failed")
	}
	C.ggml_backend_cpu_set_n_threads(b, C.int(nThreads))
	if tp != nil {
		C.ggml_backend_cpu_set_threadpool(b, tp.p)
	}
	return &CPUBackend{p: b, tp: tp}, nil
}

// SetThreadpool switches the backend to another pool (nil: ggml's own
// threads with nThreads).
func (b *CPUBackend) SetThreadpool(tp *Threadpool, nThreads int) {
	if tp != nil {
		nThreads = tp.nThreads
		C.ggml_backend_cpu_set_threadpool(b.p, tp.p)
	} else {
		C.ggml_backend_cpu_set_threadpool(b.p, nil)
	}
	C.ggml_backend_cpu_set_n_threads(b.p, C.int(nThreads))
	b.tp = tp
}

// Close frees the backend (not its threadpool). Safe to call twice.
func (b *CPUBackend) Close() error {
	if b != nil && b.p != nil {
		C.ggml_backend_free(b.p)
		b.p = nil
	}
	return nil
}

// keepAffinity locks the goroutine to its thread and returns the function
// that restores the thread's CPU affinity and unlocks it: ggml applies a
// pool's mask to the calling thread (its worker 0), which must not leave a
// Go thread pinned.
func keepAffinity() func() {
	runtime.LockOSThread()
	var set unix.CPUSet
	ok := unix.SchedGetaffinity(0, &set) == nil
	return func() {
		if ok {
			unix.SchedSetaffinity(0, &set)
		}
		runtime.UnlockOSThread()
	}
}

// Compute runs the graph. Every tensor in it must be allocated.
func (b *CPUBackend) Compute(g *Graph) error {
	b.sched.pass()
	if b.tp != nil && b.tp.masked {
		defer keepAffinity()()
	}
	if st := C.ggml_backend_graph_compute(b.p, g.p); st != C.GGML_STATUS_SUCCESS {
		return ErrCompute
	}
	return nil
}

// BackendBuffer is a ggml backend buffer: memory that tensors are placed in.
type BackendBuffer struct {
	p    C.ggml_backend_buffer_t
	base unsafe.Pointer
	size int64
	huge int64 // bytes advised MADV_HUGEPAGE (repack buffers)
}

// NewBufferFromPtr wraps memory the caller owns (an mmap'd file, the KV
// arena) as a CPU buffer without copying. The memory must stay mapped until
// the buffer is closed; ptr must be 32-byte aligned (mappings are page
// aligned).
func NewBufferFromPtr(ptr unsafe.Pointer, size int64) (*BackendBuffer, error) {
	if ptr == nil || size <= 0 {
		return nil, ggmlErr("buffer from ptr: nil or empty")
	}
	if uintptr(ptr)%32 != 0 {
		return nil, ggmlErr("buffer from ptr: %#x is not 32-byte aligned", uintptr(ptr))
	}
	p := C.ggml_backend_cpu_buffer_from_ptr(ptr, C.size_t(size))
	if p == nil {
		return nil, ggmlErr("ggml_backend_cpu_buffer_from_ptr failed")
	}
	return &BackendBuffer{p: p, base: ptr, size: size}, nil
}

// NewCPUBuffer allocates a host buffer of size bytes owned by ggml.
func NewCPUBuffer(size int64) (*BackendBuffer, error) {
	if size <= 0 {
		return nil, ggmlErr("cpu buffer: size %d", size)
	}
	p := C.ggml_backend_buft_alloc_buffer(C.ggml_backend_cpu_buffer_type(), C.size_t(size))
	if p == nil {
		return nil, ggmlErr("cpu buffer: cannot allocate %d bytes", size)
	}
	return &BackendBuffer{p: p, base: C.ggml_backend_buffer_get_base(p), size: size}, nil
}

// SetWeightsUsage marks the buffer as holding model weights (for ggml's
// scheduler heuristics).
func (b *BackendBuffer) SetWeightsUsage() {
	C.ggml_backend_buffer_set_usage(b.p, C.GGML_BACKEND_BUFFER_USAGE_WEIGHTS)
}

// Size is the buffer size in bytes.
func (b *BackendBuffer) Size() int64 { return b.size }

// Base is the address of the buffer's first byte (to find its pages in
// /proc/self/smaps).
func (b *BackendBuffer) Base() uintptr { return uintptr(b.base) }

// Close frees the buffer (for a pointer buffer, only the wrapper; the memory
// stays the caller's). Tensors placed in it must not be used afterwards.
func (b *BackendBuffer) Close() error {
	if b != nil && b.p != nil {
		C.ggml_backend_buffer_free(b.p)
		b.p = nil
	}
	return nil
}

// Place points tensor t (unallocated, not a view) at offset bytes into the
// buffer, without copying: ggml_backend_tensor_alloc.
func (b *BackendBuffer) Place(t Tensor, offset int64) error {
	if t.p == nil {
		return ggmlErr("place: nil tensor")
	}
	if t.p.data != nil || t.p.buffer != nil || t.p.view_src != nil {
		return ggmlErr("place %q: tensor already allocated or a view", t.Name())
	}
	if offset < 0 || offset+t.Nbytes() > b.size {
		return ggmlErr("place %q: [%d, %d) outside buffer of %d bytes", t.Name(), offset, offset+t.Nbytes(), b.size)
	}
	if st := C.ggml_backend_tensor_alloc(b.p, t.p, unsafe.Add(b.base, offset)); st != C.GGML_STATUS_SUCCESS {
		return ggmlErr("place %q: ggml_backend_tensor_alloc status %d", t.Name(), int(st))
	}
	return nil
}

// Graph is a computation graph living in a GGMLContext.
type Graph struct {
	p *C.struct_ggml_cgraph
}

// NewGraph creates an empty graph for up to maxNodes nodes. The context must
// have been sized for it (NewGGMLContext's maxGraphNodes).
func (c *GGMLContext) NewGraph(maxNodes int) (*Graph, error) {
	g := new(Graph)
	return g, c.InitGraph(g, maxNodes)
}

// InitGraph is NewGraph into g: a graph rebuilt at every context reset
// reuses its Graph value instead of allocating one (decode paths allocate
// nothing per token).
func (c *GGMLContext) InitGraph(g *Graph, maxNodes int) error {
	if maxNodes <= 0 {
		return ggmlErr("graph: %d nodes", maxNodes)
	}
	if c.FreeBytes() < int64(C.ggml_graph_overhead_custom(C.size_t(maxNodes), false)) {
		return ggmlErr("graph: context too small for %d nodes", maxNodes)
	}
	g.p = C.ggml_new_graph_custom(c.p, C.size_t(maxNodes), false)
	return nil
}

// Expand adds t and everything it depends on to the graph.
func (g *Graph) Expand(t Tensor) error {
	if t.p == nil {
		return ggmlErr("graph: expand nil tensor")
	}
	C.ggml_build_forward_expand(g.p, t.p)
	return nil
}

// NNodes is the number of compute nodes.
func (g *Graph) NNodes() int { return int(C.ggml_graph_n_nodes(g.p)) }

// GraphOverhead is the metadata size of a graph of maxNodes nodes.
func GraphOverhead(maxNodes int) int64 {
	return int64(C.ggml_graph_overhead_custom(C.size_t(maxNodes), false))
}

// Gallocr is ggml's graph allocator for activations: it plans tensor
// lifetimes and reuses memory after a tensor's last use, in one CPU buffer.
type Gallocr struct {
	p C.ggml_gallocr_t
}

// NewGallocr creates a graph allocator over host memory.
func NewGallocr() (*Gallocr, error) {
	p := C.ggml_gallocr_new(C.ggml_backend_cpu_buffer_type())
	if p == nil {
		return nil, ggmlErr("ggml_gallocr_new failed")
	}
	return &Gallocr{p: p}, nil
}

// Reserve sizes the buffer for the worst-case graph so later Alloc calls
// never grow it.
func (a *Gallocr) Reserve(g *Graph) error {
	if !C.ggml_gallocr_reserve(a.p, g.p) {
		return ggmlErr("gallocr: reserve failed")
	}
	return nil
}

// Alloc assigns memory to every unallocated tensor of the graph.
func (a *Gallocr) Alloc(g *Graph) error {
	if !C.ggml_gallocr_alloc_graph(a.p, g.p) {
		return ggmlErr("gallocr: alloc failed")
	}
	return nil
}

// BufferSize is the size of the activation buffer.
func (a *Gallocr) BufferSize() int64 { return int64(C.ggml_gallocr_get_buffer_size(a.p, 0)) }

// Close frees the allocator and its buffer. Safe to call twice.
func (a *Gallocr) Close() error {
	if a != nil && a.p != nil {
		C.ggml_gallocr_free(a.p)
		a.p = nil
	}
	return nil
}
