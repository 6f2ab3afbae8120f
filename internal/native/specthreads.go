package native

import (
	"fmt"
	"math/bits"

	"github.com/edgellm/edgellm/kernels"
)

// Draft and verify threads: draft steps can run on their own threadpool
// (a thread count and a CPU mask, e.g. the small cores of a big.LITTLE
// phone) and target steps (verify batches and plain steps) on another CPU
// mask. Each is a ggml threadpool whose worker threads are pinned to the
// mask's CPUs; the session's backend switches pools around the draft steps.

// maskCPUs lists the CPUs of a mask (bit i = CPU i).
func maskCPUs(mask uint64) []int {
	var cpus []int
	for mask != 0 {
		i := bits.TrailingZeros64(mask)
		cpus = append(cpus, i)
		mask &^= 1 << i
	}
	return cpus
}

// pool is a threadpool made for a thread count and mask.
type pool struct {
	tp      *kernels.Threadpool
	threads int
	mask    uint64
}

func newPool(threads int, mask uint64, poll int) (*pool, error) {
	if threads < 1 {
		return nil, fmt.Errorf("native: %d threads", threads)
	}
	tp, err := kernels.NewThreadpool(kernels.ThreadpoolParams{NThreads: threads, CPUs: maskCPUs(mask), Poll: poll})
	if err != nil {
		return nil, err
	}
	return &pool{tp: tp, threads: threads, mask: mask}, nil
}

func (p *pool) close() {
	if p != nil {
		p.tp.Close()
	}
}

// SetDraftThreads runs draft steps on threads threads pinned to the CPUs
// of mask (0: no pinning). threads 0 returns draft steps to the target's
// pool. For a separate draft model it is that model's session's pool.
func (sp *Speculator) SetDraftThreads(threads int, mask uint64) error {
	if threads < 0 || bits.OnesCount64(mask) > kernels.MaxThreads {
		return fmt.Errorf("native: draft threads %d, mask %#x", threads, mask)
	}
	if sp.draftPool != nil && sp.draftPool.threads == threads && sp.draftPool.mask == mask {
		return nil
	}
	var p *pool
	if threads > 0 {
		var err error
		if p, err = newPool(threads, mask, sp.s.eng.opts.Poll); err != nil {
			return err
		}
	}
	if md, ok := sp.d.(*modelDrafter); ok {
		ds := md.s
		tp := ds.tp
		if p != nil {
			tp = p.tp
		}
		ds.be.SetThreadpool(tp, 0)
	}
	sp.draftPool.close()
	sp.draftPool = p
	return nil
}

// SetVerifyCPUMask pins the target's steps (verify batches, plain steps)
// to the CPUs of mask with the session's thread count (0: the session's
// own pool, as created).
func (sp *Speculator) SetVerifyCPUMask(mask uint64) error {
	s := sp.s
	if sp.verifyPool != nil && sp.verifyPool.mask == mask {
		return nil
	}
	var p *pool
	if mask != 0 {
		var err error
		if p, err = newPool(s.tp.NThreads(), mask, s.eng.opts.Poll); err != nil {
			return err
		}
		s.be.SetThreadpool(p.tp, 0)
	} else {
		s.be.SetThreadpool(s.tp, 0)
	}
	sp.verifyPool.close()
	sp.verifyPool = p
	return nil
}

// DraftThreads is the draft pool's thread count and mask (0, 0: the target's).
func (sp *Speculator) DraftThreads() (int, uint64) {
	if sp.draftPool == nil {
		return 0, 0
	}
	return sp.draftPool.threads, sp.draftPool.mask
}

// targetPool is the pool target steps run on.
func (sp *Speculator) targetPool() *kernels.Threadpool {
	if sp.verifyPool != nil {
		return sp.verifyPool.tp
	}
	return sp.s.tp
}

// draftOn switches the session's backend to the draft pool for a pass
// drafter's steps; draftOff switches back.
func (sp *Speculator) draftOn() {
	if sp.draftPool != nil {
		sp.s.be.SetThreadpool(sp.draftPool.tp, 0)
	}
}

func (sp *Speculator) draftOff() {
	if sp.draftPool != nil {
		sp.s.be.SetThreadpool(sp.targetPool(), 0)
	}
}

// closePools releases the draft and verify pools (the session's backend
// returns to its own pool).
func (sp *Speculator) closePools() {
	if sp.verifyPool != nil || sp.draftPool != nil {
		sp.s.be.SetThreadpool(sp.s.tp, 0)
	}
	sp.draftPool.close()
	sp.verifyPool.close()
	sp.draftPool, sp.verifyPool = nil, nil
}
