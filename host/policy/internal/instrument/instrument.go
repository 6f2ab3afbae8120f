// Package instrument is the Wasm binary rewriter behind the policy
// runtime's cheap deadline: it adds a stop flag the host can set and a check
// of it at every loop head and function entry, so a guest can be stopped
// without wazero's per-call goroutine (host/policy/RATIONALE.md).
package instrument

import (
	"errors"
	"fmt"
	"strings"
)

// Reserved export names added by Rewrite. A module that already exports
// one of them is not instrumented (it runs on the fallback runtime).
const (
	StopExport  = "__edgellm_stop"  // i32 mutable global: 1 = stop at the next check
	StartExport = "__edgellm_start" // the module's start function, called by the host
)

// ErrNotInstrumentable wraps every reason Rewrite gives up; the module is
// then run on the fallback runtime (wazero's own termination checks).
var ErrNotInstrumentable = errors.New("cannot instrument")

func notInstrumentable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNotInstrumentable, fmt.Sprintf(format, args...))
}

// Module is the result of Rewrite.
type Module struct {
	Wasm     []byte
	HasStart bool // the start section became the export StartExport
	Checks   int  // termination checks inserted
}

// Section ids and their canonical order (the data count section, 12, sits
// between element and code).
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secCode      = 10
	secDataCount = 12
)

var sectionRank = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7, 8: 8, 9: 9, 12: 10, 10: 11, 11: 12}

