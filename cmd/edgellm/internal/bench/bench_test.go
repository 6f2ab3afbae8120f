package bench

import (
	"slices"
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []float64
		want float64
	}{
		{"none", nil, 0},
		{"one", []float64{7}, 7},
		{"odd unsorted", []float64{9, 1, 5}, 5},
		{"even averages the middle two", []float64{4, 1, 3, 2}, 2.5},
		{"outlier does not move it", []float64{100, 100, 1e9, 101, 99}, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.in)
			if got := Median(in); got != tc.want {
				t.Fatalf("Median(%v) = %v, want %v", tc.in, got, tc.want)
			}
			if !slices.Equal(in, tc.in) {
				t.Fatalf("Median modified its input: %v", in)
			}
		})
	}
}

// fakeVocab tokenizes by splitting on spaces: token = 10 + word length.
type fakeVocab struct{ n int }

func (v fakeVocab) Tokenize(text string, addSpecial bool) ([]int32, error) {
	var out []int32
	if addSpecial {
		out = append(out, v.BOS())
	}
	for _, w := range strings.Fields(text) {
		out = append(out, int32(10+len(w)))
	}
	return out, nil
}
func (fakeVocab) Piece(dst []byte, tok int32) []byte { return dst }
func (fakeVocab) BOS() int32                         { return 1 }
func (fakeVocab) EOS() int32                         { return 2 }
func (fakeVocab) IsEOG(tok int32) bool               { return tok == 2 }
func (v fakeVocab) NVocab() int                      { return v.n }

func TestMakePrompt(t *testing.T) {
	v := fakeVocab{n: 50}
	for _, tc := range []struct {
		name, text string
		n          int
		want       []int32
		source     string
	}{
		{"text repeated and cut", "a bb ccc", 8, []int32{1, 11, 12, 13, 11, 12, 13, 11}, "BOS + t (3 tokens"},
		{"just BOS", "a bb", 1, []int32{1}, "BOS + t"},
		{"no text: synthetic ids", "", 5, []int32{1, 1, 8, 15, 22}, "synthetic"},
		{"blank text falls back", "   ", 3, []int32{1, 1, 8}, "synthetic"},
		{"ids wrap at n_vocab", "", 10, []int32{1, 1, 8, 15, 22, 29, 36, 43, 0, 7}, "synthetic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := MakePrompt(v, tc.text, "t", tc.n)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.Tokens, tc.want) {
				t.Fatalf("tokens %v, want %v", p.Tokens, tc.want)
			}
			if !strings.Contains(p.Source, tc.source) {
				t.Fatalf("source %q does not say %q", p.Source, tc.source)
			}
		})
	}
	if _, err := MakePrompt(v, "x", "t", 0); err == nil {
		t.Fatal("a prompt of 0 tokens was accepted")
	}
}

func TestOptionsValidate(t *testing.T) {
	ok := Options{NPrompt: 4, NGen: 3, Repeats: 1}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid options refused: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"no prompt", func(o *Options) { o.NPrompt = 0 }, "prompt"},
		{"too few generated", func(o *Options) { o.NGen = 2 }, "warm-up"},
		{"no repeats", func(o *Options) { o.Repeats = 0 }, "repeats"},
		{"negative threads", func(o *Options) { o.Threads = -1 }, "threads"},
		{"negative context", func(o *Options) { o.NCtx = -1 }, "context"},
		{"bad kv type", func(o *Options) { o.KVType = "q3" }, "KV type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ok
			tc.edit(&o)
			err := o.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error about %q", err, tc.want)
			}
		})
	}
}
