package native

import (
	"fmt"

	"github.com/edgellm/edgellm/kernels"
)

// SetThreads changes the number of threads that compute the next graphs
// (0 = the engine's default). It is a live decision: the host calls it between
// decode steps. The session's threadpool is replaced by one of exactly n
// threads, so no idle worker is woken per graph; the old pool is paused by
// ggml when the backend switches, then freed. The KV cache, graph and weights
// are untouched: the next Decode gives the same logits up to the summation
// order of the matrix products split across threads.
func (s *Session) SetThreads(n int) error {
	if s.kv == nil {
		return ErrClosed
	}
	if n <= 0 {
		n = s.eng.defaultThreads()
	}
	if n > kernels.MaxThreads {
		return fmt.Errorf("native: threads %d (want 1-%d)", n, kernels.MaxThreads)
	}
	if n == s.tp.NThreads() {
		return nil
	}
	tp, err := s.eng.newThreadpool(n)
	if err != nil {
		return err
	}
	s.be.SetThreadpool(tp, n)
	s.tp.Close()
	s.tp = tp
	return nil
}

// Threads is the number of threads computing the session's graphs.
func (s *Session) Threads() int { return s.tp.NThreads() }

// defaultThreads is the pool size when neither the session nor the engine
// options name one: the CPUs this process may run on (its affinity, which the
// kernel keeps inside its cpuset), not the machine's.
func (e *Engine) defaultThreads() int {
	if e.opts.Threads > 0 {
		return e.opts.Threads
	}
	return max(1, kernels.AllowedCPUCount())
}

// newThreadpool starts a pool of n threads with the engine's CPU placement.
func (e *Engine) newThreadpool(n int) (*kernels.Threadpool, error) {
	return kernels.NewThreadpool(kernels.ThreadpoolParams{NThreads: n, CPUs: e.opts.CPUs,
		Strict: e.opts.StrictCPU, Poll: e.opts.Poll})
}
