package kernels

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestQuantize quantizes the ff192 stories model (rows multiple of 32) to
// the tiers of the ladder, loads each and decodes a few tokens.
func TestQuantize(t *testing.T) {
	in := sharedtest.Path(t, "models/derived/stories260K-ff192-f32.gguf")
	inSize := fileSize(t, in)
	for _, tc := range []struct {
		name string
		ft   FileType
	}{
		{"q8_0", FileTypeQ8_0},
		{"q4_k_m", FileTypeQ4_K_M},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "stories-"+tc.name+".gguf")
			var calls, lastN int
			var names []string
			err := Quantize(in, out, QuantizeParams{FileType: tc.ft, Threads: 1, Progress: func(i, n int, tensor string) {
				calls++
				if i != calls {
					t.Errorf("progress %d/%d %s out of order (call %d)", i, n, tensor, calls)
				}
				lastN = n
				names = append(names, tensor)
			}})
			if err != nil {
				t.Fatal(err)
			}
			if calls == 0 || calls != lastN {
				t.Fatalf("progress: %d calls, n = %d", calls, lastN)
			}
			if names[0] == "" || !strings.Contains(strings.Join(names, " "), "blk.0.") {
				t.Fatalf("progress names %v", names)
			}
			if outSize := fileSize(t, out); outSize >= inSize/2 {
				t.Fatalf("%s output %d bytes, input %d", tc.name, outSize, inSize)
			}
			// Only the output file remains: no temporary left behind.
			if ents, _ := os.ReadDir(filepath.Dir(out)); len(ents) != 1 {
				t.Fatalf("output dir holds %d entries", len(ents))
			}
			m, err := LoadModel(out, ModelParams{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if ft := m.FileType(); ft != tc.ft {
				t.Errorf("FileType = %v, want %v", ft, tc.ft)
			}
			c := newCtx(t, m, ContextParams{NCtx: 256})
			b := newBatch(t, 4, 1)
			toks := greedy(t, c, b, []int32{m.Vocab().BOS()}, 0, 8)
			logits := make([]float32, c.NVocab())
			if err := c.Logits(b.Len()-1, logits); err != nil {
				t.Fatal(err)
			}
			for _, v := range logits {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatal("non-finite logit")
				}
			}
			text, _ := m.Vocab().Detokenize(toks, false, false)
			// Q8_0 keeps the F32 text (README: 100% draft acceptance).
			if tc.ft == FileTypeQ8_0 && !strings.HasPrefix(strings.TrimLeft(text, " "), "Once upon a time") {
				t.Errorf("Q8_0 greedy text %q", text)
			}
			c.Close()
		})
	}
}

func TestQuantizeErrors(t *testing.T) {
	in := sharedtest.Path(t, "models/derived/stories260K-ff192-f32.gguf")
	dir := t.TempDir()
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o500); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		in, out string
		p       QuantizeParams
		want    error
		text    string
	}{
		{"missing-in", filepath.Join(dir, "none.gguf"), filepath.Join(dir, "o.gguf"), QuantizeParams{FileType: FileTypeQ8_0}, fs.ErrNotExist, "none.gguf"},
		{"not-gguf", writeFile(t, "x.bin", []byte("not a model at all......")), filepath.Join(dir, "o.gguf"), QuantizeParams{FileType: FileTypeQ8_0}, ErrNotGGUF, "magic"},
		{"bad-type", in, filepath.Join(dir, "o.gguf"), QuantizeParams{FileType: 999}, ErrInvalidArg, "file type"},
		{"same-file", in, in, QuantizeParams{FileType: FileTypeQ8_0}, ErrInvalidArg, "input file"},
		{"out-dir-missing", in, filepath.Join(dir, "no", "such", "o.gguf"), QuantizeParams{FileType: FileTypeQ8_0}, fs.ErrNotExist, "not writable"},
		{"out-is-dir", in, dir, QuantizeParams{FileType: FileTypeQ8_0}, ErrInvalidArg, "directory"},
		// The unpadded model's rows (172) are not a multiple of 32: llama.cpp fails.
		{"rows-not-multiple", sharedtest.Stories260K(t), filepath.Join(dir, "o.gguf"), QuantizeParams{FileType: FileTypeQ4_0, Pure: true}, ErrQuantize, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Quantize(tc.in, tc.out, tc.p)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Quantize = %v, want %v mentioning %q", err, tc.want, tc.text)
			}
		})
	}
	if os.Geteuid() != 0 { // root writes anywhere
		if err := Quantize(in, filepath.Join(ro, "o.gguf"), QuantizeParams{FileType: FileTypeQ8_0}); !errors.Is(err, fs.ErrPermission) {
			t.Errorf("Quantize into read-only dir = %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "o.gguf")); err == nil {
		t.Error("a failed quantize left its output")
	}
}

func TestParseFileType(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want FileType
		ok   bool
	}{
		{"q4_k_m", FileTypeQ4_K_M, true},
		{"Q8_0", FileTypeQ8_0, true},
		{" q5_k_s ", FileTypeQ5_K_S, true},
		{"q5_0", FileTypeQ5_0, true},
		{"q4_0", FileTypeQ4_0, true},
		{"f16", FileTypeF16, true},
		{"q4_k", 0, false},
		{"", 0, false},
	} {
		got, err := ParseFileType(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseFileType(%q) = %v, %v", tc.in, got, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "q4_k_m")) {
			t.Errorf("error does not list valid types: %v", err)
		}
	}
	if s := FileTypeQ4_K_M.String(); s != "Q4_K_M" {
		t.Errorf("String = %q", s)
	}
}

func fileSize(t *testing.T, p string) int64 {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}
