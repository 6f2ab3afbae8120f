package kernels

/*
#include "llama.h"
*/
import "C"

import (
	"fmt"
	"math"
	"unsafe"
)

// Vocab is a model's tokenizer (llama_vocab). It belongs to its Model: get it
// with Model.Vocab, never close it; once the Model is closed its methods fail
// with ErrClosed (or return -1 / false). Safe for concurrent use.
type Vocab struct {
	m   *Model
	ptr *C.struct_llama_vocab
}

// VocabType is llama_vocab_type.
type VocabType int

// Vocabulary types.
const (
	VocabNone   VocabType = C.LLAMA_VOCAB_TYPE_NONE
	VocabSPM    VocabType = C.LLAMA_VOCAB_TYPE_SPM
	VocabBPE    VocabType = C.LLAMA_VOCAB_TYPE_BPE
	VocabWPM    VocabType = C.LLAMA_VOCAB_TYPE_WPM
	VocabUGM    VocabType = C.LLAMA_VOCAB_TYPE_UGM
	VocabRWKV   VocabType = C.LLAMA_VOCAB_TYPE_RWKV
	VocabPLaMo2 VocabType = C.LLAMA_VOCAB_TYPE_PLAMO2
)

var vocabTypeNames = [...]string{"none", "spm", "bpe", "wpm", "ugm", "rwkv", "plamo2"}

func (t VocabType) String() string {
	if t >= 0 && int(t) < len(vocabTypeNames) {
		return vocabTypeNames[t]
	}
	return fmt.Sprintf("VocabType(%d)", int(t))
}

func (v *Vocab) live() *C.struct_llama_vocab {
	if v == nil {
		return nil
	}
	return v.ptr
}

// NVocab is the number of tokens; valid ids are [0, NVocab).
func (v *Vocab) NVocab() int {
	if v.live() == nil {
		return 0
	}
	return v.m.nVocab
}

// Type is the tokenizer algorithm.
func (v *Vocab) Type() VocabType {
	p := v.live()
	if p == nil {
		return VocabNone
	}
	return VocabType(C.llama_vocab_type(p))
}

func (v *Vocab) special(f func(*C.struct_llama_vocab) C.llama_token) int32 {
	p := v.live()
	if p == nil {
		return -1
	}
	return int32(f(p))
}

// BOS is the beginning-of-sequence token, -1 if none.
func (v *Vocab) BOS() int32 {
	return v.special(func(p *C.struct_llama_vocab) C.llama_token { return C.llama_vocab_bos(p) })
}

// EOS is the end-of-sequence token, -1 if none.
func (v *Vocab) EOS() int32 {
	return v.special(func(p *C.struct_llama_vocab) C.llama_token { return C.llama_vocab_eos(p) })
}

// EOT is the end-of-turn token, -1 if none.
func (v *Vocab) EOT() int32 {
	return v.special(func(p *C.struct_llama_vocab) C.llama_token { return C.llama_vocab_eot(p) })
}

// NL is the newline token, -1 if none.
func (v *Vocab) NL() int32 {
	return v.special(func(p *C.struct_llama_vocab) C.llama_token { return C.llama_vocab_nl(p) })
}

// AddBOS reports whether the model wants BOS prepended (Tokenize with
// addSpecial does it).
func (v *Vocab) AddBOS() bool {
	p := v.live()
	return p != nil && bool(C.llama_vocab_get_add_bos(p))
}

// AddEOS reports whether the model wants EOS appended.
func (v *Vocab) AddEOS() bool {
	p := v.live()
	return p != nil && bool(C.llama_vocab_get_add_eos(p))
}

// Valid reports whether tok is a token id of this vocabulary.
func (v *Vocab) Valid(tok int32) bool {
	return v.live() != nil && tok >= 0 && int(tok) < v.m.nVocab
}

// IsEOG reports whether tok ends generation (EOS, EOT, EOM, ...). False for
// invalid ids.
func (v *Vocab) IsEOG(tok int32) bool {
	if !v.Valid(tok) {
		return false
	}
	return bool(C.llama_vocab_is_eog(v.ptr, C.llama_token(tok)))
}

// IsControl reports whether tok is a control token. False for invalid ids.
func (v *Vocab) IsControl(tok int32) bool {
	if !v.Valid(tok) {
		return false
	}
	return bool(C.llama_vocab_is_control(v.ptr, C.llama_token(tok)))
}

