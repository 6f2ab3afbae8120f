package bench

import (
	"fmt"

	"github.com/edgellm/edgellm/host"
)

// Prompt is the synthetic prompt of a benchmark and where its tokens came from.
type Prompt struct {
	Tokens []int32
	// Source says how the tokens were made, for the report.
	Source string
}

// MakePrompt builds n prompt tokens: BOS, then the tokens of text repeated as
// often as needed and cut at n. With no text (or text that tokenizes to
// nothing) it falls back to BOS followed by the valid ids 1 + 7i mod n_vocab.
// The same vocabulary and text always give the same tokens, so two engines
// over one model see identical prompts. name labels the text in Source.
func MakePrompt(v host.Vocab, text, name string, n int) (Prompt, error) {
	if n < 1 {
		return Prompt{}, fmt.Errorf("bench: prompt of %d tokens (want ≥ 1)", n)
	}
	nv := v.NVocab()
	if nv < 2 {
		return Prompt{}, fmt.Errorf("bench: vocabulary of %d tokens", nv)
	}
	toks := make([]int32, 0, n)
	toks = append(toks, v.BOS())
	if text != "" {
		body, err := v.Tokenize(text, false)
		if err != nil {
			return Prompt{}, fmt.Errorf("bench: tokenize %s: %w", name, err)
		}
		if len(body) > 0 {
			for len(toks) < n {
				toks = append(toks, body[:min(len(body), n-len(toks))]...)
			}
			return Prompt{Tokens: toks, Source: fmt.Sprintf("BOS + %s (%d tokens, repeated to fill)", name, len(body))}, nil
		}
	}
	for i := 0; len(toks) < n; i++ {
		toks = append(toks, int32((1+7*i)%nv))
	}
	return Prompt{Tokens: toks, Source: "BOS + synthetic ids 1+7i mod n_vocab (no text)"}, nil
}
