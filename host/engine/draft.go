package engine

import (
	"time"

	"github.com/edgellm/edgellm/abi"
)

// DraftStats count what speculative decoding did (host.Draft.Stats; the
// native engine's Speculator keeps them).
type DraftStats struct {
	Rounds     int // rounds with at least one draft token
	PlainSteps int // steps without a draft (ngram miss, p_min on the first token, K = 0)
	Drafted    int // draft tokens proposed
	Accepted   int // draft tokens accepted
	Emitted    int // tokens emitted (accepted + corrections + bonus + plain)
	// DraftedAt[i] and AcceptedAt[i] count draft position i (0-based).
	DraftedAt, AcceptedAt [abi.MaxSpecK]int
	DraftSteps            int // draft forward passes
	DraftTime             time.Duration
	VerifyTime            time.Duration // verify batches and plain steps
	Clamped               int           // rounds whose K was cut to fit the context or ring
}

// Acceptance is accepted ÷ drafted tokens (0 before any draft).
func (st DraftStats) Acceptance() float64 {
	if st.Drafted == 0 {
		return 0
	}
	return float64(st.Accepted) / float64(st.Drafted)
}

// MeanAccepted is the mean number of draft tokens accepted per round.
func (st DraftStats) MeanAccepted() float64 {
	if st.Rounds == 0 {
		return 0
	}
	return float64(st.Accepted) / float64(st.Rounds)
}
