package kernels

/*
#include "shim.h"
*/
import "C"

// A llama.cpp context without a threadpool of its own computes every graph
// on a disposable one: ggml starts the worker threads for the graph and
// joins them after it, once per decode step, and its default poll level has
// them spin while they wait. Each Context therefore owns persistent pools
// made by NewThreadpool, as the native engine's sessions do: poll 0 (the
// workers sleep between graphs), the CPU mask narrowed to the CPUs the
// process may use, and threads that exist once instead of per step.

// ctxPools are a context's threadpools: one for single-token decode, one for
// batches (the same pool when the counts agree).
type ctxPools struct {
	tp, batch *Threadpool
	// retired pools were replaced by SetThreads. llama.cpp hands the new
	// pool to the CPU backend at the next decode, pausing the old one
	// through the backend's pointer, so they are closed after that decode.
	retired []*Threadpool
}

// setPools gives the context pools of exactly threads and threadsBatch
// workers (a no-op when it has them).
func (c *Context) setPools(threads, threadsBatch int) error {
	p := &c.pools
	if p.tp != nil && p.tp.nThreads == threads && p.batch.nThreads == threadsBatch {
		return nil
	}
	tp, err := NewThreadpool(ThreadpoolParams{NThreads: threads})
	if err != nil {
		return err
	}
	batch := tp
	if threadsBatch != threads {
		if batch, err = NewThreadpool(ThreadpoolParams{NThreads: threadsBatch}); err != nil {
			tp.Close()
			return err
		}
	}
	C.llama_attach_threadpool(c.ptr, tp.p, batch.p)
	if p.tp != nil {
		p.retired = append(p.retired, p.tp)
		if p.batch != p.tp {
			p.retired = append(p.retired, p.batch)
		}
	}
	p.tp, p.batch = tp, batch
	return nil
}

// closeRetired frees the pools no graph uses any more (after a decode).
func (c *Context) closeRetired() {
	for _, tp := range c.pools.retired {
		tp.Close()
	}
	c.pools.retired = c.pools.retired[:0]
}

// closePools frees every pool; the llama context is already freed.
func (c *Context) closePools() {
	c.closeRetired()
	if c.pools.batch != c.pools.tp {
		c.pools.batch.Close()
	}
	c.pools.tp.Close()
	c.pools = ctxPools{}
}
