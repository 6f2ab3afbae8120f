package instrument

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/edgellm/edgellm/host/policy/internal/guestbuild"
)

// chk marks where instrument must insert a check in a test body.
var chk = []byte("CHECK")

// testModule is a module with one function () -> () whose body is body
// (instructions only, no locals, no final end), and what the instructions
// below need: type 1 = (i32) -> (i32), a funcref table, a memory, a passive
// data segment (with a data count section) and the function exported as "f"
// (so that ref.func 0 is declared). extra sections come before the code.
func testModule(body []byte, extra ...[]byte) []byte {
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = appendSection(m, secType, []byte{2, 0x60, 0, 0, 0x60, 1, 0x7f, 1, 0x7f})
	m = appendSection(m, secFunction, []byte{1, 0})
	m = appendSection(m, 4, []byte{1, 0x70, 0, 1}) // table funcref min 1
	m = appendSection(m, 5, []byte{1, 0, 1})       // memory min 1
	m = appendSection(m, secExport, []byte{1, 1, 'f', 0, 0})
	for _, s := range extra {
		m = append(m, s...)
	}
	m = appendSection(m, secDataCount, []byte{1})
	fn := append([]byte{0}, body...) // no locals
	fn = append(fn, 0x0b)
	code := appendU32([]byte{1}, uint32(len(fn)))
	m = appendSection(m, secCode, append(code, fn...))
	return appendSection(m, 11, []byte{1, 1, 2, 'a', 'b'}) // passive data "ab"
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func v128(fill byte) []byte { return append([]byte{0xfd, 0x0c}, bytes.Repeat([]byte{fill}, 16)...) }

var (
	compileRT   wazero.Runtime
	compileOnce sync.Once
)

// compiles reports whether wazero (default features, compiler) accepts wasm.
func compiles(t testing.TB, wasm []byte) error {
	compileOnce.Do(func() {
		compileRT = wazero.NewRuntimeWithConfig(context.Background(), wazero.NewRuntimeConfigCompiler())
	})
	cm, err := compileRT.CompileModule(context.Background(), wasm)
	if err == nil {
		cm.Close(context.Background())
	}
	return err
}

// TestInstrumentImmediates runs the decoder over instructions whose
// immediates contain the bytes of loop (0x03), end (0x0b) and block types:
// a misread immediate would put a check in the wrong place or none at all.
func TestInstrumentImmediates(t *testing.T) {
	seq := func(b ...byte) []byte { return b }
	for _, tc := range []struct {
		name string
		body [][]byte
	}{
		{"br_table", [][]byte{bytes.Repeat(seq(0x02, 0x40), 12), seq(0x41, 0, 0x0e, 2, 3, 0x0b, 0x03), bytes.Repeat(seq(0x0b), 12), seq(0x03, 0x40), chk, seq(0x0b)}},
		{"memarg with offset", [][]byte{seq(0x41, 0, 0x28, 2, 0x03, 0x1a, 0x41, 0, 0x29, 3, 0x8b, 0x03, 0x1a, 0x41, 0, 0x41, 3, 0x36, 0, 0x83, 0x80, 0x0b), seq(0x03, 0x40), chk, seq(0x0b)}},
		{"i64.const negative", [][]byte{seq(0x42, 0x7f, 0x1a, 0x42, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f, 0x1a, 0x42, 0x03, 0x1a, 0x41, 0x8b, 0x7f, 0x1a), seq(0x03, 0x40), chk, seq(0x0b)}},
		{"float consts", [][]byte{seq(0x43, 0x0b, 0x03, 0x0b, 0x03, 0x1a, 0x44, 3, 3, 3, 3, 0x0b, 0x0b, 0x0b, 0x0b, 0x1a), seq(0x03, 0x40), chk, seq(0x0b)}},
		{"v128.const", [][]byte{v128(0x03), seq(0x1a), v128(0x0b), seq(0x1a), seq(0x03, 0x40), chk, seq(0x0b)}},
		{"i8x16.shuffle", [][]byte{v128(1), v128(2), seq(0xfd, 0x0d, 0, 3, 0x0b, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 31, 0x1a), seq(0x03, 0x40), chk, seq(0x0b)}},
		{"SIMD opcode >= 0x80", [][]byte{v128(1), seq(0x41, 3, 0xfd, 0x8c, 0x01, 0x1a), seq(0x03, 0x40), chk, seq(0x0b)}},
		{"SIMD lanes", [][]byte{v128(1), seq(0xfd, 0x15, 0x03, 0x1a, 0x41, 0), v128(0), seq(0xfd, 0x54, 0, 0x03, 0x0b, 0x1a), seq(0x03, 0x40), chk, seq(0x0b)}},
		{"0xfc ops", [][]byte{seq(0x41, 0, 0x41, 0, 0x41, 0, 0xfc, 8, 0, 0, 0xfc, 9, 0, 0x41, 0, 0x41, 0, 0x41, 0, 0xfc, 10, 0, 0, 0x41, 0, 0x41, 3, 0x41, 0, 0xfc, 11, 0, 0x43, 0, 0, 0, 0, 0xfc, 0, 0x1a, 0xfc, 16, 0, 0x1a), seq(0x03, 0x40), chk, seq(0x0b)}},
		{"multi-value block types", [][]byte{seq(0x41, 5, 0x03, 0x01), chk, seq(0x02, 0x01, 0x0b, 0x0b, 0x1a)}},
		{"select t, refs, call_indirect", [][]byte{seq(0x41, 1, 0x41, 2, 0x41, 0, 0x1c, 1, 0x7f, 0x1a, 0xd0, 0x70, 0xd1, 0x1a, 0xd2, 0, 0x1a, 0x41, 0, 0x11, 0, 0, 0x41, 0, 0x25, 0, 0x1a), seq(0x03, 0x40), chk, seq(0x0b)}},
		{"if else with loops", [][]byte{seq(0x41, 1, 0x04, 0x40, 0x03, 0x40), chk, seq(0x0b, 0x05, 0x03, 0x40), chk, seq(0x0b, 0x0b)}},
		{"body starts with a loop", [][]byte{seq(0x03, 0x40), chk, seq(0x03, 0x40), chk, seq(0x0b, 0x0b)}},
		{"no loop", [][]byte{seq(0x01)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var plain [][]byte
			for _, p := range tc.body {
				if !bytes.Equal(p, chk) {
					plain = append(plain, p)
				}
			}
			orig := testModule(cat(plain...))
			if err := compiles(t, orig); err != nil {
				t.Fatalf("test module does not compile: %v", err)
			}
			ins, err := Rewrite(orig)
			if err != nil {
				t.Fatal(err)
			}
			if err := compiles(t, ins.Wasm); err != nil {
				t.Fatalf("instrumented module does not compile: %v", err)
			}
			check := checkCode(0) // the stop global is global 0
			want := slices.Clone(tc.body)
			for i, p := range want {
				if bytes.Equal(p, chk) {
					want[i] = check
				}
			}
			wantBody := cat(want...)
			if wantBody[0] != 0x03 {
				wantBody = cat(check, wantBody)
			}
			bodies := codeBodies(t, ins.Wasm)
			if got := bodies[0][1 : len(bodies[0])-1]; !bytes.Equal(got, wantBody) {
				t.Fatalf("instrumented body\n got % x\nwant % x", got, wantBody)
			}
		})
	}
}

// Modules instrument must refuse: wazero would not run them with the
// default features, or the reserved names are taken.
func TestInstrumentRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, why string
		wasm      []byte
	}{
		{"return_call (tail calls)", "opcode 0x12", testModule([]byte{0x12, 0})},
		{"threads prefix", "opcode 0xfe", testModule([]byte{0xfe, 0x03, 0})},
		{"try (exceptions)", "opcode 0x6", testModule([]byte{0x06, 0x40, 0x0b})},
		{"SIMD gap", "0xfd 0x9a", testModule(append(v128(0), 0xfd, 0x9a, 0x01, 0x1a))},
		{"SIMD opcode as odd LEB", "followed by 0x0", testModule(append(v128(0), 0xfd, 0x8c, 0x00, 0x1a))},
		{"0xfc unknown", "0xfc 18", testModule([]byte{0xfc, 18, 0})},
		{"reserved export", "reserved name", nil}, // testdata/loop_reserved
		{"truncated body", "without end", testModule([]byte{0x41})[:60]},
		{"not wasm", "not a version 1", []byte("\x00asm\x02\x00\x00\x00")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wasm := tc.wasm
			if wasm == nil {
				raw, err := os.ReadFile(filepath.Join(policyDir, "testdata", "loop_reserved.wasm"))
				if err != nil {
					t.Fatal(err)
				}
				wasm = raw
			}
			_, err := Rewrite(wasm)
			if !errors.Is(err, ErrNotInstrumentable) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("err = %v; want ErrNotInstrumentable mentioning %q", err, tc.why)
			}
		})
	}
}

