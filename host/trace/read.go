package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/edgellm/edgellm/abi"
)

// OnError says what Read does with a malformed line.
type OnError uint8

const (
	// Stop returns the first malformed line as the error (the default).
	Stop OnError = iota
	// Skip drops malformed lines, reports each to ReadOptions.Skipped and
	// returns the good records.
	Skip
)

// ReadOptions configure Read.
type ReadOptions struct {
	OnError OnError
	// Skipped, when not nil, is called for every line dropped in Skip mode.
	Skipped func(*LineError)
	// MaxLineBytes bounds one line (default 64 KiB); a longer line is an error.
	MaxLineBytes int
}

// LineError is a malformed trace line.
type LineError struct {
	Line  int    // 1-based
	Field string // the offending field, "" if the line as a whole
	Err   error
}

func (e *LineError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("line %d: field %q: %v", e.Line, e.Field, e.Err)
	}
	return fmt.Sprintf("line %d: %v", e.Line, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// Errors a LineError wraps.
var (
	ErrUnknownField = errors.New("unknown field (see trace.FieldNames)")
	ErrMissingTime  = errors.New("t_ms is required")
	ErrTimeBackward = errors.New("t_ms goes backwards")
	ErrBadValue     = errors.New("bad value")
	ErrLineTooLong  = errors.New("line too long")
)

// Read reads a JSONL trace: one JSON object per line with t_ms (integer
// milliseconds, non-decreasing) and any subset of the fields in FieldNames.
// Blank lines are ignored. Unknown fields, wrong types, out-of-range values
// (thermal_status outside 0–6, NaN) and times going backwards are malformed
// lines, handled per opts.OnError; I/O errors always stop.
func Read(r io.Reader, opts ReadOptions) ([]Record, error) {
	maxLine := opts.MaxLineBytes
	if maxLine <= 0 {
		maxLine = 64 << 10
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var recs []Record
	var scratch []byte
	last := int64(math.MinInt64)
	for line := 1; ; line++ {
		b, eof, err := readLine(br, maxLine, &scratch)
		if err != nil && !errors.Is(err, ErrLineTooLong) {
			return recs, fmt.Errorf("line %d: %w", line, err)
		}
		var lerr *LineError
		switch {
		case err != nil:
			lerr = &LineError{Line: line, Err: fmt.Errorf("%w (limit %d bytes)", ErrLineTooLong, maxLine)}
		case len(bytes.TrimSpace(b)) == 0:
			if eof {
				return recs, nil
			}
			continue
		default:
			var rec Record
			rec, lerr = parseLine(b, line)
			if lerr == nil && rec.TMs < last {
				lerr = &LineError{Line: line, Field: "t_ms", Err: fmt.Errorf("%w: %d after %d", ErrTimeBackward, rec.TMs, last)}
			}
			if lerr == nil {
				last = rec.TMs
				recs = append(recs, rec)
			}
		}
		if lerr != nil {
			if opts.OnError != Skip {
				return recs, lerr
			}
			if opts.Skipped != nil {
				opts.Skipped(lerr)
			}
		}
		if eof {
			return recs, nil
		}
	}
}

// readLine returns the next line without its end of line, and whether the
// input ended with it. A line longer than max is consumed whole and reported
// as ErrLineTooLong.
func readLine(br *bufio.Reader, max int, scratch *[]byte) (line []byte, eof bool, err error) {
	buf := (*scratch)[:0]
	defer func() { *scratch = buf[:0] }()
	tooLong := false
	for {
		frag, err := br.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(frag) > max+1 { // +1: the newline
				tooLong, buf = true, buf[:0]
			} else {
				buf = append(buf, frag...)
			}
		}
		switch err {
		case bufio.ErrBufferFull:
			continue
		case nil, io.EOF:
			if tooLong {
				return nil, err == io.EOF, ErrLineTooLong
			}
			return bytes.TrimRight(buf, "\r\n"), err == io.EOF, nil
		default:
			return nil, true, err
		}
	}
}

// ReadFile reads the trace at path; errors name the file.
func ReadFile(path string, opts ReadOptions) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace %s: %w", path, err)
	}
	defer f.Close()
	recs, err := Read(f, opts)
	if err != nil {
		return recs, fmt.Errorf("trace %s: %w", path, err)
	}
	return recs, nil
}

