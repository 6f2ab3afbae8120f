package gguf

import (
	"bytes"
	"encoding/binary"
)

// enc builds raw GGUF bytes for tests, field by field.
type enc struct {
	bytes.Buffer
	v1 bool
}

func (e *enc) u32(v uint32) *enc { binary.Write(&e.Buffer, binary.LittleEndian, v); return e }
func (e *enc) u64(v uint64) *enc { binary.Write(&e.Buffer, binary.LittleEndian, v); return e }
func (e *enc) n(v uint64) *enc {
	if e.v1 {
		return e.u32(uint32(v))
	}
	return e.u64(v)
}
func (e *enc) str(s string) *enc { e.n(uint64(len(s))); e.WriteString(s); return e }
func (e *enc) header(version uint32, nTensors, nKV uint64) *enc {
	e.WriteString("GGUF")
	e.u32(version)
	return e.n(nTensors).n(nKV)
}

// tensorInfo appends a tensor info (v2+ layout).
func (e *enc) tensorInfo(name string, dims []uint64, typ uint32, off uint64) *enc {
	e.str(name)
	e.u32(uint32(len(dims)))
	for _, d := range dims {
		e.n(d)
	}
	return e.u32(typ).u64(off)
}

// pad pads to 32 bytes and appends n data bytes.
func (e *enc) data(n int) *enc {
	for e.Len()%32 != 0 {
		e.WriteByte(0)
	}
	e.Write(make([]byte, n))
	return e
}