// Text is the raw vocabulary entry of tok (SentencePiece "▁" not decoded; use
// Piece for display text).
func (v *Vocab) Text(tok int32) (string, error) {
	if err := v.check(tok); err != nil {
		return "", err
	}
	return C.GoString(C.llama_vocab_get_text(v.ptr, C.llama_token(tok))), nil
}

func (v *Vocab) check(tok int32) error {
	if v.live() == nil {
		return ErrClosed
	}
	if tok < 0 || int(tok) >= v.m.nVocab {
		return fmt.Errorf("%w: %d not in [0, %d)", ErrInvalidToken, tok, v.m.nVocab)
	}
	return nil
}

// Tokenize converts text to token ids. addSpecial adds BOS/EOS as the model
// wants; parseSpecial recognises special-token text such as "<s>" in text
// (otherwise it is tokenized as plain text).
func (v *Vocab) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	p := v.live()
	if p == nil {
		return nil, ErrClosed
	}
	if len(text) > 1<<30 {
		return nil, fmt.Errorf("%w: text of %d bytes is too long to tokenize", ErrInvalidArg, len(text))
	}
	var ctext *C.char
	if len(text) > 0 {
		ctext = (*C.char)(unsafe.Pointer(unsafe.StringData(text)))
	}
	toks := make([]int32, len(text)+2)
	for {
		var dst *C.llama_token
		if len(toks) > 0 {
			dst = (*C.llama_token)(unsafe.Pointer(&toks[0]))
		}
		n := int(C.llama_tokenize(p, ctext, C.int32_t(len(text)), dst, C.int32_t(len(toks)), C.bool(addSpecial), C.bool(parseSpecial)))
		if n >= 0 {
			return toks[:n], nil
		}
		if n == math.MinInt32 { // the result does not fit in int32
			return nil, fmt.Errorf("%w: tokenization overflow", ErrInvalidArg)
		}
		// Negative: the buffer was too small; -n tokens are needed.
		toks = make([]int32, -n)
	}
}

// Piece appends the text of token tok to dst and returns the extended slice.
// special renders control tokens (e.g. "</s>") instead of dropping them. It
// does not allocate when dst has room for the piece.
func (v *Vocab) Piece(dst []byte, tok int32, special bool) ([]byte, error) {
	if err := v.check(tok); err != nil {
		return dst, err
	}
	for {
		if cap(dst)-len(dst) < 8 {
			dst = grow(dst, 32)
		}
		room := dst[len(dst):cap(dst)]
		n := int(C.llama_token_to_piece(v.ptr, C.llama_token(tok), (*C.char)(unsafe.Pointer(&room[0])), C.int32_t(len(room)), 0, C.bool(special)))
		if n >= 0 {
			return dst[:len(dst)+n], nil
		}
		dst = grow(dst, -n)
	}
}

// grow returns dst with room for at least n more bytes.
func grow(dst []byte, n int) []byte {
	nd := make([]byte, len(dst), len(dst)+n)
	copy(nd, dst)
	return nd
}

// Detokenize converts tokens back to text. removeSpecial drops a leading BOS
// / trailing EOS the model adds; unparseSpecial renders special tokens as text.
func (v *Vocab) Detokenize(tokens []int32, removeSpecial, unparseSpecial bool) (string, error) {
	p := v.live()
	if p == nil {
		return "", ErrClosed
	}
	for i, t := range tokens {
		if t < 0 || int(t) >= v.m.nVocab {
			return "", fmt.Errorf("%w: tokens[%d] = %d not in [0, %d)", ErrInvalidToken, i, t, v.m.nVocab)
		}
	}
	if len(tokens) == 0 {
		return "", nil
	}
	if len(tokens) > 1<<28 {
		return "", fmt.Errorf("%w: %d tokens is too many to detokenize", ErrInvalidArg, len(tokens))
	}
	buf := make([]byte, 8*len(tokens)+16)
	for {
		n := int(C.llama_detokenize(p, (*C.llama_token)(unsafe.Pointer(&tokens[0])), C.int32_t(len(tokens)),
			(*C.char)(unsafe.Pointer(&buf[0])), C.int32_t(len(buf)), C.bool(removeSpecial), C.bool(unparseSpecial)))
		if n >= 0 {
			return string(buf[:n]), nil
		}
		buf = make([]byte, -n)
	}
}
