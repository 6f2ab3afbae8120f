package host

import (
	"errors"
	"fmt"
)

// draftStepper is a speculative round per step (GenerateOptions.Draft):
// the Draft prefills the prompt, samples, and generates a round of tokens
// per step; Generate emits them in order and stops at NPredict or an
// end-of-generation token, and finish rolls the session back over the
// round's tokens it did not emit and decodes the last emitted one, so a
// speculative session is a conversation too. Stats count rounds where plain
// generation counts steps: the first round is warm-up, not timed.
type draftStepper struct {
	d    *Draft
	one  [1]int32
	toks []int32 // the last round's tokens
}

func newDraftStepper(sess Session, opts GenerateOptions) (*draftStepper, error) {
	d := opts.Draft
	switch {
	case d.sp == nil:
		return nil, errors.New("GenerateOptions.Draft is closed")
	case !sessionIs(sess, d.sess):
		return nil, errors.New("GenerateOptions.Draft is attached to another session")
	case opts.OnLogits != nil:
		return nil, errors.New("GenerateOptions.OnLogits with a Draft: speculative rounds sample inside the Draft")
	}
	return &draftStepper{d: d}, nil
}

func (s *draftStepper) name() string                 { return "speculative round" }
func (s *draftStepper) prefill(prompt []int32) error { return s.d.sp.Prefill(prompt) }
func (s *draftStepper) next() ([]int32, error)       { return s.toks, nil }
func (s *draftStepper) finish(kept int) (int, error) { return s.d.sp.Finish(kept) }

func (s *draftStepper) first() ([]int32, error) {
	tok, err := s.d.sp.First()
	if err != nil {
		return nil, fmt.Errorf("first token: %w", err)
	}
	s.one[0] = tok
	return s.one[:], nil
}

func (s *draftStepper) advance() (err error) {
	s.toks, err = s.d.sp.Step()
	return err
}