// A start section becomes an export; the global section is created when
// absent and appended to (index after the imported globals) when present.
func TestInstrumentSections(t *testing.T) {
	// Imports one global and defines one: the stop global is index 2.
	imp := appendSection(nil, secImport, []byte{1, 3, 'e', 'n', 'v', 1, 'g', 0x03, 0x7f, 0})
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = appendSection(m, secType, []byte{1, 0x60, 0, 0})
	m = append(m, imp...)
	m = appendSection(m, secFunction, []byte{1, 0})
	m = appendSection(m, secMemory, []byte{1, 0, 1})
	m = appendSection(m, secGlobal, []byte{1, 0x7e, 1, 0x42, 0x03, 0x0b})
	m = appendSection(m, secStart, []byte{0})
	m = appendSection(m, secCode, []byte{1, 5, 0, 0x03, 0x40, 0x0b, 0x0b})
	if err := compiles(t, m); err != nil {
		t.Fatal(err)
	}
	ins, err := Rewrite(m)
	if err != nil {
		t.Fatal(err)
	}
	if !ins.HasStart || ins.Checks != 1 {
		t.Fatalf("hasStart %v checks %d; want true, 1", ins.HasStart, ins.Checks)
	}
	if err := compiles(t, ins.Wasm); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(ins.Wasm, []byte{secStart, 1, 0}) {
		t.Error("start section kept")
	}
	if !bytes.Contains(ins.Wasm, checkCode(2)) {
		t.Errorf("no check reading global 2 in % x", ins.Wasm)
	}
	cm, err := compileRT.CompileModule(context.Background(), ins.Wasm)
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close(context.Background())
	if _, ok := cm.ExportedFunctions()[StartExport]; !ok {
		t.Errorf("exports %v: no %s", cm.ExportedFunctions(), StartExport)
	}
}