// parseLine decodes one JSON object.
func parseLine(b []byte, line int) (Record, *LineError) {
	rec := Record{Line: line}
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&obj); err != nil {
		return rec, &LineError{Line: line, Err: fmt.Errorf("not a JSON object: %v", err)}
	}
	if obj == nil {
		return rec, &LineError{Line: line, Err: errors.New("not a JSON object: null")}
	}
	if dec.More() {
		return rec, &LineError{Line: line, Err: errors.New("more than one JSON value on the line")}
	}
	raw, ok := obj["t_ms"]
	if !ok {
		return rec, &LineError{Line: line, Field: "t_ms", Err: ErrMissingTime}
	}
	var t float64
	if err := json.Unmarshal(raw, &t); err != nil || t != math.Trunc(t) || t < 0 || t > 1<<53 {
		return rec, &LineError{Line: line, Field: "t_ms", Err: fmt.Errorf("%w: want a non-negative integer, got %s", ErrBadValue, raw)}
	}
	rec.TMs = int64(t)
	// Report unknown fields in a stable order: the first in the line.
	for name, raw := range obj {
		if name == "t_ms" {
			continue
		}
		f := lookupField(name)
		if f == nil {
			return rec, &LineError{Line: line, Field: firstUnknown(b, obj), Err: ErrUnknownField}
		}
		if err := f.set(&rec.Values, raw); err != nil {
			return rec, &LineError{Line: line, Field: name, Err: err}
		}
		rec.Present |= f.bit
	}
	return rec, nil
}

// firstUnknown names the unknown field that appears first in the line, so
// the error is the same on every run (map order is random).
func firstUnknown(b []byte, obj map[string]json.RawMessage) string {
	best, at := "", len(b)+1
	for name := range obj {
		if name == "t_ms" || lookupField(name) != nil {
			continue
		}
		key, _ := json.Marshal(name)
		if i := bytes.Index(b, key); i >= 0 && i < at {
			best, at = name, i
		} else if best == "" {
			best = name
		}
	}
	return best
}

// set decodes a JSON value into the field of s.
func (f *field) set(s *abi.Sensors, raw json.RawMessage) error {
	if string(bytes.TrimSpace(raw)) == "null" {
		return fmt.Errorf("%w: null", ErrBadValue)
	}
	switch f.kind {
	case kindBool:
		var v bool
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("%w: want true or false, got %s", ErrBadValue, raw)
		}
		*f.b(s) = v
		return nil
	case kindFloat32:
		var v float64
		if err := json.Unmarshal(raw, &v); err != nil || math.Abs(v) > math.MaxFloat32 {
			return fmt.Errorf("%w: want a number, got %s", ErrBadValue, raw)
		}
		*f.f32(s) = float32(v)
		return nil
	}
	var v float64
	if err := json.Unmarshal(raw, &v); err != nil || v != math.Trunc(v) {
		return fmt.Errorf("%w: want an integer, got %s", ErrBadValue, raw)
	}
	switch f.kind {
	case kindInt32:
		if v < math.MinInt32 || v > math.MaxInt32 {
			return fmt.Errorf("%w: %s out of int32 range", ErrBadValue, raw)
		}
		*f.i32(s) = int32(v)
	case kindTrim:
		if v < 0 || v > 255 {
			return fmt.Errorf("%w: trim level %s outside 0–255", ErrBadValue, raw)
		}
		s.TrimLevel = abi.TrimLevel(v)
	case kindThermal:
		if v < 0 || v > float64(abi.ThermalShutdown) {
			return fmt.Errorf("%w: thermal status %s outside 0–6", ErrBadValue, raw)
		}
		s.ThermalStatus = abi.ThermalStatus(v)
	}
	return nil
}
