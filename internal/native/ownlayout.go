package native

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/edgellm/edgellm/kernels"
)

// edgellm's own weight layout as repack units. With Options.Kernels
// "edgellm" on a CPU that runs the q4x4 kernel (kernels.EdgellmQ4x4Available),
// q4x4 is the repacked layout of a plain Q4_0 matrix: each repack unit (a
// layer, or the output head; repack.go) keeps its Q4_0 matrices either as
// q4x4 copies (anonymous memory, the mapped originals dropped from the
// process, kernels.MulMatEdgellmQ4x4 at every batch size) or, released, on
// the mapped plain blocks (kernels.MulMatEdgellm, the same bits for decode
// and verify batches). SetRepackLayers, the advise step's cold units and
// RepackState treat the copies as they treat ggml's CPU_REPACK buffer:
// Options.Repack then repacks into ggml's buffer only what q4x4 does not
// take (other types ggml interleaves), and a unit is the union of both.
// Without Options.Repack every unit of every set is in q4x4 at load (the
// layout's whole cost, as before units), and still releasable.

// OwnLayoutStats is what edgellm's own weight layout costs when every unit
// holds its copies (Options.Kernels "edgellm" on a CPU that runs the q4x4
// kernel: every plain Q4_0 weight matrix of every set has an interleaved
// copy the matmuls read; kernels.MulMatEdgellmQ4x4). Like RepackStats it
// describes the layout, not what is resident now: that is RepackState,
// whose bytes count the q4x4 copies of the units in use (with ggml's
// repacked matrices, if any).
type OwnLayoutStats struct {
	// Tensors is how many matrices have a q4x4 copy; Bytes the anonymous
	// memory the copies occupy with every unit in q4x4 (like the repack
	// buffer, not reclaimable by the kernel; releasing a unit gives its
	// pages back, and its matrices read the mapping again).
	Tensors int   `json:"tensors"`
	Bytes   int64 `json:"bytes"`
	// HugePageBytes is the part advised for transparent huge pages
	// (kernels.RepackHugePages switches it as it does repack's).
	HugePageBytes int64 `json:"huge_page_bytes"`
}

// ownLayouts are the q4x4 copies in use now, of every weight set, found by
// the mapped tensor's data pointer (a set's tensors are fixed for its life;
// tier swaps and repack units only choose among them). The graph looks
// them up when it is built; a unit's switch bumps Engine.repackGen, so no
// graph keeps a released copy.
type ownLayouts struct {
	byPtr map[unsafe.Pointer]*kernels.EdgellmQ4x4
	stats OwnLayoutStats
}

func newOwnLayouts() *ownLayouts {
	return &ownLayouts{byPtr: make(map[unsafe.Pointer]*kernels.EdgellmQ4x4)}
}

// lookup is t's q4x4 copy if its unit holds it now, or nil (o may be nil).
func (o *ownLayouts) lookup(t kernels.Tensor) *kernels.EdgellmQ4x4 {
	if o == nil || t.Nil() {
		return nil
	}
	return o.byPtr[t.Data()]
}

// ownTensor is one plain Q4_0 matrix of a unit and its q4x4 copy.
type ownTensor struct {
	x   kernels.Tensor       // the mapped matrix
	off int64                // of the copy in the set's ownMem
	p   *kernels.EdgellmQ4x4 // the copy's descriptor while the unit holds it
	tie bool                 // the tied embedding: get_rows reads the mapping
}

