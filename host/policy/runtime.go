package policy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/internal/buildinfo"
)

// Runtime runs one policy at a time in wazero and turns its answers into
// decisions the engine can apply. See doc.go for the concurrency contract.
type Runtime struct {
	cfg           Config
	log           *slog.Logger
	kvMask        uint8
	engineVersion string

	wr        wazero.Runtime // instrumented modules, or any module without a deadline
	fb        wazero.Runtime // fallback for modules instrument refuses (nil without a deadline)
	cache     wazero.CompilationCache
	wasiFuncs map[string]bool
	instSeq   atomic.Uint64

	// Hot path. active is the instance in service (nil: fall back); hazard
	// is the instance Decide is using right now, so that no one closes it.
	active  atomic.Pointer[instance]
	hazard  atomic.Pointer[instance]
	calling atomic.Bool
	closed  atomic.Bool
	hot     hotState // owned by the goroutine inside Decide

	// Control plane, guarded by mu.
	mu          sync.Mutex
	cur         *module // module in service (its instance may be recovering)
	prevGood    *module // restored when cur is quarantined
	maxRevision int64   // highest bundle revision ever accepted
	index       *RollbackIndex
	gen         atomic.Uint64
	revision    atomic.Int64
	inService   atomic.Bool // cur != nil, readable without mu

	failures chan failure // Decide -> worker
	events   chan event   // Decide -> logger
	stop     chan struct{}
	wg       sync.WaitGroup
	c        counters
	dlog     *decisionLog
}

// hotState is what Decide keeps between calls. Only the goroutine inside
// Decide touches it (Decide is not reentrant; the calling flag enforces it).
type hotState struct {
	dctx     callCtx   // deadline of modules on the fallback runtime
	stop     stopTimer // deadline of instrumented modules
	sensBuf  [abi.SensorsSize]byte
	pre      abi.Decision // the caller's pre-filled decision
	lastGood abi.Decision
	haveGood bool
	prev     abi.Decision // the decision of the previous step (change detection)
	step     uint64
}

// failure asks the worker to deal with a failed instance.
type failure struct {
	inst       *instance
	quarantine bool
}

// NewRuntime validates cfg and starts a runtime with no module: until one
// is loaded, Decide returns the built-in default (the caller's pre-filled
// decision). Close it when done.
func NewRuntime(ctx context.Context, cfg Config) (*Runtime, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &Runtime{
		cfg:           cfg,
		log:           cfg.logger,
		engineVersion: cfg.engineVersion,
		wasiFuncs:     map[string]bool{},
		failures:      make(chan failure, 64),
		events:        make(chan event, cfg.queue),
		stop:          make(chan struct{}),
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	var err error
	if r.index, err = OpenRollbackIndex(cfg.stateDir); err != nil {
		return nil, err
	}
	if err := r.index.Err(); err != nil {
		r.log.Error("policy: rollback index unusable, every bundle will be refused", "err", err)
	}
	if r.engineVersion == "" {
		r.engineVersion = buildinfo.Version
	}
	for _, k := range cfg.limits.KVTypes {
		r.kvMask |= 1 << k
	}
	// Modules are instrumented with their own termination checks (see
	// instrument): r.wr runs them without wazero's, whose per-call goroutine
	// costs ~20 µs at p99. The fallback runtime keeps wazero's checks for
	// modules that cannot be instrumented. Both share the compilation cache
	// (wazero's cache key includes the termination setting).
	rc := wazero.NewRuntimeConfigCompiler().WithMemoryLimitPages(cfg.memPages)
	if dir := cfg.resolvedCacheDir(); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("policy: compilation cache %s: %w", dir, err)
		}
		cache, err := wazero.NewCompilationCacheWithDir(dir)
		if err != nil {
			return nil, fmt.Errorf("policy: compilation cache %s: %w", dir, err)
		}
		r.cache = cache
		rc = rc.WithCompilationCache(cache)
	}
	r.wr = wazero.NewRuntimeWithConfig(ctx, rc)
	if cfg.deadline > 0 {
		r.fb = wazero.NewRuntimeWithConfig(ctx, rc.WithCloseOnContextDone(true))
	}
	for _, wr := range []wazero.Runtime{r.wr, r.fb} {
		if wr == nil {
			continue
		}
		if _, err := wasi_snapshot_preview1.Instantiate(ctx, wr); err != nil {
			r.closeWazero(ctx)
			return nil, fmt.Errorf("policy: WASI: %w", err)
		}
	}
	for name := range r.wr.Module(wasiModule).ExportedFunctionDefinitions() {
		r.wasiFuncs[name] = true
	}
	if cfg.declog.Path != "" {
		if r.dlog, err = openDecisionLog(cfg.declog); err != nil {
			r.closeWazero(ctx)
			return nil, err
		}
	}
	r.hot.dctx.init(cfg.deadline)
	r.hot.stop.init(cfg.deadline)
	r.wg.Add(2)
	go r.worker()
	go r.logger()
	return r, nil
}

