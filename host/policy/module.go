package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/policy/internal/instrument"
)

// wasiModule is the only import module a policy may use.
const wasiModule = wasi_snapshot_preview1.ModuleName

// module is a compiled, validated policy: what an instance is made from. It
// lives until it is neither in service nor the previous good module.
type module struct {
	compiled wazero.CompiledModule
	wr       wazero.Runtime // the runtime it was compiled in (instances come from it)
	// instrumented: compiled from instrument's rewrite, stopped through the
	// stop global; else compiled as is (no deadline, or the fallback
	// runtime with wazero's own termination checks).
	instrumented bool
	hasStart     bool // instrumented, and the start section became instrument.StartExport
	path         string
	name         string // manifest name, or the file name of a loose module
	revision     int64  // 0 for a loose module
	digest       string // first 12 hex digits of the sha256 of the module
	gen          uint64 // load generation that brought it in

	// consecutive counts failed calls since the last success; at
	// Config.maxFailures the module is quarantined.
	consecutive atomic.Int32
	quarantined atomic.Bool
	closeOnce   sync.Once
}

func (m *module) close(ctx context.Context) {
	m.closeOnce.Do(func() { m.compiled.Close(ctx) })
}

func (m *module) String() string {
	if m.revision > 0 {
		return fmt.Sprintf("%s rev %d (%s)", m.name, m.revision, m.digest)
	}
	return fmt.Sprintf("%s (%s)", m.name, m.digest)
}

// instance is one instantiation of a module with everything Decide needs
// prepared: the cached decide function, its stack and the buffer offsets.
type instance struct {
	mod     *module
	inst    api.Module
	mem     api.Memory
	decide  api.Function
	stop    api.MutableGlobal // the stop flag of an instrumented module, else nil
	stack   []uint64          // CallWithStack params/results, reused
	inPtr   uint32
	outPtr  uint32
	version abi.Version
	// sSize and dSize are the struct sizes exchanged with this guest: its
	// minor's, or the host's for a newer guest (abi.ExchangeSizes).
	sSize, dSize int

	closeOnce sync.Once
}

func (in *instance) close(ctx context.Context) {
	in.closeOnce.Do(func() { in.inst.Close(ctx) })
}

// compile compiles wasm and checks its imports and exports statically.
// With a deadline, the module is instrumented (see instrument) and compiled
// in r.wr; a module that cannot be instrumented is compiled in the fallback
// runtime, which keeps wazero's own termination checks, and one line is
// logged.
func (r *Runtime) compile(ctx context.Context, path string, wasm []byte) (*module, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return nil, loadErrorf(path, ErrNotPolicy, "not a Wasm module (no \\0asm magic)")
	}
	m := &module{wr: r.wr, path: path}
	var cm wazero.CompiledModule
	var err error
	if r.cfg.deadline == 0 {
		cm, err = r.wr.CompileModule(ctx, wasm)
	} else {
		var ins *instrument.Module
		if ins, err = instrument.Rewrite(wasm); r.cfg.noInstrument {
			err = fmt.Errorf("%w: disabled by the configuration", instrument.ErrNotInstrumentable)
		}
		if err == nil {
			if cm, err = r.wr.CompileModule(ctx, ins.Wasm); err == nil {
				m.instrumented, m.hasStart = true, ins.HasStart
			} else {
				err = fmt.Errorf("%w: the instrumented module does not compile: %v", instrument.ErrNotInstrumentable, err)
			}
		}
		if err != nil {
			why := err
			m.wr = r.fb
			if cm, err = r.fb.CompileModule(ctx, wasm); err == nil {
				r.c.fallbackModules.Add(1)
				r.log.Warn("policy: module not instrumented, using wazero's termination checks (slower, allocates per call)", "path", path, "reason", why)
			}
		}
	}
	if err != nil {
		return nil, loadErrorf(path, ErrModule, "compile: %v", err)
	}
	if err := r.checkStatic(path, cm); err != nil {
		cm.Close(ctx)
		return nil, err
	}
	sum := sha256.Sum256(wasm)
	m.compiled, m.digest = cm, hex.EncodeToString(sum[:6])
	return m, nil
}