// planOwn gives every unit of w its plain Q4_0 matrices (the mapped ones:
// w.plainLayers, the head's plainOut or Output) a q4x4 copy in one
// anonymous mapping, each unit's copies on pages of their own so a unit
// is released whole. The head gets a unit when it has a copy and none
// yet. Nothing is packed here (fillOwn).
func (w *Weights) planOwn(o *ownLayouts) error {
	ps := int64(os.Getpagesize())
	var size int64
	n := 0
	add := func(u *repackUnit, t kernels.Tensor) {
		sz := kernels.EdgellmQ4x4Size(t) // a multiple of 64
		if t.Nil() || sz == 0 {
			return
		}
		for _, v := range u.own {
			if v.x.Data() == t.Data() {
				return
			}
		}
		if len(u.own) == 0 {
			size = (size + ps - 1) / ps * ps
			u.ownLo = size
		}
		u.own = append(u.own, ownTensor{x: t, off: size, tie: !w.TokEmbd.Nil() && t.Data() == w.TokEmbd.Data()})
		size += sz
		u.ownHi = size
		u.bytes += sz
		n++
	}
	for i := range w.Layers {
		for _, t := range w.plainLayers[i].Matrices() {
			add(&w.units[i], t)
		}
	}
	if len(w.units) > len(w.Layers) {
		add(&w.units[len(w.Layers)], w.plainOut)
	} else {
		var u repackUnit
		if add(&u, w.Output); len(u.own) > 0 {
			w.packedOut, w.plainOut = w.Output, w.Output
			w.units = append(w.units, u)
		}
	}
	if size == 0 {
		return nil
	}
	size = (size + ps - 1) / ps * ps
	mem, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return fmt.Errorf("%s: edgellm layout: mmap %d bytes: %w", w.Path, size, err)
	}
	w.ownMem, w.own = mem, o
	var bytes int64
	for i := range w.units {
		bytes += w.units[i].ownHi - w.units[i].ownLo
	}
	if kernels.RepackHugePages() && unix.Madvise(mem, unix.MADV_HUGEPAGE) == nil {
		o.stats.HugePageBytes += bytes
	}
	o.stats.Tensors += n
	o.stats.Bytes += bytes
	return nil
}

// fillOwn packs the q4x4 copies of the given units from the mapping, on
// GOMAXPROCS goroutines, matrix by matrix, and drops each mapped original
// from the process as repack drops its sources (clean page cache,
// reclaimable, not counted twice in the RSS; a stray read faults it back
// in from the file). The tied embedding stays: get_rows reads it.
func (w *Weights) fillOwn(units ...int) error {
	var ts []*ownTensor
	for _, i := range units {
		for j := range w.units[i].own {
			ts = append(ts, &w.units[i].own[j])
		}
	}
	if len(ts) == 0 {
		return nil
	}
	errs := make([]error, len(ts))
	var wg sync.WaitGroup
	workers := min(runtime.GOMAXPROCS(0), len(ts))
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < len(ts); i += workers {
				t := ts[i]
				t.p, errs[i] = kernels.NewEdgellmQ4x4(t.x, unsafe.Pointer(&w.ownMem[t.off]))
				if errs[i] == nil && !t.tie {
					w.dropMapped(t.x.Data(), t.x.Nbytes())
				}
			}
		}()
	}
	wg.Wait()
	for i, t := range ts {
		if errs[i] != nil {
			return fmt.Errorf("%s: %w", w.Path, errs[i])
		}
		w.own.byPtr[t.x.Data()] = t.p
	}
	return nil
}

// releaseOwn drops unit i's q4x4 copies: out of the lookup, descriptors
// freed, pages given back (MADV_DONTNEED; its pages are its own). Its
// matrices read the mapped plain blocks again.
func (w *Weights) releaseOwn(i int) error {
	u := &w.units[i]
	if len(u.own) == 0 {
		return nil
	}
	for j := range u.own {
		t := &u.own[j]
		delete(w.own.byPtr, t.x.Data())
		t.p.Free()
		t.p = nil
	}
	ps := int64(os.Getpagesize())
	hi := min((u.ownHi+ps-1)/ps*ps, int64(len(w.ownMem)))
	if err := unix.Madvise(w.ownMem[u.ownLo:hi], unix.MADV_DONTNEED); err != nil {
		return fmt.Errorf("%s: edgellm layout: release: %w", w.Path, err)
	}
	return nil
}

// closeOwn frees every copy of w and unmaps them.
func (w *Weights) closeOwn() {
	for i := range w.units {
		for j := range w.units[i].own {
			t := &w.units[i].own[j]
			if t.p != nil {
				delete(w.own.byPtr, t.x.Data())
				t.p.Free()
				t.p = nil
			}
		}
	}
	if w.ownMem != nil {
		_ = unix.Munmap(w.ownMem)
		w.ownMem = nil
	}
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
