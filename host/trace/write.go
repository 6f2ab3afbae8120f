package trace

import (
	"bufio"
	"io"
	"math"
	"strconv"

	"github.com/edgellm/edgellm/abi"
)

// Writer writes records as JSONL: t_ms first, then the present fields in
// FieldNames order. Output is buffered: call Flush at the end.
type Writer struct {
	w   *bufio.Writer
	buf []byte
}

// NewWriter writes to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: bufio.NewWriter(w), buf: make([]byte, 0, 512)} }

// Write writes one record as one line. Floats are written with the shortest
// representation that reads back to the same float32; NaN and infinities
// (which JSON cannot carry) are written as 0.
func (w *Writer) Write(r *Record) error {
	b := append(w.buf[:0], `{"t_ms":`...)
	b = strconv.AppendInt(b, r.TMs, 10)
	for i := range fields {
		f := &fields[i]
		if r.Present&f.bit == 0 {
			continue
		}
		b = append(b, ',', '"')
		b = append(b, f.name...)
		b = append(b, '"', ':')
		b = appendValue(b, f, &r.Values)
	}
	b = append(b, '}', '\n')
	w.buf = b
	_, err := w.w.Write(b)
	return err
}

func appendValue(b []byte, f *field, s *abi.Sensors) []byte {
	switch f.kind {
	case kindBool:
		return strconv.AppendBool(b, *f.b(s))
	case kindFloat32:
		v := *f.f32(s)
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			v = 0
		}
		return strconv.AppendFloat(b, float64(v), 'g', -1, 32)
	case kindInt32:
		return strconv.AppendInt(b, int64(*f.i32(s)), 10)
	case kindTrim:
		return strconv.AppendUint(b, uint64(s.TrimLevel), 10)
	case kindThermal:
		return strconv.AppendUint(b, uint64(s.ThermalStatus), 10)
	}
	return b
}

// Flush writes any buffered data.
func (w *Writer) Flush() error { return w.w.Flush() }