// Close stops the runtime: it waits for a Decide in progress, stops the
// watchers and background goroutines, flushes the decision log and releases
// every module. Decide then returns ErrClosed.
func (r *Runtime) Close(ctx context.Context) error {
	if r.closed.Swap(true) {
		return nil
	}
	for r.calling.Load() {
		time.Sleep(50 * time.Microsecond)
	}
	close(r.stop)
	r.wg.Wait()
	r.hot.dctx.close()
	r.hot.stop.close()
	var err error
	if r.dlog != nil {
		err = r.dlog.close()
	}
	return errors.Join(err, r.closeWazero(ctx))
}

func (r *Runtime) closeWazero(ctx context.Context) error {
	err := r.wr.Close(ctx)
	if r.fb != nil {
		err = errors.Join(err, r.fb.Close(ctx))
	}
	if r.cache != nil {
		err = errors.Join(err, r.cache.Close(ctx))
	}
	return err
}

// Revision is the bundle revision in service (0: a loose module or none).
func (r *Runtime) Revision() int64 { return r.revision.Load() }

// Generation counts the modules put in service (loads and quarantine
// restores); it changes exactly when the module answering Decide changes.
func (r *Runtime) Generation() uint64 { return r.gen.Load() }

// Module describes the module in service, "" if none.
func (r *Runtime) Module() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == nil {
		return ""
	}
	return r.cur.String()
}

// LoadFile loads a policy and puts it in service between two Decide calls:
// a .wasm (only with WithInsecure), a bundle directory or a bundle .tar.gz,
// told apart by content. Reading, verifying, compiling and instantiating all
// happen on the caller's goroutine while the current policy keeps serving;
// on any error the current policy stays and the error says why (the
// caller reports it; Watch's reloads, which have no caller, log it).
func (r *Runtime) LoadFile(ctx context.Context, path string) error {
	if r.closed.Load() {
		return ErrClosed
	}
	err := r.load(ctx, path)
	if err != nil {
		r.c.loadErrors.Add(1)
	}
	return err
}

func (r *Runtime) load(ctx context.Context, path string) error {
	wasm, man, err := r.readPolicy(path)
	if err != nil {
		return err
	}
	return r.install(ctx, path, wasm, man)
}

// RollbackIndex is the runtime's rollback index (Config.WithStateDir).
func (r *Runtime) RollbackIndex() *RollbackIndex { return r.index }

// checkRevision refuses a manifest whose revision is not newer than the
// newest accepted in this process or, for its name, in the rollback index.
func (r *Runtime) checkRevision(path string, man *Manifest) error {
	r.mu.Lock()
	maxRev := r.maxRevision
	r.mu.Unlock()
	if man.Revision <= maxRev {
		return loadErrorf(path, ErrOldRevision, "revision %d is not newer than %d (the newest accepted)", man.Revision, maxRev)
	}
	return r.index.Check(path, man.Name, man.Revision)
}

