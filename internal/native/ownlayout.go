package native

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/edgellm/edgellm/kernels"
)

// OwnLayoutStats is what edgellm's own weight layout cost at load
// (Options.Kernels "edgellm" without Repack, on a CPU that runs the q4x4
// kernel: every plain Q4_0 weight matrix of every set gets an interleaved
// copy the decode and verify matmuls read; kernels.MulMatEdgellmQ4x4).
type OwnLayoutStats struct {
	// Tensors is how many matrices were copied; Bytes the anonymous memory
	// the copies occupy (like the repack buffer, it is not reclaimable; as
	// with repack, the mapped originals are dropped from the process: every
	// batch size, prefill included, reads the copies).
	Tensors int   `json:"tensors"`
	Bytes   int64 `json:"bytes"`
	// HugePageBytes is the part advised for transparent huge pages
	// (kernels.RepackHugePages switches it as it does repack's).
	HugePageBytes int64 `json:"huge_page_bytes"`
}

// ownLayouts holds the q4x4 copies of all weight sets, found by the mapped
// tensor's data pointer (a set's tensors are fixed for its life; tier and
// repack-unit swaps only choose among them).
type ownLayouts struct {
	mems  [][]byte
	byPtr map[unsafe.Pointer]*kernels.EdgellmQ4x4
	stats OwnLayoutStats
}

// ownMatrices lists a set's weight matrices the graph multiplies by.
func ownMatrices(w *Weights) []kernels.Tensor {
	var out []kernels.Tensor
	for i := range w.Layers {
		l := &w.Layers[i]
		out = append(out, l.Wq, l.Wk, l.Wv, l.Wo, l.WGate, l.WUp, l.WDown, l.Wqkv)
	}
	return append(out, w.Output)
}

// newOwnLayouts makes the q4x4 copies of sets' plain Q4_0 matrices; nil
// (and no error) when the CPU does not run the q4x4 kernel or nothing is
// eligible.
func newOwnLayouts(sets []*Weights) (*ownLayouts, error) {
	if !kernels.EdgellmQ4x4Available() {
		return nil, nil
	}
	o := &ownLayouts{byPtr: make(map[unsafe.Pointer]*kernels.EdgellmQ4x4)}
	ok := false
	defer func() {
		if !ok {
			o.Close()
		}
	}()
	for _, w := range sets {
		var ts []kernels.Tensor
		var size int64
		for _, t := range ownMatrices(w) {
			if t.Nil() || o.byPtr[t.Data()] != nil || kernels.EdgellmQ4x4Size(t) == 0 {
				continue
			}
			dup := false
			for _, u := range ts {
				dup = dup || u.Data() == t.Data()
			}
			if !dup {
				ts = append(ts, t)
				size += kernels.EdgellmQ4x4Size(t) // a multiple of 64
			}
		}
		if size == 0 {
			continue
		}
		mem, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return nil, fmt.Errorf("%s: edgellm layout: mmap %d bytes: %w", w.Path, size, err)
		}
		o.mems = append(o.mems, mem)
		if kernels.RepackHugePages() && unix.Madvise(mem, unix.MADV_HUGEPAGE) == nil {
			o.stats.HugePageBytes += size
		}
		// Pack on GOMAXPROCS goroutines, matrix by matrix (the copy reads
		// the whole mapped file: load time).
		offs := make([]int64, len(ts))
		for i := 1; i < len(ts); i++ {
			offs[i] = offs[i-1] + kernels.EdgellmQ4x4Size(ts[i-1])
		}
		ps := make([]*kernels.EdgellmQ4x4, len(ts))
		errs := make([]error, len(ts))
		var wg sync.WaitGroup
		workers := min(runtime.GOMAXPROCS(0), len(ts))
		for g := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < len(ts); i += workers {
					ps[i], errs[i] = kernels.NewEdgellmQ4x4(ts[i], unsafe.Pointer(&mem[offs[i]]))
					// Every batch size reads the copy (prefill included), so the
					// mapped original is dropped from the process as repack
					// drops its sources, matrix by matrix: clean page cache,
					// reclaimable, not counted twice in the RSS (a stray read
					// faults it back in from the file). The tied embedding
					// stays: get_rows reads it.
					if errs[i] == nil && (w.TokEmbd.Nil() || ts[i].Data() != w.TokEmbd.Data()) {
						w.dropMapped(ts[i].Data(), ts[i].Nbytes())
					}
				}
			}()
		}
		wg.Wait()
		for i, t := range ts {
			if ps[i] != nil {
				o.byPtr[t.Data()] = ps[i]
			}
		}
		for _, err := range errs {
			if err != nil {
				return nil, fmt.Errorf("%s: %w", w.Path, err)
			}
		}
		o.stats.Tensors += len(ts)
		o.stats.Bytes += size
	}
	if len(o.byPtr) == 0 {
		return nil, nil
	}
	ok = true
	return o, nil
}

// dropMapped drops the mapping's pages lying wholly inside the n bytes at
// p (a tensor in w's mapping) from the process (Weights.dropSource).
func (w *Weights) dropMapped(p unsafe.Pointer, n int64) {
	if len(w.mapping) == 0 {
		return
	}
	base := uintptr(unsafe.Pointer(&w.mapping[0]))
	if off := int64(uintptr(p) - base); uintptr(p) >= base && off+n <= int64(len(w.mapping)) {
		w.dropSource(off, n)
	}
}

// lookup is t's q4x4 copy, or nil (o may be nil).
func (o *ownLayouts) lookup(t kernels.Tensor) *kernels.EdgellmQ4x4 {
	if o == nil || t.Nil() {
		return nil
	}
	return o.byPtr[t.Data()]
}

// Close frees the descriptors and unmaps the copies. Graphs using them
// must be gone (sessions closed).
func (o *ownLayouts) Close() {
	if o == nil {
		return
	}
	for _, p := range o.byPtr {
		p.Free()
	}
	o.byPtr = nil
	for _, m := range o.mems {
		_ = unix.Munmap(m)
	}
	o.mems = nil
}