// policyDir is host/policy, whose fixtures and guests are instrumented here.
var policyDir = filepath.Join("..", "..")

// Every fixture and policy is instrumented, compiles, and gives back the
// original bodies when the checks are removed.
func TestInstrumentRoundTrip(t *testing.T) {
	for name, path := range guestbuild.Modules(t, policyDir) {
		t.Run(name, func(t *testing.T) {
			wasm, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			ins, err := Rewrite(wasm)
			if name == "loop_reserved.wasm" {
				if !errors.Is(err, ErrNotInstrumentable) {
					t.Fatalf("err = %v, want ErrNotInstrumentable", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := compiles(t, ins.Wasm); err != nil {
				t.Fatalf("instrumented module does not compile: %v", err)
			}
			orig, got := codeBodies(t, wasm), codeBodies(t, ins.Wasm)
			if len(orig) != len(got) {
				t.Fatalf("%d bodies, want %d", len(got), len(orig))
			}
			check := checkCode(stopIndex(t, ins.Wasm))
			removed := 0
			for i := range orig {
				stripped, n := stripChecks(t, got[i], check)
				removed += n
				if !bytes.Equal(stripped, orig[i]) {
					t.Fatalf("body %d differs after removing the checks", i)
				}
			}
			if removed != ins.Checks || ins.Checks == 0 {
				t.Fatalf("removed %d checks, instrument reported %d", removed, ins.Checks)
			}
			t.Logf("%d bytes -> %d, %d functions, %d checks", len(wasm), len(ins.Wasm), len(orig), ins.Checks)
		})
	}
}

// codeBodies returns the function bodies (locals included) of wasm.
func codeBodies(t testing.TB, wasm []byte) [][]byte {
	t.Helper()
	r := reader{b: wasm, pos: 8}
	for r.pos < len(r.b) && r.err == nil {
		id, size := r.byte(), r.u32()
		if r.err != nil || r.pos+int(size) > len(r.b) {
			break
		}
		if id != secCode {
			r.pos += int(size)
			continue
		}
		cr := reader{b: r.b[r.pos : r.pos+int(size)]}
		var bodies [][]byte
		for n := cr.u32(); n > 0 && cr.err == nil; n-- {
			sz := cr.u32()
			bodies = append(bodies, cr.b[cr.pos:cr.pos+int(sz)])
			cr.pos += int(sz)
		}
		return bodies
	}
	return nil
}

// stopIndex finds the index of the exported stop global.
func stopIndex(t testing.TB, wasm []byte) uint32 {
	t.Helper()
	i := bytes.Index(wasm, []byte(StopExport+"\x03"))
	if i < 0 {
		t.Fatal("no stop global export")
	}
	r := reader{b: wasm, pos: i + len(StopExport) + 1}
	return r.u32()
}

// stripChecks removes the checks found at instruction boundaries of body.
func stripChecks(t testing.TB, body, check []byte) ([]byte, int) {
	t.Helper()
	r := reader{b: body}
	for n := r.u32(); n > 0; n-- {
		r.u32()
		r.byte()
	}
	out := slices.Clone(body[:r.pos])
	n := 0
	for r.pos < len(body) && r.err == nil {
		if bytes.HasPrefix(body[r.pos:], check) {
			r.pos += len(check)
			n++
			continue
		}
		start := r.pos
		switch op := r.byte(); op {
		case 0x02, 0x03, 0x04:
			r.blockType()
		case 0x0b:
		default:
			if err := r.immediates(op); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, body[start:r.pos]...)
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	return out, n
}

// FuzzInstrument: instrument never panics, and a module wazero accepts is
// either refused or instrumented into a module wazero accepts.
func FuzzInstrument(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join(policyDir, "testdata", "*.wasm"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add(testModule(append(v128(3), 0x1a, 0x03, 0x40, 0x0b)))
	f.Fuzz(func(t *testing.T, wasm []byte) { fuzzOne(t, wasm) })
}

func fuzzOne(t *testing.T, wasm []byte) {
	ins, err := Rewrite(wasm)
	if err != nil {
		if !errors.Is(err, ErrNotInstrumentable) {
			t.Fatalf("error %v does not wrap ErrNotInstrumentable", err)
		}
		return
	}
	if compiles(t, wasm) == nil {
		if err := compiles(t, ins.Wasm); err != nil {
			t.Fatalf("original compiles, instrumented does not: %v", err)
		}
	}
}

// Random mutations of the fixtures in the normal test run (the fuzz target
// only replays its seeds without -fuzz).
func TestInstrumentMutations(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(policyDir, "testdata", "*.wasm"))
	rng := rand.New(rand.NewPCG(1, 2))
	accepted := 0
	for i := 0; i < 3000; i++ {
		src, err := os.ReadFile(paths[rng.IntN(len(paths))])
		if err != nil {
			t.Fatal(err)
		}
		b := slices.Clone(src)
		for k := 1 + rng.IntN(3); k > 0 && len(b) > 9; k-- {
			switch rng.IntN(3) {
			case 0:
				b[8+rng.IntN(len(b)-8)] = byte(rng.Uint32())
			case 1:
				b = b[:8+rng.IntN(len(b)-8)]
			case 2:
				j := 8 + rng.IntN(len(b)-8)
				b = slices.Insert(b, j, byte(rng.Uint32()))
			}
		}
		fuzzOne(t, b)
		if _, err := Rewrite(b); err == nil && compiles(t, b) == nil {
			accepted++
		}
	}
	t.Logf("3000 mutants, %d valid and instrumented", accepted)
	if accepted == 0 {
		t.Fatal("no mutant survived: the test exercises nothing")
	}
}
