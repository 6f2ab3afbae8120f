package kernels

/*
#include "llama.h"
*/
import "C"

import "time"

// Perf is llama_perf_context: llama.cpp's own timing of a Context. Counters
// are zero when the Context was created with NoPerf.
type Perf struct {
	Load        time.Duration // model load, as measured by the context
	PromptEval  time.Duration // batches of more than one token
	Eval        time.Duration // single-token decodes
	NPromptEval int           // tokens evaluated in prompt batches
	NEval       int           // single-token decodes
	NReused     int           // compute graphs reused
}

// Perf reads the context's performance counters. llama.cpp reports counts of
// at least 1 even before any decode; they are returned as llama.cpp gives them.
func (c *Context) Perf() Perf {
	if c == nil || c.ptr == nil {
		return Perf{}
	}
	d := C.llama_perf_context(c.ptr)
	ms := func(v C.double) time.Duration { return time.Duration(float64(v) * float64(time.Millisecond)) }
	return Perf{
		Load:        ms(d.t_load_ms),
		PromptEval:  ms(d.t_p_eval_ms),
		Eval:        ms(d.t_eval_ms),
		NPromptEval: int(d.n_p_eval),
		NEval:       int(d.n_eval),
		NReused:     int(d.n_reused),
	}
}

// PerfReset zeroes the context's performance counters.
func (c *Context) PerfReset() {
	if c != nil && c.ptr != nil {
		C.llama_perf_context_reset(c.ptr)
	}
}
