package native

import (
	"fmt"
	"runtime"
	"time"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/cputime"
)

// BenchOptions configures BenchCompare.
type BenchOptions struct {
	Prefill   int // prompt tokens, decoded as one batch
	Decode    int // single-token steps after the prompt (the first is not timed)
	Threads   int
	KVType    engine.KVType
	Attention engine.Attention // both engines; auto is flash
	Reps      int              // alternating repetitions per engine (best is kept); 0 = 3
}

// BenchSide is one engine's throughput.
type BenchSide struct {
	PrefillTokS float64 `json:"prefill_tok_s"`
	DecodeTokS  float64 `json:"decode_tok_s"`
	// The same rates over the calling thread's CPU time instead of wall
	// time: with one thread that is all the compute, and a shared machine's
	// descheduling does not count.
	PrefillCPUTokS float64 `json:"prefill_cpu_tok_s"`
	DecodeCPUTokS  float64 `json:"decode_cpu_tok_s"`
}

// BenchResult compares the native engine with llama.cpp measured in the
// same process, alternating, with the same model, threads and KV type.
type BenchResult struct {
	Native       BenchSide `json:"native"`
	LlamaCpp     BenchSide `json:"llamacpp"`
	DecodeRatio  float64   `json:"decode_ratio"`  // native / llamacpp
	PrefillRatio float64   `json:"prefill_ratio"` // native / llamacpp
	// Ratios of the CPU-time rates (see BenchSide).
	DecodeCPURatio  float64 `json:"decode_cpu_ratio"`
	PrefillCPURatio float64 `json:"prefill_cpu_ratio"`
	KVBytesPerTok   int64   `json:"kv_bytes_per_token"`
}

// BenchCompare measures prefill and decode speed of both engines. llama.cpp
// gets the same KV type (it needs a head size that is a multiple of 32 for
// quantized KV) and no weight repacking unless the caller's kernels default
// changes: both read the same mmap'd weights.
func BenchCompare(path string, o BenchOptions) (*BenchResult, error) {
	if o.Prefill < 1 || o.Decode < 2 {
		return nil, fmt.Errorf("bench: prefill %d, decode %d (want ≥ 1 and ≥ 2)", o.Prefill, o.Decode)
	}
	if o.Reps <= 0 {
		o.Reps = 3
	}
	eng, err := Load(path, Options{Threads: o.Threads, NoVocab: true})
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	le, err := loadReference(path)
	if err != nil {
		return nil, err
	}
	defer le.Close()
	nCtx := o.Prefill + o.Decode
	att := flash(o.Attention)
	kvt := o.KVType
	if kvt == "" {
		kvt = engine.KVF16
	}
	ref, err := le.NewSession(engine.SessionConfig{NCtx: nCtx, NBatch: o.Prefill, Threads: o.Threads, KVType: kvt, Attention: att})
	if err != nil {
		return nil, err
	}
	defer ref.Close()
	sess, err := eng.newSession(engine.SessionConfig{NCtx: nCtx, NBatch: o.Prefill, Threads: o.Threads,
		KVType: o.KVType, Attention: att})
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	nv := eng.Config().NVocab
	prompt := make([]int32, o.Prefill)
	for i := range prompt {
		prompt[i] = int32((i*7 + 1) % nv)
	}
	res := &BenchResult{KVBytesPerTok: sess.Stats().KVBytesToken}
	runtime.LockOSThread() // thread CPU time must stay on one thread
	defer runtime.UnlockOSThread()
	run := func(s engine.Session, reset func() error, side *BenchSide) error {
		if err := reset(); err != nil {
			return err
		}
		t0, c0 := time.Now(), cputime.Thread()
		if err := s.Decode(prompt, engine.LogitsLast); err != nil {
			return err
		}
		pf := float64(o.Prefill) / time.Since(t0).Seconds()
		pfc := float64(o.Prefill) / (cputime.Thread() - c0).Seconds()
		tok := []int32{1}
		if err := s.Decode(tok, engine.LogitsLast); err != nil { // warm-up step
			return err
		}
		t0, c0 = time.Now(), cputime.Thread()
		for range o.Decode - 1 {
			if err := s.Decode(tok, engine.LogitsLast); err != nil {
				return err
			}
		}
		dc := float64(o.Decode-1) / time.Since(t0).Seconds()
		dcc := float64(o.Decode-1) / (cputime.Thread() - c0).Seconds()
		side.PrefillTokS, side.DecodeTokS = max(side.PrefillTokS, pf), max(side.DecodeTokS, dc)
		side.PrefillCPUTokS, side.DecodeCPUTokS = max(side.PrefillCPUTokS, pfc), max(side.DecodeCPUTokS, dcc)
		return nil
	}
	for range o.Reps {
		if err := run(sess, func() error { return sess.Truncate(0) }, &res.Native); err != nil {
			return nil, fmt.Errorf("bench native: %w", err)
		}
		if err := run(ref, func() error { return ref.Truncate(0) }, &res.LlamaCpp); err != nil {
			return nil, fmt.Errorf("bench llama.cpp: %w", err)
		}
	}
	res.DecodeRatio = res.Native.DecodeTokS / res.LlamaCpp.DecodeTokS
	res.PrefillRatio = res.Native.PrefillTokS / res.LlamaCpp.PrefillTokS
	res.DecodeCPURatio = res.Native.DecodeCPUTokS / res.LlamaCpp.DecodeCPUTokS
	res.PrefillCPURatio = res.Native.PrefillCPUTokS / res.LlamaCpp.PrefillCPUTokS
	return res, nil
}
