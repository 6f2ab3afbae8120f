// Package host is edgellm's public Go API: it loads a model on one of two
// engines, decodes sessions, generates text, and runs a WebAssembly policy
// in the decode loop that adapts the session to the device (quantization
// tier, per-layer precision, KV window, threads). An embedding app (the
// Android host, a server, a test harness) needs this package, host/policy,
// host/sensors and abi, nothing else.
//
// # Use
//
//	host.SetLog(os.Stderr, host.LogError)   // llama.cpp's own messages
//	eng, err := host.Load(path, host.LoadOptions{})
//	defer eng.Close()
//	sess, err := eng.NewSession(host.SessionConfig{} // NCtx 0: min(2048, the model's))
//	defer sess.Close()
//	a, err := host.AttachPolicy(ctx, sess, host.PolicyOptions{
//		Path: "policy.tar.gz", Config: &cfg, Sensors: "live"})
//	defer a.Close()
//	prompt, err := host.Tokenize(sess, "Once upon a time")
//	st, err := host.Generate(ctx, sess, host.GenerateOptions{
//		Prompt: prompt, Emit: emit, NPredict: 128, BeforeStep: a.BeforeStep})
//	more, err := host.Tokenize(sess, " The end?") // the next turn: no BOS, no prefix
//	st, err = host.Generate(ctx, sess, host.GenerateOptions{
//		Prompt: more, Emit: emit, NPredict: 128, BeforeStep: a.BeforeStep})
//	fmt.Println(st.DecodeTPS(), a.Stats().Changes)
//
// A Session knows its engine (Session.Engine: vocabulary, model info) and
// its resolved configuration (Session.Config), so neither AttachPolicy nor
// Generate asks for them again. A session is a conversation: every token
// Generate emits is in its KV cache when Generate returns, a later call
// continues exactly where it stopped (Tokenize adds no BOS and no
// tokenizer prefix mid-conversation), and an attached policy numbers the
// session's steps across calls. The zero GenerateOptions samples with
// DefaultSampling and stops at end-of-generation (IgnoreEOG goes on).
//
// Load picks the engine: "native" (our own forward pass over weights it
// maps and a KV arena it owns; per-layer weight sets with
// LoadOptions.LayerSets, a ring KV window) for the llama, qwen2, qwen3,
// gemma2, gemma3 and phi3 architectures, "llamacpp" (llama.cpp's
// llama_decode) otherwise and for tier ladders
// (LoadOptions.Tiers: GGUF files of one model at several precisions, swapped
// mid-generation with KV migration). What a session can change while
// decoding is what it implements: TierSwapper, ThreadSetter, WindowSetter,
// LayerWindowSetter, EvictSetter, LayerSetter, KVTypeSetter, RepackSetter (the native
// engine with LoadOptions.Repack: how many layers use their repacked copy),
// each only when the ability is real (a session of a model loaded without
// a tier ladder is no TierSwapper). Engine.Capabilities says what no
// session method does: whether the engine decodes speculatively.
// StateSaver (both engines) saves a session's KV state and restores it
// into a session of the same model, engine, KV type and window layout
// without decoding (a versioned header with the model's identity; a
// mismatch or corrupt input is an ErrBadState naming what differs); a
// native session whose KV arena a draft model shares refuses to save.
//
// AttachDraft attaches speculative decoding to a native-engine session (a
// draft of the model's first layers, a lower-precision weight set, prompt
// lookup or a smaller model): Generate with GenerateOptions.Draft then
// drafts K tokens a round and verifies them in one batch, with the same
// output distribution (identical greedy text). With DraftOptions.Policy the
// policy chooses K from the Draft's measured acceptance and costs.
//
// LoadManifest reads a model's precision manifest (per-layer bit bounds and
// sensitivity ranks, from `edgellm calibrate`) for Adapter.SetManifest.
// ModelInfo.ChatTemplate and ApplyChatTemplate turn chat turns into a
// prompt with the model's own template, where llama.cpp recognises it.
//
// AttachPolicy does, in one call, what a policy needs: it builds the sensor
// source (NewSensorSource: "live", "trace:FILE" replaying SIMULATED
// readings, or "live+trace:FILE"), a policy runtime limited to what the
// engine and session can apply, loads and verifies the policy (signed
// bundles; loose .wasm only with policy.Config.WithInsecure), and returns
// the compiler's freed heap to the OS before decoding starts. The Adapter
// it returns calls the policy every Decision.CadenceSteps steps (every
// step by default, DefaultCadence; with live sensors also whenever
// MaxInterval passed since the last call), applies what the engine
// supports and keeps the rest of the decision as it was; a policy that
// fails is answered by the last good decision and never stops decoding.
//
// The engine types (Engine, Session, Vocab, SessionConfig, ...) are defined
// in the leaf package host/engine, which the engines implement; this
// package names them. `go doc github.com/edgellm/edgellm/host/engine` shows
// their methods and fields.
//
// # Errors
//
// Decoding past a session's context returns an error wrapping
// ErrContextFull on both engines. Load fails with a one-line error naming
// the file for a missing, truncated or non-GGUF model before anything
// reaches C.
//
// # Concurrency and ownership
//
// An Engine, its Sessions, a Draft and an Adapter are used by one
// goroutine at a time. Close Drafts and Adapters, then Sessions, then the
// Engine. SetLog is
// process-wide.
package host