// checkStatic refuses imports other than existing WASI functions and checks
// the exports that a compiled module lists (functions and memories).
func (r *Runtime) checkStatic(path string, cm wazero.CompiledModule) error {
	var unknown []string
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		if mod != wasiModule || !r.wasiFuncs[name] {
			unknown = append(unknown, mod+"."+name)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return loadErrorf(path, ErrUnknownImport, "imports host functions that do not exist: %s (only %s is provided)", strings.Join(unknown, ", "), wasiModule)
	}
	if ims := cm.ImportedMemories(); len(ims) > 0 {
		mod, name, _ := ims[0].Import()
		return loadErrorf(path, ErrUnknownImport, "imports memory %s.%s (a policy must define and export its own)", mod, name)
	}
	if _, ok := cm.ExportedMemories()[abi.ExportMemory]; !ok {
		return loadErrorf(path, ErrModule, "missing export %q (memory)", abi.ExportMemory)
	}
	fns := cm.ExportedFunctions()
	d, ok := fns[abi.ExportDecide]
	if !ok {
		return loadErrorf(path, ErrModule, "missing export %q", abi.ExportDecide)
	}
	if len(d.ParamTypes()) != 0 || len(d.ResultTypes()) != 1 || d.ResultTypes()[0] != api.ValueTypeI32 {
		return loadErrorf(path, ErrModule, "export %q has signature %s, want () -> i32", abi.ExportDecide, signature(d))
	}
	if f, ok := fns[abi.ExportInitialize]; ok && (len(f.ParamTypes()) != 0 || len(f.ResultTypes()) != 0) {
		return loadErrorf(path, ErrModule, "export %q has signature %s, want () -> ()", abi.ExportInitialize, signature(f))
	}
	for _, name := range []string{abi.ExportVersionMajor, abi.ExportVersionMinor, abi.ExportInPtr, abi.ExportOutPtr} {
		if f, ok := fns[name]; ok && (len(f.ParamTypes()) != 0 || len(f.ResultTypes()) != 1 || f.ResultTypes()[0] != api.ValueTypeI32) {
			return loadErrorf(path, ErrModule, "export %q has signature %s, want () -> i32", name, signature(f))
		}
	}
	return nil
}

func signature(f api.FunctionDefinition) string {
	names := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return strings.Join(s, ", ")
	}
	return "(" + names(f.ParamTypes()) + ") -> (" + names(f.ResultTypes()) + ")"
}

