package instrument

import (
	"errors"
	"fmt"
)

// The decoder: a reader over a module's bytes that skips each instruction's
// immediates the way wazero reads them (api.CoreFeaturesV2).

// immediates skips the immediates of op (other than block, loop, if, end).
func (r *reader) immediates(op byte) error {
	switch {
	case op == 0x00 || op == 0x01 || op == 0x05 || op == 0x0f || op == 0x1a || op == 0x1b ||
		op == 0xd1 || (op >= 0x45 && op <= 0xc4):
		// unreachable, nop, else, return, drop, select, ref.is_null, numeric
	case op == 0x0c || op == 0x0d || op == 0x10 || (op >= 0x20 && op <= 0x26) || op == 0xd2:
		// br, br_if, call, local.*, global.*, table.get/set, ref.func
		r.u32()
	case op == 0x0e: // br_table
		n := r.u32()
		for i := uint32(0); i <= n && r.err == nil; i++ {
			r.u32()
		}
	case op == 0x11: // call_indirect
		r.u32()
		r.u32()
	case op == 0x1c: // select t*
		n := r.u32()
		if n != 1 {
			return notInstrumentable("select with %d types", n)
		}
		if t := r.byte(); !isValType(t) {
			return notInstrumentable("select of unknown type %#x", t)
		}
	case op >= 0x28 && op <= 0x3e: // loads and stores
		r.memarg()
	case op == 0x3f || op == 0x40: // memory.size, memory.grow
		r.u32()
	case op == 0x41:
		r.sleb(32)
	case op == 0x42:
		r.sleb(64)
	case op == 0x43:
		r.skip(4)
	case op == 0x44:
		r.skip(8)
	case op == 0xd0: // ref.null
		if t := r.byte(); t != 0x70 && t != 0x6f {
			return notInstrumentable("ref.null of unknown type %#x", t)
		}
	case op == 0xfc:
		return r.miscImmediates()
	case op == 0xfd:
		return r.simdImmediates()
	default:
		return notInstrumentable("unsupported opcode %#x at body offset %d", op, r.pos-1)
	}
	return nil
}

func (r *reader) miscImmediates() error {
	sub := r.u32()
	switch {
	case sub <= 7: // saturating truncations
	case sub == 8: // memory.init
		r.u32()
		r.u32()
	case sub == 9 || sub == 11 || sub == 13 || (sub >= 15 && sub <= 17):
		// data.drop, memory.fill, elem.drop, table.grow/size/fill
		r.u32()
	case sub == 10 || sub == 12 || sub == 14: // memory.copy, table.init, table.copy
		r.u32()
		r.u32()
	default:
		if r.err == nil {
			return notInstrumentable("unsupported opcode 0xfc %d", sub)
		}
	}
	return nil
}

// simdImmediates reads a SIMD opcode the way wazero does: one byte (not a
// LEB128). Opcodes 0x80-0xff are encoded by compilers as the LEB128 pair
// (op, 0x01), and wazero reads the 0x01 as a nop: accept exactly that pair,
// which both readings split the same way around it.
func (r *reader) simdImmediates() error {
	op := r.byte()
	if op >= 0x80 {
		if next := r.byte(); r.err == nil && next != 0x01 {
			return notInstrumentable("SIMD opcode %#x followed by %#x", op, next)
		}
	}
	switch {
	case op <= 0x0b || op == 0x5c || op == 0x5d: // loads, store, load_zero
		r.memarg()
	case op == 0x0c || op == 0x0d: // v128.const, i8x16.shuffle
		r.skip(16)
	case op >= 0x15 && op <= 0x22: // extract/replace lane
		r.skip(1)
	case op >= 0x54 && op <= 0x5b: // load/store lane
		r.memarg()
		r.skip(1)
	case simdGaps[op]:
		return notInstrumentable("unsupported opcode 0xfd %#x", op)
	}
	return nil
}

// simdGaps are the SIMD opcodes below 0x100 that wazero does not know.
var simdGaps = func() (g [256]bool) {
	for _, op := range []byte{0x9a, 0xa2, 0xa5, 0xa6, 0xaf, 0xb0, 0xb2, 0xb3, 0xb4, 0xbb, 0xc2, 0xc5, 0xc6, 0xcf, 0xd0, 0xd2, 0xd3, 0xd4, 0xe2, 0xee} {
		g[op] = true
	}
	return g
}()

func isValType(t byte) bool {
	switch t {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		return true
	}
	return false
}

// reader decodes a byte slice; the first error sticks and reads after it
// return zero values.
type reader struct {
	b   []byte
	pos int
	err error
}

var errTruncated = errors.New("truncated")

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.pos >= len(r.b) {
		r.err = errTruncated
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *reader) skip(n int) {
	if r.err != nil {
		return
	}
	if len(r.b)-r.pos < n {
		r.err = errTruncated
		return
	}
	r.pos += n
}

// u32 reads an unsigned LEB128 of at most 5 bytes, as wazero does.
func (r *reader) u32() uint32 {
	var v uint32
	for i := 0; i < 5; i++ {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint32(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if i == 4 && c > 0x0f {
				r.err = errors.New("u32 overflows")
				return 0
			}
			return v
		}
	}
	r.err = errors.New("u32 longer than 5 bytes")
	return 0
}

// sleb skips a signed LEB128 of at most ceil(bits/7) bytes.
func (r *reader) sleb(bits int) {
	max := (bits + 6) / 7
	for i := 0; i < max; i++ {
		c := r.byte()
		if r.err != nil || c&0x80 == 0 {
			return
		}
	}
	r.err = fmt.Errorf("s%d longer than %d bytes", bits, max)
}

func (r *reader) memarg() {
	if align := r.u32(); r.err == nil && align >= 32 {
		r.err = fmt.Errorf("alignment 2^%d", align)
	}
	r.u32()
}

// blockType skips a block type: empty (0x40), a value type, or a type index
// (s33, non-negative).
func (r *reader) blockType() {
	if r.err != nil {
		return
	}
	if r.pos < len(r.b) && (r.b[r.pos] == 0x40 || isValType(r.b[r.pos])) {
		r.pos++
		return
	}
	var v int64
	for i := 0; i < 5; i++ {
		c := r.byte()
		if r.err != nil {
			return
		}
		v |= int64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if c&0x40 != 0 { // negative: not a type index
				r.err = fmt.Errorf("block type %#x", c)
			}
			return
		}
	}
	r.err = errors.New("block type longer than 5 bytes")
}

func (r *reader) name() string {
	n := r.u32()
	if r.err != nil {
		return ""
	}
	if uint64(len(r.b)-r.pos) < uint64(n) {
		r.err = errTruncated
		return ""
	}
	s := string(r.b[r.pos : r.pos+int(n)])
	r.pos += int(n)
	return s
}

func (r *reader) limits() {
	switch flag := r.byte(); flag {
	case 0x00:
		r.u32()
	case 0x01:
		r.u32()
		r.u32()
	default:
		if r.err == nil {
			r.err = fmt.Errorf("limits flag %#x", flag)
		}
	}
}

// skipValTypes skips a vector of value types and returns its length.
func (r *reader) skipValTypes() uint32 {
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		if t := r.byte(); r.err == nil && !isValType(t) {
			r.err = fmt.Errorf("unknown value type %#x", t)
		}
	}
	return n
}