// install compiles and instantiates a verified module and puts it in
// service; man is nil for a loose module. A bundle's revision is recorded
// in the rollback index before the module serves.
func (r *Runtime) install(ctx context.Context, path string, wasm []byte, man *Manifest) error {
	if man != nil {
		if err := r.checkRevision(path, man); err != nil {
			return err
		}
	}
	mod, err := r.compile(ctx, path, wasm)
	if err != nil {
		return err
	}
	mod.name = filepath.Base(path)
	if man != nil {
		mod.name, mod.revision = man.Name, man.Revision
	}
	inst, err := r.instantiate(ctx, mod)
	if err != nil {
		mod.close(ctx)
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if man != nil {
		err := error(nil)
		if man.Revision <= r.maxRevision { // a concurrent load won
			err = loadErrorf(path, ErrOldRevision, "revision %d is not newer than %d (the newest accepted)", man.Revision, r.maxRevision)
		} else {
			err = r.index.Record(path, man.Name, man.Revision)
		}
		if err != nil {
			inst.close(ctx)
			mod.close(ctx)
			return err
		}
		r.maxRevision = man.Revision
	}
	r.serve(ctx, mod, inst, path)
	return nil
}

// serve puts mod in service (r.mu held): the module it replaces becomes
// the previous good one unless it was quarantined.
func (r *Runtime) serve(ctx context.Context, mod *module, inst *instance, source string) {
	old := r.cur
	if old != nil && !old.quarantined.Load() {
		if r.prevGood != nil && r.prevGood != old {
			r.prevGood.close(ctx)
		}
		r.prevGood = old
	}
	// Count the load before publishing: once Decide can see the new
	// generation, Stats must already include the load that made it.
	r.c.loads.Add(1)
	r.publish(ctx, mod, inst)
	r.log.Info("policy: loaded", "module", mod.String(), "path", source, "generation", mod.gen)
}

// publish puts mod in service with inst (nil: recovering) and retires the
// instance it replaces. r.mu must be held.
func (r *Runtime) publish(ctx context.Context, mod *module, inst *instance) {
	if mod != r.cur {
		r.cur = mod
		r.inService.Store(mod != nil)
		if mod != nil {
			mod.gen = r.gen.Add(1)
			r.revision.Store(mod.revision)
		} else {
			r.gen.Add(1)
			r.revision.Store(0)
		}
	}
	if old := r.active.Swap(inst); old != nil && old != inst {
		r.retire(ctx, old)
	}
}

// retire closes an instance once Decide no longer uses it. It must already
// be out of r.active, so Decide cannot pick it up again.
func (r *Runtime) retire(ctx context.Context, in *instance) {
	for r.hazard.Load() == in {
		time.Sleep(20 * time.Microsecond)
	}
	in.close(ctx)
}

// readPolicy reads a loose module or a bundle and verifies it.
func (r *Runtime) readPolicy(path string) ([]byte, *Manifest, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, loadErrorf(path, ErrNotPolicy, "%v", err)
	}
	if !fi.IsDir() {
		var magic [4]byte
		f, err := os.Open(path)
		if err != nil {
			return nil, nil, loadErrorf(path, ErrNotPolicy, "%v", err)
		}
		n, _ := f.Read(magic[:])
		f.Close()
		switch {
		case n == 4 && string(magic[:]) == "\x00asm":
			if !r.cfg.insecure {
				return nil, nil, loadErrorf(path, ErrInsecure, "loose .wasm module refused: only signed bundles are accepted (set the insecure flag to allow)")
			}
			if fi.Size() > r.cfg.bundle.MaxFileBytes {
				return nil, nil, loadErrorf(path, ErrBundleTooLarge, "module is %d bytes, limit %d", fi.Size(), r.cfg.bundle.MaxFileBytes)
			}
			wasm, err := readLimited(path, r.cfg.bundle.MaxFileBytes)
			if err != nil {
				return nil, nil, loadErrorf(path, ErrNotPolicy, "%v", err)
			}
			return wasm, nil, nil
		case n >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		default:
			return nil, nil, loadErrorf(path, ErrNotPolicy, "starts with % x: neither Wasm (00 61 73 6d) nor gzip (1f 8b)", magic[:n])
		}
	}
	b, err := ReadBundle(path, r.cfg.bundle)
	if err != nil {
		return nil, nil, err
	}
	if err := r.verify(b); err != nil {
		return nil, nil, err
	}
	return b.Wasm, &b.Manifest, nil
}

// worker re-instantiates failed instances and quarantines modules, off the
// hot path.
func (r *Runtime) worker() {
	defer r.wg.Done()
	ctx := context.Background()
	for {
		select {
		case <-r.stop:
			return
		case f := <-r.failures:
			r.recover(ctx, f)
		}
	}
}

