package capi

import (
	"fmt"

	"github.com/edgellm/edgellm/host"
)

// tokenize is v.Tokenize, or with parseSpecial its special-token parsing
// (both engines' vocabularies have it: host.SpecialTokenizer), which adds
// BOS once even when the text writes it (as host.TokenizeChat).
func tokenize(v host.Vocab, text string, addSpecial, parseSpecial bool) ([]int32, error) {
	if !parseSpecial {
		return v.Tokenize(text, addSpecial)
	}
	st, ok := v.(host.SpecialTokenizer)
	if !ok {
		return nil, fmt.Errorf("the vocabulary (%T) cannot parse special tokens", v)
	}
	toks, err := st.TokenizeSpecial(text, addSpecial)
	if bos := v.BOS(); err == nil && addSpecial && bos >= 0 && len(toks) >= 2 && toks[0] == bos && toks[1] == bos {
		toks = toks[1:]
	}
	return toks, err
}