// Rewrite rewrites a module so that the host can stop it without
// wazero's per-call goroutine. It appends two mutable i32 globals, $stop
// (exported as StopExport) and $tick, and inserts checkCode at the head of
// every loop (so it runs at every back-edge) and at the entry of every
// function (so that call trees without loops are stopped too). A start
// section becomes the export StartExport, which the host calls under its
// own deadline. No existing index changes: the globals come last, and only
// code bodies and the global, export and start sections are rewritten.
//
// The decoder knows exactly the instructions of wazero's default feature set
// (api.CoreFeaturesV2: MVP, sign extension, non-trapping conversions, bulk
// memory, reference types, multi-value, SIMD) and reads immediates the way
// wazero does. Anything else (threads, tail calls, exception handling, an
// unknown opcode, a malformed body, no memory) returns an error wrapping
// ErrNotInstrumentable.
func Rewrite(wasm []byte) (*Module, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" || string(wasm[4:8]) != "\x01\x00\x00\x00" {
		return nil, notInstrumentable("not a version 1 Wasm binary")
	}
	type section struct {
		id      byte
		payload []byte
		raw     []byte // id, size and payload as in the input
	}
	var secs []section
	r := reader{b: wasm, pos: 8}
	last := 0
	seen := map[byte]bool{}
	for r.pos < len(r.b) {
		start := r.pos
		id := r.byte()
		size := r.u32()
		if r.err != nil || uint64(r.pos)+uint64(size) > uint64(len(r.b)) {
			return nil, notInstrumentable("section at offset %d: truncated", start)
		}
		p := r.b[r.pos : r.pos+int(size)]
		r.pos += int(size)
		if id != secCustom {
			rank, ok := sectionRank[id]
			if !ok {
				return nil, notInstrumentable("unknown section id %d", id)
			}
			if rank <= last || seen[id] {
				return nil, notInstrumentable("section %d out of order or repeated", id)
			}
			last, seen[id] = rank, true
		}
		secs = append(secs, section{id: id, payload: p, raw: r.b[start:r.pos]})
	}

	// Index spaces and the facts the rewrite needs.
	var (
		types        []bool // per type: () -> ()
		importFuncs  []uint32
		importGlobs  uint32
		funcTypes    []uint32
		definedGlobs uint32
		exports      []byte // export entries as in the input
		nExports     uint32
		startFunc    = -1
		globalsRest  []byte // global section after its count
		haveCode     bool
		mems         int
	)
	for _, s := range secs {
		sr := reader{b: s.payload}
		switch s.id {
		case secType:
			n := sr.u32()
			for i := uint32(0); i < n && sr.err == nil; i++ {
				if sr.byte() != 0x60 {
					return nil, notInstrumentable("type %d is not a function type", i)
				}
				np := sr.skipValTypes()
				nr := sr.skipValTypes()
				types = append(types, np == 0 && nr == 0)
			}
		case secImport:
			n := sr.u32()
			for i := uint32(0); i < n && sr.err == nil; i++ {
				sr.name()
				sr.name()
				switch kind := sr.byte(); kind {
				case 0x00:
					importFuncs = append(importFuncs, sr.u32())
				case 0x01:
					sr.byte() // reftype
					sr.limits()
				case 0x02:
					sr.limits()
					mems++
				case 0x03:
					sr.byte() // valtype
					sr.byte() // mutability
					importGlobs++
				default:
					return nil, notInstrumentable("import %d has kind %#x", i, kind)
				}
			}
		case secFunction:
			n := sr.u32()
			for i := uint32(0); i < n && sr.err == nil; i++ {
				funcTypes = append(funcTypes, sr.u32())
			}
		case secGlobal:
			definedGlobs = sr.u32()
			globalsRest = sr.b[sr.pos:]
			sr.pos = len(sr.b)
		case secExport:
			nExports = sr.u32()
			from := sr.pos
			for i := uint32(0); i < nExports && sr.err == nil; i++ {
				name := sr.name()
				if name == StopExport || name == StartExport {
					return nil, notInstrumentable("the module already exports the reserved name %q", name)
				}
				sr.byte()
				sr.u32()
			}
			exports = sr.b[from:sr.pos]
		case secStart:
			startFunc = int(sr.u32())
		case secMemory:
			mems += int(sr.u32())
			sr.pos = len(sr.b)
		case secCode:
			haveCode = true
			sr.pos = len(sr.b) // rewritten below
		default:
			sr.pos = len(sr.b)
		}
		if sr.err != nil || sr.pos != len(sr.b) {
			return nil, notInstrumentable("section %d is malformed", s.id)
		}
	}
	if len(funcTypes) > 0 && !haveCode {
		return nil, notInstrumentable("function section without code section")
	}
	if mems == 0 {
		return nil, notInstrumentable("no memory (the checks yield with memory.grow)")
	}
	stopIdx := importGlobs + definedGlobs
	if stopIdx < importGlobs || stopIdx+1 < stopIdx { // overflow
		return nil, notInstrumentable("too many globals")
	}
	check := checkCode(stopIdx)

	out := &Module{HasStart: startFunc >= 0}
	if startFunc >= 0 {
		var t uint32
		switch {
		case startFunc < len(importFuncs):
			t = importFuncs[startFunc]
		case startFunc-len(importFuncs) < len(funcTypes):
			t = funcTypes[startFunc-len(importFuncs)]
		default:
			return nil, notInstrumentable("start function %d does not exist", startFunc)
		}
		if int(t) >= len(types) || !types[t] {
			return nil, notInstrumentable("start function %d is not () -> ()", startFunc)
		}
	}

	// The new sections.
	global := appendU32(nil, definedGlobs+2)
	global = append(global, globalsRest...)
	global = append(global, 0x7f, 0x01, 0x41, 0x00, 0x0b) // $stop: mut i32 (i32.const 0)
	global = append(global, 0x7f, 0x01, 0x41, 0x00, 0x0b) // $tick: mut i32 (i32.const 0)
	export := appendU32(nil, nExports+1+boolU32(startFunc >= 0))
	export = append(export, exports...)
	export = appendName(export, StopExport)
	export = append(export, 0x03)
	export = appendU32(export, stopIdx)
	if startFunc >= 0 {
		export = appendName(export, StartExport)
		export = append(export, 0x00)
		export = appendU32(export, uint32(startFunc))
	}

	res := append(make([]byte, 0, len(wasm)+len(wasm)/8+64), wasm[:8]...)
	pending := []struct {
		id   byte
		body []byte
	}{{secGlobal, global}, {secExport, export}}
	flush := func(rank int) {
		for len(pending) > 0 && sectionRank[pending[0].id] < rank {
			res = appendSection(res, pending[0].id, pending[0].body)
			pending = pending[1:]
		}
	}
	for _, s := range secs {
		switch s.id {
		case secCustom:
			// DWARF refers to code offsets, which move: drop it (it only
			// serves stack traces).
			if name := (&reader{b: s.payload}).name(); strings.HasPrefix(name, ".debug_") {
				continue
			}
			res = append(res, s.raw...)
			continue
		case secGlobal, secExport:
			flush(sectionRank[s.id])
			res = appendSection(res, pending[0].id, pending[0].body)
			pending = pending[1:]
			continue
		}
		flush(sectionRank[s.id])
		switch s.id {
		case secStart:
			// Removed: the host calls StartExport after instantiation.
		case secCode:
			code, n, err := instrumentCode(s.payload, check)
			if err != nil {
				return nil, err
			}
			out.Checks = n
			res = appendSection(res, secCode, code)
		default:
			res = append(res, s.raw...)
		}
	}
	flush(1 << 30)
	out.Wasm = res
	return out, nil
}

// yieldEvery is how many checks pass between two exits to Go (a power of 2).
const yieldEvery = 1024

