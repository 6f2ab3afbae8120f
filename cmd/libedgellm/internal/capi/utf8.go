package capi

import "unicode/utf8"

// utf8Joiner turns token pieces into whole UTF-8 characters
// (EDGELLM_GENERATE_UTF8_COMPLETE): the bytes of a character split across
// tokens wait for the token that completes it; a byte that can start no
// valid character becomes U+FFFD.
type utf8Joiner struct {
	held []byte // an incomplete character's first bytes (at most 3)
	out  []byte
}

// push appends piece and returns the whole characters now available (the
// slice is reused by the next call).
func (j *utf8Joiner) push(piece []byte) []byte {
	j.held = append(j.held, piece...)
	j.out = j.out[:0]
	b := j.held
	for len(b) > 0 {
		if !utf8.FullRune(b) { // a valid prefix of a longer character
			break
		}
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			j.out = utf8.AppendRune(j.out, utf8.RuneError)
		} else {
			j.out = append(j.out, b[:n]...)
		}
		b = b[n:]
	}
	j.held = append(j.held[:0], b...)
	return j.out
}

// flush returns what is held (an incomplete character, as one U+FFFD) and
// forgets it; nil when nothing is.
func (j *utf8Joiner) flush() []byte {
	if len(j.held) == 0 {
		return nil
	}
	j.held = j.held[:0]
	j.out = utf8.AppendRune(j.out[:0], utf8.RuneError)
	return j.out
}

func (j *utf8Joiner) reset() { j.held = j.held[:0] }