func (r *Runtime) recover(ctx context.Context, f failure) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.active.CompareAndSwap(f.inst, nil)
	r.retire(ctx, f.inst)
	mod := f.inst.mod
	if mod != r.cur || mod.quarantined.Load() {
		return // replaced or already handled meanwhile
	}
	if r.active.Load() != nil {
		return
	}
	for mod != nil {
		if !f.quarantine {
			inst, err := r.instantiate(ctx, mod)
			if err == nil {
				r.c.reinstantiations.Add(1)
				r.publish(ctx, mod, inst)
				return
			}
			r.c.instantiateErrors.Add(1)
			r.log.Warn("policy: re-instantiation failed", "module", mod.String(), "err", err)
		}
		// Quarantine mod and fall back to the previous good module.
		mod.quarantined.Store(true)
		r.c.quarantines.Add(1)
		prev := r.prevGood
		r.prevGood = nil
		desc := "built-in default decisions"
		if prev != nil {
			desc = prev.String()
		}
		r.log.Error("policy: module quarantined", "module", mod.String(), "consecutive_failures", mod.consecutive.Load(), "restoring", desc)
		r.publish(ctx, prev, nil)
		mod.close(ctx)
		mod, f.quarantine = prev, false
		if prev != nil {
			prev.consecutive.Store(0)
		}
	}
}

// Stats is a snapshot of the runtime's counters.
type Stats struct {
	Steps        uint64 `json:"steps"`         // Decide calls
	OK           uint64 `json:"ok"`            // decided by the module
	Fallbacks    uint64 `json:"fallbacks"`     // answered with the last good or default decision
	Failures     uint64 `json:"failures"`      // calls into a module that failed (sum of the next five)
	Traps        uint64 `json:"traps"`         // including memory faults of the guest
	Deadlines    uint64 `json:"deadlines"`     // deadline overruns
	BadStatus    uint64 `json:"bad_status"`    // decide returned non-zero
	Invalid      uint64 `json:"invalid"`       // undecodable or garbage decisions
	MemoryFaults uint64 `json:"memory_faults"` // in/out buffers no longer inside memory
	Clamped      uint64 `json:"clamped"`       // decisions with at least one clamp

	Loads             uint64 `json:"loads"`
	LoadErrors        uint64 `json:"load_errors"`
	Reinstantiations  uint64 `json:"reinstantiations"`
	InstantiateErrors uint64 `json:"instantiate_errors"`
	Quarantines       uint64 `json:"quarantines"`
	// Uninstrumented counts modules compiled as they are, with wazero's
	// termination checks, because instrument refused them.
	Uninstrumented uint64 `json:"uninstrumented"`
	// DeadlineGraces counts calls kept past their wall-clock deadline
	// because they were not running: their thread was waiting for a CPU
	// (Linux with cgo: the thread's CPU clock, deadline.go), or, without
	// that clock, the deadline timer itself ran more than a deadline late
	// (then each extension counts, at most 3 per call).
	DeadlineGraces uint64 `json:"deadline_graces"`

	EventsDropped uint64 `json:"events_dropped"` // log events dropped (queue full)
	LogRecords    uint64 `json:"log_records"`    // decision log lines written
	LogBytes      uint64 `json:"log_bytes"`
	LogSkipped    uint64 `json:"log_skipped"` // records not written: byte cap reached (no rotation)

	Revision   int64  `json:"revision"`
	Generation uint64 `json:"generation"`
}

type counters struct {
	steps, ok, fallbacks, failures, traps, deadlines, badStatus, invalid, memFaults, clamped atomic.Uint64
	loads, loadErrors, reinstantiations, instantiateErrors, quarantines, fallbackModules     atomic.Uint64
	eventsDropped, logRecords, logBytes, logSkipped                                          atomic.Uint64
}

// Stats returns the counters. Safe from any goroutine.
func (r *Runtime) Stats() Stats {
	c := &r.c
	return Stats{
		Steps: c.steps.Load(), OK: c.ok.Load(), Fallbacks: c.fallbacks.Load(), Failures: c.failures.Load(),
		Traps: c.traps.Load(), Deadlines: c.deadlines.Load(), BadStatus: c.badStatus.Load(), Invalid: c.invalid.Load(),
		MemoryFaults: c.memFaults.Load(), Clamped: c.clamped.Load(),
		Loads: c.loads.Load(), LoadErrors: c.loadErrors.Load(), Reinstantiations: c.reinstantiations.Load(),
		InstantiateErrors: c.instantiateErrors.Load(), Quarantines: c.quarantines.Load(), Uninstrumented: c.fallbackModules.Load(),
		DeadlineGraces: r.hot.stop.grantedTotal() + r.hot.dctx.grantedTotal(),
		EventsDropped:  c.eventsDropped.Load(), LogRecords: c.logRecords.Load(), LogBytes: c.logBytes.Load(), LogSkipped: c.logSkipped.Load(),
		Revision: r.revision.Load(), Generation: r.gen.Load(),
	}
}
