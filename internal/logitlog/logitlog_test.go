package logitlog

import (
	"os"
	"path/filepath"
	"testing"
)

func write(t *testing.T, nv int, prompt []int32, steps int, dangling bool) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "l.bin")
	w, err := Create(p, nv, prompt)
	if err != nil {
		t.Fatal(err)
	}
	l := make([]float32, nv)
	for i := range steps {
		for j := range l {
			l[j] = float32(i*nv + j)
		}
		if err := w.Logits(l); err != nil {
			t.Fatal(err)
		}
		if err := w.Token(int32(100 + i)); err != nil {
			t.Fatal(err)
		}
	}
	if dangling {
		w.Logits(l) // generation ended: no token, not written
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRoundTrip(t *testing.T) {
	p := write(t, 5, []int32{1, 2, 3}, 4, true)
	l, err := Read(p)
	if err != nil {
		t.Fatal(err)
	}
	if l.NVocab != 5 || len(l.Prompt) != 3 || l.Prompt[2] != 3 || len(l.Tokens) != 4 || l.Truncated {
		t.Fatalf("read back %+v", l)
	}
	for i := range 4 {
		if l.Tokens[i] != int32(100+i) || l.Logits[i][4] != float32(i*5+4) {
			t.Fatalf("step %d: token %d logits %v", i, l.Tokens[i], l.Logits[i])
		}
	}
}

func TestTruncatedRecordDropped(t *testing.T) {
	p := write(t, 8, []int32{1}, 3, false)
	b, _ := os.ReadFile(p)
	l, err := Parse(b[:len(b)-7]) // killed mid-write
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Tokens) != 2 || !l.Truncated {
		t.Fatalf("got %d records, truncated %v; want 2, true", len(l.Tokens), l.Truncated)
	}
}

func TestBadInput(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":       nil,
		"bad magic":   []byte("EDGLOGT0\x01\x00\x00\x00\x00\x00\x00\x00"),
		"zero vocab":  []byte("EDGLOGT1\x00\x00\x00\x00\x00\x00\x00\x00"),
		"long prompt": []byte("EDGLOGT1\x01\x00\x00\x00\xff\x00\x00\x00"),
	} {
		if _, err := Parse(b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := Create(filepath.Join(t.TempDir(), "x"), 0, nil); err == nil {
		t.Error("vocabulary 0 accepted")
	}
	w, err := Create(filepath.Join(t.TempDir(), "x"), 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Logits(make([]float32, 3)); err == nil {
		t.Error("3 logits for a vocabulary of 4 accepted")
	}
	if err := w.Token(1); err == nil {
		t.Error("token without logits accepted")
	}
}

func TestNoAllocPerToken(t *testing.T) {
	w, err := Create(filepath.Join(t.TempDir(), "x"), 512, []int32{1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	l := make([]float32, 512)
	if a := testing.AllocsPerRun(100, func() { w.Logits(l); w.Token(7) }); a != 0 {
		t.Fatalf("%v allocations per token", a)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("EDGLOGT1\x02\x00\x00\x00\x01\x00\x00\x00\x05\x00\x00\x00\x00\x00\x80\x3f\x00\x00\x00\x00\x09\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := Parse(b)
		if err != nil {
			return
		}
		if len(l.Tokens) != len(l.Logits) {
			t.Fatalf("%d tokens, %d logit vectors", len(l.Tokens), len(l.Logits))
		}
	})
}
