package host

import (
	"errors"
	"strings"
)

// Tokenize turns text into the tokens sess decodes next (the Prompt of a
// Generate call): on a new session (Len 0) as a prompt starts, with BOS
// and the tokenizer's own prefix; on a session that has decoded before, as
// the next words of its conversation (TokenizeContinuation: no BOS, no
// prefix). Special-token text is not parsed.
func Tokenize(sess Session, text string) ([]int32, error) {
	if sess == nil {
		return nil, errors.New("Tokenize: nil Session")
	}
	v := sess.Engine().Vocab()
	if sess.Len() == 0 {
		return v.Tokenize(text, true)
	}
	return TokenizeContinuation(v, text)
}

// TokenizeContinuation tokenizes text as it appears after other text inside
// one prompt: without BOS or other special tokens and without the leading
// space a SentencePiece tokenizer prefixes to its input (llama.cpp's
// add_space_prefix), so that " The" continues a conversation as the one
// token "▁The" it is inside a prompt, not as "▁" "▁The". Tokens never merge
// across the boundary with what came before (the text before is already
// decoded), which is the one way the result can differ from tokenizing the
// whole conversation at once.
func TokenizeContinuation(v Vocab, text string) ([]int32, error) {
	if text == "" {
		return nil, nil
	}
	prefixed, err := addsSpacePrefix(v)
	if err != nil || !prefixed {
		return v.Tokenize(text, false)
	}
	if rest, ok := strings.CutPrefix(text, " "); ok && rest != "" && rest[0] != ' ' {
		// The tokenizer's prefix is the text's own leading space.
		return v.Tokenize(rest, false)
	}
	// Anchor the text after a newline, which SentencePiece vocabularies
	// keep as a token of its own, and drop the tokens of " \n".
	const anchor = "\n"
	toks, err := v.Tokenize(anchor+text, false)
	if err != nil {
		return nil, err
	}
	var piece []byte
	for i, t := range toks {
		piece = v.Piece(piece, t)
		if string(piece) == " "+anchor {
			return toks[i+1:], nil
		}
		if len(piece) > len(anchor)+1 {
			break
		}
	}
	return v.Tokenize(text, false) // no clean boundary: the tokenizer's own result
}

// addsSpacePrefix reports whether v prefixes a space to its input: "a"
// comes back as " a".
func addsSpacePrefix(v Vocab) (bool, error) {
	toks, err := v.Tokenize("a", false)
	if err != nil {
		return false, err
	}
	var b []byte
	for _, t := range toks {
		b = v.Piece(b, t)
	}
	return string(b) == " a", nil
}