// instantiate makes an instance of m: it runs the start function and
// _initialize within the init timeout, reads the ABI version and the buffer
// pointers, and checks them against the memory.
func (r *Runtime) instantiate(ctx context.Context, m *module) (*instance, error) {
	ictx, cancel := context.WithTimeout(ctx, r.cfg.initTimeout)
	defer cancel()
	name := fmt.Sprintf("policy-%d", r.instSeq.Add(1))
	mc := wazero.NewModuleConfig().WithName(name).WithStartFunctions() // reactor: no _start
	// An instrumented module has no start section: instantiating it runs no
	// guest code.
	mod, err := m.wr.InstantiateModule(ictx, m.compiled, mc)
	if err != nil {
		if ictx.Err() != nil {
			return nil, loadErrorf(m.path, ErrInstantiate, "start function did not return within %v", r.cfg.initTimeout)
		}
		return nil, loadErrorf(m.path, ErrInstantiate, "%v", err)
	}
	in := &instance{mod: m, inst: mod, stack: make([]uint64, 1)}
	fail := func(kind error, format string, args ...any) (*instance, error) {
		mod.Close(ctx)
		return nil, loadErrorf(m.path, kind, format, args...)
	}
	// The guest code run below (start, _initialize, the i32 exports) runs
	// under the init timeout: through the stop flag for an instrumented
	// module, through ictx (wazero's checks) otherwise.
	guard := &initGuard{ctx: ictx}
	if m.instrumented {
		g, ok := mod.ExportedGlobal(instrument.StopExport).(api.MutableGlobal)
		if !ok {
			return fail(ErrModule, "instrumented module lacks its %s global", instrument.StopExport)
		}
		in.stop = g
		guard.arm(g, r.cfg.initTimeout)
	}
	timedOut := func(what string) (*instance, error) {
		return fail(ErrInstantiate, "%s did not return within %v", what, r.cfg.initTimeout)
	}
	for _, c := range []struct{ export, what string }{
		{instrument.StartExport, "start function"}, {abi.ExportInitialize, abi.ExportInitialize},
	} {
		if c.export == instrument.StartExport && !m.hasStart {
			continue
		}
		if f := mod.ExportedFunction(c.export); f != nil {
			if _, err := f.Call(ictx); err != nil {
				if guard.stop() {
					return timedOut(c.what)
				}
				return fail(ErrInstantiate, "%s: %v", c.what, err)
			}
		}
	}
	var vals [4]uint32
	for i, name := range []string{abi.ExportVersionMajor, abi.ExportVersionMinor, abi.ExportInPtr, abi.ExportOutPtr} {
		v, err := readI32Export(ictx, mod, name)
		if err != nil {
			if guard.stop() {
				return timedOut(fmt.Sprintf("export %q", name))
			}
			return fail(ErrModule, "%v", err)
		}
		vals[i] = v
	}
	// Stopped after the last call returned: the flag is set, the instance
	// would trap at once.
	if m.instrumented && guard.stop() {
		return timedOut("initialization")
	}
	in.version = abi.Version{Major: uint16(vals[0]), Minor: uint16(vals[1])}
	if vals[0] != abi.VersionMajor || vals[0] > 0xffff || vals[1] > 0xffff {
		return fail(ErrABIVersion, "module speaks ABI %d.%d, this host speaks %d.x (major must match)", vals[0], vals[1], abi.VersionMajor)
	}
	in.sSize, in.dSize, _ = abi.ExchangeSizes(in.version) // the major was checked above
	in.inPtr, in.outPtr = vals[2], vals[3]
	in.mem = mod.ExportedMemory(abi.ExportMemory)
	in.decide = mod.ExportedFunction(abi.ExportDecide)
	size := uint64(in.mem.Size())
	ss, ds := uint32(in.sSize), uint32(in.dSize)
	switch {
	case uint64(in.inPtr)+uint64(ss) > size:
		return fail(ErrModule, "in_ptr %d + %d bytes is outside memory (%d bytes)", in.inPtr, ss, size)
	case uint64(in.outPtr)+uint64(ds) > size:
		return fail(ErrModule, "out_ptr %d + %d bytes is outside memory (%d bytes)", in.outPtr, ds, size)
	case in.inPtr < in.outPtr+ds && in.outPtr < in.inPtr+ss:
		return fail(ErrModule, "in_ptr [%d, +%d) and out_ptr [%d, +%d) overlap", in.inPtr, ss, in.outPtr, ds)
	}
	return in, nil
}

// initGuard bounds the guest code run while instantiating. Armed with an
// instrumented module's stop flag, a timer sets the flag at the timeout;
// otherwise it reports the context (wazero's checks stop the guest).
type initGuard struct {
	ctx   context.Context
	mu    sync.Mutex
	timer *time.Timer
	g     api.MutableGlobal // nil once stopped
	fired bool
}

func (w *initGuard) arm(g api.MutableGlobal, d time.Duration) {
	w.g = g
	w.timer = time.AfterFunc(d, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.g != nil {
			w.g.Set(1)
			w.fired = true
		}
	})
}

// stop ends the guard (it can be called repeatedly) and reports whether it
// fired. After stop the flag is never set.
func (w *initGuard) stop() bool {
	if w.timer == nil {
		return w.ctx.Err() != nil
	}
	w.timer.Stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.g = nil
	return w.fired
}

// readI32Export reads an i32 exported either as a () -> i32 function or as a
// global.
func readI32Export(ctx context.Context, mod api.Module, name string) (uint32, error) {
	if f := mod.ExportedFunction(name); f != nil {
		res, err := f.Call(ctx)
		if err != nil {
			return 0, fmt.Errorf("calling export %q: %v", name, err)
		}
		return uint32(res[0]), nil
	}
	if g := mod.ExportedGlobal(name); g != nil {
		if g.Type() != api.ValueTypeI32 {
			return 0, fmt.Errorf("export %q is a %s global, want i32", name, api.ValueTypeName(g.Type()))
		}
		return uint32(g.Get()), nil
	}
	return 0, errors.New("missing export " + `"` + name + `"` + " (function () -> i32 or i32 global)")
}
