package kernels

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

// tokenizerVocabs are the vocabularies in ../shared/models/vocab that have a
// .gguf and llama.cpp's .inp/.out vectors (baichuan and gpt-neox have no
// vectors; chameleon, command-r, deepseek-r1-qwen, llama-bpe, qwen2 and
// roberta-bpe have vectors but no vocab file).
var tokenizerVocabs = []string{
	"bert-bge", "deepseek-coder", "deepseek-llm", "falcon", "gpt-2",
	"llama-spm", "mpt", "phi-3", "refact", "starcoder",
}

// tokenizerCase is one llama.cpp test vector.
type tokenizerCase struct {
	text string
	want []int32
}

// readTokenizerCases parses a .inp/.out pair the way llama.cpp's
// tests/test-tokenizer-0.cpp does: inputs separated by
// "\n__ggml_vocab_test__\n", one line of space-separated ids per case.
func readTokenizerCases(t *testing.T, inp, out string) []tokenizerCase {
	t.Helper()
	rawIn, err := os.ReadFile(inp)
	if err != nil {
		t.Fatal(err)
	}
	rawOut, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	const sep = "\n__ggml_vocab_test__\n"
	var texts []string
	for s := string(rawIn); len(s) > 0; {
		i := strings.Index(s, sep)
		if i < 0 {
			texts = append(texts, s)
			break
		}
		texts = append(texts, s[:i])
		s = s[i+len(sep):]
	}
	lines := strings.Split(strings.TrimSuffix(string(rawOut), "\n"), "\n")
	if len(texts) != len(lines) {
		t.Fatalf("%s has %d cases, %s has %d", inp, len(texts), out, len(lines))
	}
	cases := make([]tokenizerCase, len(texts))
	for i, line := range lines {
		cases[i].text = texts[i]
		for _, f := range strings.Fields(line) {
			id, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("%s line %d: %v", out, i+1, err)
			}
			cases[i].want = append(cases[i].want, int32(id))
		}
	}
	return cases
}

// TestTokenizerVectors reproduces llama.cpp's test-tokenizer-0 on every
// vocabulary here: vocab-only load, add_special = false, parse_special = false.
func TestTokenizerVectors(t *testing.T) {
	dir := sharedtest.Path(t, "models/vocab")
	// Every vocab with vectors must be in the table (so a new one is noticed).
	ggufs, _ := filepath.Glob(filepath.Join(dir, "ggml-vocab-*.gguf"))
	for _, g := range ggufs {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(g), "ggml-vocab-"), ".gguf")
		if _, err := os.Stat(g + ".out"); err == nil && !slices.Contains(tokenizerVocabs, name) {
			t.Errorf("vocab %s has test vectors but is not in tokenizerVocabs", name)
		}
	}
	total := 0
	for _, name := range tokenizerVocabs {
		t.Run(name, func(t *testing.T) {
			path := sharedtest.Path(t, "models/vocab/ggml-vocab-"+name+".gguf")
			cases := readTokenizerCases(t, path+".inp", path+".out")
			if len(cases) < 10 {
				t.Fatalf("only %d cases", len(cases))
			}
			m, err := LoadModel(path, ModelParams{VocabOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			v := m.Vocab()
			failed := 0
			for i, tc := range cases {
				got, err := v.Tokenize(tc.text, false, false)
				if err != nil {
					t.Fatalf("case %d %q: %v", i, tc.text, err)
				}
				if !slices.Equal(got, tc.want) {
					failed++
					if failed <= 5 {
						t.Errorf("case %d %q:\n got %v\nwant %v", i, tc.text, got, tc.want)
					}
				}
				// Pieces concatenate to what Detokenize gives.
				text, err := v.Detokenize(got, false, false)
				if err != nil {
					t.Fatal(err)
				}
				var pieces []byte
				for _, tok := range got {
					if pieces, err = v.Piece(pieces, tok, false); err != nil {
						t.Fatal(err)
					}
				}
				if roundTrips(name) {
					if string(pieces) != tc.text {
						t.Errorf("case %d: pieces of tokenize(%q) = %q", i, tc.text, pieces)
					}
					if !cleanupApplies(tc.text) && text != tc.text {
						t.Errorf("case %d: detokenize(tokenize(%q)) = %q", i, tc.text, text)
					}
				}
			}
			if failed > 0 {
				t.Errorf("%d of %d cases failed", failed, len(cases))
			}
			total += len(cases)
		})
	}
	t.Logf("%d tokenizer cases over %d vocabularies", total, len(tokenizerVocabs))
}

// roundTrips reports whether detokenize(tokenize(s)) == s is expected for a
// vocabulary. Not for: bert-bge (WordPiece lower-cases and strips accents),
// llama-spm and phi-3 (SentencePiece adds a leading space).
// Pieces are compared exactly; Detokenize only where llama.cpp's
// clean_spaces pass (dropping " " before ?!., and around apostrophes) does not
// apply.
func roundTrips(name string) bool {
	switch name {
	case "bert-bge", "llama-spm", "phi-3":
		return false
	}
	return true
}

func TestTokenizeEdgeCases(t *testing.T) {
	m := loadStories(t)
	v := m.Vocab()
	for _, tc := range []struct {
		name         string
		text         string
		addSpecial   bool
		parseSpecial bool
		want         func([]int32) bool
	}{
		{"empty", "", false, false, func(t []int32) bool { return len(t) == 0 }},
		{"empty-bos", "", true, false, func(t []int32) bool { return slices.Equal(t, []int32{1}) }},
		{"bos-added", "Lily", true, false, func(t []int32) bool { return len(t) >= 2 && t[0] == 1 }},
		{"special-parsed", "<s>", false, true, func(t []int32) bool { return slices.Equal(t, []int32{1}) }},
		{"special-as-text", "<s>", false, false, func(t []int32) bool { return len(t) > 1 }},
		// Many tokens in one call.
		{"long", strings.Repeat("a b ", 3000), false, false, func(t []int32) bool { return len(t) >= 3000 }},
		{"invalid-utf8", "\xff\xfe", false, false, func(t []int32) bool { return len(t) > 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := v.Tokenize(tc.text, tc.addSpecial, tc.parseSpecial)
			if err != nil || !tc.want(got) {
				t.Fatalf("Tokenize(%q) = %v, %v", tc.text, got, err)
			}
		})
	}
	// Piece: special tokens rendered only on request; no allocation with room.
	if p, _ := v.Piece(nil, v.EOS(), false); len(p) != 0 {
		t.Errorf("Piece(EOS, special=false) = %q", p)
	}
	if p, _ := v.Piece(nil, v.EOS(), true); string(p) != "</s>" {
		t.Errorf("Piece(EOS, special=true) = %q", p)
	}
	buf := make([]byte, 0, 64)
	if a := testing.AllocsPerRun(100, func() { buf, _ = v.Piece(buf[:0], 300, false) }); a != 0 {
		t.Errorf("Piece allocates %v times with room in dst", a)
	}
	if _, err := v.Detokenize([]int32{1, 99999}, false, false); err == nil {
		t.Error("Detokenize accepted an invalid id")
	}
}

// cleanupApplies reports whether llama.cpp's clean_spaces detokenization
// pass can change s.
func cleanupApplies(s string) bool {
	for _, p := range []string{" ?", " !", " .", " ,", " '"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}
