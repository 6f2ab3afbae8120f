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

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/edgellm/edgellm/abi"
)

// wasiModule is the only import module a policy may use.
const wasiModule = wasi_snapshot_preview1.ModuleName

// module is a compiled, validated policy: what an instance is made from. It
// lives until it is neither in service nor the previous good module.
type module struct {
	compiled wazero.CompiledModule
	path     string
	name     string // manifest name, or the file name of a loose module
	revision int64  // 0 for a loose module
	digest   string // first 12 hex digits of the sha256 of the module
	gen      uint64 // load generation that brought it in

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
	stack   []uint64 // CallWithStack params/results, reused
	inPtr   uint32
	outPtr  uint32
	version abi.Version

	closeOnce sync.Once
}

func (in *instance) close(ctx context.Context) {
	in.closeOnce.Do(func() { in.inst.Close(ctx) })
}

// compile compiles wasm and checks its imports and exports statically.
func (r *Runtime) compile(ctx context.Context, path string, wasm []byte) (*module, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return nil, loadErrorf(path, ErrNotPolicy, "not a Wasm module (no \\0asm magic)")
	}
	cm, err := r.wr.CompileModule(ctx, wasm)
	if err != nil {
		return nil, loadErrorf(path, ErrModule, "compile: %v", err)
	}
	if err := r.checkStatic(path, cm); err != nil {
		cm.Close(ctx)
		return nil, err
	}
	sum := sha256.Sum256(wasm)
	return &module{compiled: cm, path: path, digest: hex.EncodeToString(sum[:6])}, nil
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
	mod, err := r.wr.InstantiateModule(ictx, m.compiled, mc)
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
	if f := mod.ExportedFunction(abi.ExportInitialize); f != nil {
		if _, err := f.Call(ictx); err != nil {
			if ictx.Err() != nil {
				return fail(ErrInstantiate, "%s did not return within %v", abi.ExportInitialize, r.cfg.initTimeout)
			}
			return fail(ErrInstantiate, "%s: %v", abi.ExportInitialize, err)
		}
	}
	var vals [4]uint32
	for i, name := range []string{abi.ExportVersionMajor, abi.ExportVersionMinor, abi.ExportInPtr, abi.ExportOutPtr} {
		v, err := readI32Export(ictx, mod, name)
		if err != nil {
			return fail(ErrModule, "%v", err)
		}
		vals[i] = v
	}
	in.version = abi.Version{Major: uint16(vals[0]), Minor: uint16(vals[1])}
	if vals[0] != abi.VersionMajor || vals[0] > 0xffff || vals[1] > 0xffff {
		return fail(ErrABIVersion, "module speaks ABI %d.%d, this host speaks %d.x (major must match)", vals[0], vals[1], abi.VersionMajor)
	}
	in.inPtr, in.outPtr = vals[2], vals[3]
	in.mem = mod.ExportedMemory(abi.ExportMemory)
	in.decide = mod.ExportedFunction(abi.ExportDecide)
	size := uint64(in.mem.Size())
	switch {
	case uint64(in.inPtr)+abi.SensorsSize > size:
		return fail(ErrModule, "in_ptr %d + %d bytes is outside memory (%d bytes)", in.inPtr, abi.SensorsSize, size)
	case uint64(in.outPtr)+abi.DecisionSize > size:
		return fail(ErrModule, "out_ptr %d + %d bytes is outside memory (%d bytes)", in.outPtr, abi.DecisionSize, size)
	case in.inPtr < in.outPtr+abi.DecisionSize && in.outPtr < in.inPtr+abi.SensorsSize:
		return fail(ErrModule, "in_ptr [%d, +%d) and out_ptr [%d, +%d) overlap", in.inPtr, abi.SensorsSize, in.outPtr, abi.DecisionSize)
	}
	return in, nil
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
