package runstats

import (
	"bufio"
	"fmt"
	"io"
	"os"
)

// Tail follows a stats file being written: each Poll hands over the
// complete lines added since the last one.
type Tail struct {
	path string
	f    *os.File
	r    *bufio.Reader
	part []byte // an incomplete last line
}

// NewTail follows the file at path, which need not exist yet.
func NewTail(path string) *Tail { return &Tail{path: path} }

// Poll calls fn for each complete line written since the last Poll.
func (t *Tail) Poll(fn func(Event)) error {
	if t.f == nil {
		f, err := os.Open(t.path)
		if os.IsNotExist(err) {
			return nil // the writer has not created it yet
		}
		if err != nil {
			return err
		}
		t.f, t.r = f, bufio.NewReader(f)
	}
	for {
		b, err := t.r.ReadSlice('\n')
		t.part = append(t.part, b...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF {
			return nil // keep the partial line for the next poll
		}
		if err != nil {
			return err
		}
		ev, perr := Parse(t.part)
		t.part = t.part[:0]
		if perr != nil {
			return fmt.Errorf("stats file %s: %v", t.path, perr)
		}
		fn(ev)
	}
}

// Close closes the file.
func (t *Tail) Close() {
	if t.f != nil {
		t.f.Close()
	}
}
