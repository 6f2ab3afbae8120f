package logitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

const magic = "EDGLOGT1"

// maxVocab and maxPrompt bound what Read accepts from a header.
const (
	maxVocab  = 1 << 22
	maxPrompt = 1 << 24
)

// Writer appends records to a logits file.
type Writer struct {
	f       *os.File
	nVocab  int
	rec     []byte // the record being built
	pending bool   // logits set, token not yet
	err     error
}

// Create writes the header of a new logits file.
func Create(path string, nVocab int, prompt []int32) (*Writer, error) {
	if nVocab <= 0 || nVocab > maxVocab {
		return nil, fmt.Errorf("logitlog: vocabulary size %d out of range", nVocab)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("logitlog: %w", err)
	}
	h := make([]byte, 0, len(magic)+8+4*len(prompt))
	h = append(h, magic...)
	h = binary.LittleEndian.AppendUint32(h, uint32(nVocab))
	h = binary.LittleEndian.AppendUint32(h, uint32(len(prompt)))
	for _, t := range prompt {
		h = binary.LittleEndian.AppendUint32(h, uint32(t))
	}
	if _, err := f.Write(h); err != nil {
		f.Close()
		return nil, fmt.Errorf("logitlog: write %s: %w", path, err)
	}
	return &Writer{f: f, nVocab: nVocab, rec: make([]byte, 4*nVocab+4)}, nil
}

// Logits sets the logits of the next record. It does not allocate.
func (w *Writer) Logits(l []float32) error {
	if len(l) != w.nVocab {
		return fmt.Errorf("logitlog: %d logits, vocabulary has %d", len(l), w.nVocab)
	}
	for i, v := range l {
		binary.LittleEndian.PutUint32(w.rec[4*i:], math.Float32bits(v))
	}
	w.pending = true
	return nil
}

// Token completes the record with the token sampled from its logits and
// writes it. It does not allocate.
func (w *Writer) Token(t int32) error {
	if !w.pending {
		return errors.New("logitlog: token without logits")
	}
	w.pending = false
	binary.LittleEndian.PutUint32(w.rec[4*w.nVocab:], uint32(t))
	if _, err := w.f.Write(w.rec); err != nil && w.err == nil {
		w.err = fmt.Errorf("logitlog: write %s: %w", w.f.Name(), err)
	}
	return w.err
}

// Close closes the file and reports the first write error. A record whose
// token never came (generation ended) is not written.
func (w *Writer) Close() error {
	if w == nil || w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	if w.err != nil {
		return w.err
	}
	if err != nil {
		return fmt.Errorf("logitlog: %w", err)
	}
	return nil
}

// Log is a logits file read back.
type Log struct {
	NVocab int
	Prompt []int32
	Tokens []int32     // the generated tokens
	Logits [][]float32 // Logits[i]: what Tokens[i] was sampled from
	// Truncated is set when the file ended inside a record (the writer was
	// killed); that record is dropped.
	Truncated bool
}

// Read reads a logits file.
func Read(path string) (*Log, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("logitlog: %w", err)
	}
	l, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("logitlog: %s: %w", path, err)
	}
	return l, nil
}

// Parse decodes the bytes of a logits file.
func Parse(b []byte) (*Log, error) {
	if len(b) < len(magic)+8 || string(b[:len(magic)]) != magic {
		return nil, errors.New("not a logits file (bad magic or short header)")
	}
	b = b[len(magic):]
	nv, np := binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:])
	b = b[8:]
	if nv == 0 || nv > maxVocab {
		return nil, fmt.Errorf("vocabulary size %d out of range", nv)
	}
	if np > maxPrompt || uint64(len(b)) < 4*uint64(np) {
		return nil, fmt.Errorf("prompt of %d tokens does not fit the file", np)
	}
	l := &Log{NVocab: int(nv), Prompt: make([]int32, np)}
	for i := range l.Prompt {
		l.Prompt[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	b = b[4*np:]
	rec := 4*int(nv) + 4
	n := len(b) / rec
	l.Truncated = len(b)%rec != 0
	l.Tokens, l.Logits = make([]int32, n), make([][]float32, n)
	all := make([]float32, n*int(nv))
	for i := range n {
		r := b[i*rec:]
		lg := all[i*int(nv) : (i+1)*int(nv)]
		for j := range lg {
			lg[j] = math.Float32frombits(binary.LittleEndian.Uint32(r[4*j:]))
		}
		l.Logits[i] = lg
		l.Tokens[i] = int32(binary.LittleEndian.Uint32(r[4*int(nv):]))
	}
	return l, nil
}

var _ io.Closer = (*Writer)(nil)
