// Package kernels is edgellm's only cgo: a binding to llama.cpp (llama.h) and
// ggml, compiled into the binary from the pinned ollama module.
//
// The llama.cpp side (this file set: model, vocab, context, batch, decode,
// memory, state, perf, quantize, log) is used like this:
//
//	m, err := kernels.LoadModel(path, kernels.ModelParams{})  // mmap'd, GGUF header checked first
//	defer m.Close()                                          // after every Context is closed
//	c, err := kernels.NewContext(m, kernels.ContextParams{NCtx: 2048})
//	defer c.Close()
//	b, err := kernels.NewBatch(512, 1)                       // reusable, C memory
//	defer b.Close()
//	toks, _ := m.Vocab().Tokenize(prompt, true, false)
//	for i, t := range toks { b.Add(t, i, 0, i == len(toks)-1) }
//	err = c.Decode(b)                                        // typed errors: ErrNoKVSlot, ErrAborted, ...
//	err = c.Logits(b.Len()-1, logits)                        // copies into the caller's []float32
//
// The per-token step (Batch.Clear, Batch.Add, Context.Decode, Context.Logits)
// allocates nothing. Sequence state moves in and out of caller-owned byte
// slices (StateSeqGet / StateSeqSet) without a copy on the Go heap, so a
// memfd mapping can hold it.
//
// Validation happens in Go before C is called: missing or non-GGUF files,
// token ids outside [0, n_vocab), positions outside [0, n_ctx_seq), sequence
// ids outside [0, n_seq_max), batches larger than n_batch, n_ctx above the
// model's training context, KV types the model's head size cannot hold, and
// nil or closed handles all return errors instead of reaching llama.cpp's
// asserts. Every C failure code becomes a sentinel error (see errors.go).
//
// Ownership: a Model owns its Vocab; Contexts must be closed before their
// Model (Model.Close fails with ErrInUse otherwise); Batches are independent.
// Close is idempotent. A Model and its Vocab are safe for concurrent use; a
// Context and a Batch are for one goroutine at a time (Context.Interrupt may
// be called from any goroutine).
//
// Logging: llama.cpp and ggml log through a callback installed at package
// init. By default only warnings and errors are written, to os.Stderr;
// SetLogLevel and SetLogWriter change that. Messages below the level are
// dropped in C without entering Go. llama_backend_init runs once, on the
// first LoadModel or Quantize.
package kernels