// checkCode is the check inserted at loop heads and function entries:
//
//	;; every yieldEvery checks, exit to Go: memory.grow is implemented by a
//	;; call into Go, where the goroutine can be preempted. Native code cannot
//	;; be, so without it a runaway guest would block a GC stop-the-world,
//	;; and with it the timer goroutine that sets $stop.
//	global.get $tick  i32.const 1  i32.add  global.set $tick
//	global.get $tick  i32.const yieldEvery-1  i32.and  i32.eqz
//	if  i32.const 0  memory.grow 0  drop  end
//	;; stop when the host says so
//	global.get $stop  if  unreachable  end
//
// memory.grow 0 changes nothing and its result is dropped. Both globals are
// i32: stop is global stop, tick is stop+1.
func checkCode(stop uint32) []byte {
	tick := stop + 1
	c := appendU32([]byte{0x23}, tick)
	c = append(c, 0x41, 0x01, 0x6a, 0x24)
	c = appendU32(c, tick)
	c = append(c, 0x23)
	c = appendU32(c, tick)
	c = append(c, 0x41)
	c = appendU32(c, yieldEvery-1) // positive and < 2^13: its LEB128 is also the s32 one
	c = append(c, 0x71, 0x45, 0x04, 0x40, 0x41, 0x00, 0x40, 0x00, 0x1a, 0x0b, 0x23)
	c = appendU32(c, stop)
	return append(c, 0x04, 0x40, 0x00, 0x0b)
}

func boolU32(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// instrumentCode rewrites the code section payload.
func instrumentCode(p []byte, check []byte) ([]byte, int, error) {
	r := reader{b: p}
	n := r.u32()
	if r.err != nil {
		return nil, 0, notInstrumentable("code section: %v", r.err)
	}
	out := appendU32(make([]byte, 0, len(p)+len(p)/8+16), n)
	checks := 0
	var body []byte
	for i := uint32(0); i < n; i++ {
		size := r.u32()
		if r.err != nil || uint64(r.pos)+uint64(size) > uint64(len(p)) {
			return nil, 0, notInstrumentable("code section: body %d truncated", i)
		}
		var k int
		var err error
		body, k, err = instrumentBody(body[:0], p[r.pos:r.pos+int(size)], check)
		if err != nil {
			return nil, 0, fmt.Errorf("%w (function body %d)", err, i)
		}
		r.pos += int(size)
		checks += k
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	if r.pos != len(p) {
		return nil, 0, notInstrumentable("code section: %d bytes after the last body", len(p)-r.pos)
	}
	return out, checks, nil
}

// instrumentBody appends the instrumented body b to out and returns it with
// the number of checks inserted.
func instrumentBody(out, b []byte, check []byte) ([]byte, int, error) {
	r := reader{b: b}
	groups := r.u32()
	for i := uint32(0); i < groups && r.err == nil; i++ {
		r.u32()
		if t := r.byte(); r.err == nil && !isValType(t) {
			return out, 0, notInstrumentable("local of unknown type %#x", t)
		}
	}
	if r.err != nil {
		return out, 0, notInstrumentable("locals: %v", r.err)
	}
	out = append(out, b[:r.pos]...)
	copied := r.pos
	checks := 0
	// Function entry: skipped when the body starts with a loop, whose own
	// check runs first anyway (Go's Wasm code: every function is a loop).
	if r.pos < len(b) && b[r.pos] != 0x03 {
		out = append(out, check...)
		checks++
	}
	depth := 0
	for {
		if r.pos >= len(b) {
			return out, 0, notInstrumentable("body ends without end")
		}
		op := r.byte()
		switch op {
		case 0x02, 0x04: // block, if
			r.blockType()
			depth++
		case 0x03: // loop
			r.blockType()
			depth++
			if r.err == nil {
				out = append(out, b[copied:r.pos]...)
				out = append(out, check...)
				copied = r.pos
				checks++
			}
		case 0x0b: // end
			depth--
			if depth < 0 {
				if r.pos != len(b) {
					return out, 0, notInstrumentable("%d bytes after the function's end", len(b)-r.pos)
				}
				return append(out, b[copied:]...), checks, nil
			}
		default:
			if err := r.immediates(op); err != nil {
				return out, 0, err
			}
		}
		if r.err != nil {
			return out, 0, notInstrumentable("at body offset %d: %v", r.pos, r.err)
		}
	}
}

func appendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func appendName(b []byte, s string) []byte {
	return append(appendU32(b, uint32(len(s))), s...)
}

func appendSection(b []byte, id byte, payload []byte) []byte {
	b = append(b, id)
	b = appendU32(b, uint32(len(payload)))
	return append(b, payload...)
}
