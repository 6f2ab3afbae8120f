package sample

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/edgellm/edgellm/host/engine"
)

// Params configures a Sampler (host/engine.SamplingParams). The zero value
// is greedy decoding.
type Params = engine.SamplingParams

// DefaultParams are llama.cpp's defaults.
func DefaultParams() Params { return engine.DefaultSampling() }

// ErrEmptyLogits is returned for a zero-length logits slice.
var ErrEmptyLogits = errors.New("sample: empty logits")

// Sampler draws tokens. Create it with New.
type Sampler struct {
	p Params

	cand    candidates // scratch: (token, logit) pairs
	history []int32    // ring of the last RepeatLastN accepted tokens
	hpos    int
	hlen    int
	pos     int // tokens accepted: the position of the next draw (keyed.go)
}

// New returns a Sampler for a vocabulary of nVocab tokens.
func New(p Params, nVocab int) (*Sampler, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if nVocab <= 0 {
		return nil, fmt.Errorf("sample: vocabulary size %d", nVocab)
	}
	s := &Sampler{
		p:       p,
		cand:    candidates{tok: make([]int32, nVocab), val: make([]float32, nVocab)},
		history: make([]int32, p.RepeatLastN),
	}
	return s, nil
}

// Params returns the sampler's parameters.
func (s *Sampler) Params() Params { return s.p }

// Accept records a token that was emitted, for the repetition penalty.
func (s *Sampler) Accept(tok int32) {
	s.pos++
	if len(s.history) == 0 {
		return
	}
	s.history[s.hpos] = tok
	s.hpos = (s.hpos + 1) % len(s.history)
	if s.hlen < len(s.history) {
		s.hlen++
	}
}

// Reset forgets the history (not the position: the next draw's noise).
func (s *Sampler) Reset() { s.hpos, s.hlen = 0, 0 }

// Sample returns the next token for logits (len n_vocab). logits is not modified.
func (s *Sampler) Sample(logits []float32) (int32, error) {
	tok, done, err := s.filter(logits, nil)
	if err != nil || done {
		return tok, err
	}
	// 5. draw from the renormalised distribution, with the noise keyed by
	// the position (keyed.go): the same token speculative decoding emits.
	c := &s.cand
	return c.tok[race(s.p.Seed, s.pos, c.tok[:c.n], c.val[:c.n])], nil
}

// filter applies the transforms to logits, as if the tokens in extra had
// been accepted after the history. Greedy: it returns the argmax and done.
// Otherwise s.cand holds the surviving tokens, most likely first, with
// their softmax probabilities before renormalisation.
func (s *Sampler) filter(logits []float32, extra []int32) (int32, bool, error) {
	n := len(logits)
	if n == 0 {
		return 0, true, ErrEmptyLogits
	}
	if n > len(s.cand.tok) {
		return 0, true, fmt.Errorf("sample: %d logits for a vocabulary of %d", n, len(s.cand.tok))
	}
	c := &s.cand
	c.n = n
	copy(c.val, logits)
	for i := 0; i < n; i++ {
		c.tok[i] = int32(i)
	}
	// 1. repetition penalty (as llama.cpp: divide positive logits, multiply negative).
	s.penalize(logits, extra)
	// 2. greedy: argmax (lowest id wins ties, deterministic).
	if s.p.Greedy() {
		best := 0
		for i := 1; i < n; i++ {
			if c.val[i] > c.val[best] {
				best = i
			}
		}
		return int32(best), true, nil
	}
	// 3. top-k: keep the k largest, sorted descending.
	k := n
	if s.p.TopK > 0 && s.p.TopK < n {
		k = s.p.TopK
	}
	c.selectTop(k)
	c.n = k
	// 4. softmax (with temperature) over the survivors; top-p and min-p on it.
	inv := 1 / s.p.Temp
	maxv := c.val[0]
	var sum float64
	for i := 0; i < c.n; i++ {
		e := math.Exp(float64((c.val[i] - maxv) * inv))
		c.val[i] = float32(e)
		sum += e
	}
	for i := 0; i < c.n; i++ {
		c.val[i] = float32(float64(c.val[i]) / sum)
	}
	if s.p.TopP < 1 {
		var cum float32
		for i := 0; i < c.n; i++ {
			cum += c.val[i]
			if cum >= s.p.TopP {
				c.n = i + 1
				break
			}
		}
	}
	if s.p.MinP > 0 {
		limit := c.val[0] * s.p.MinP
		for i := 1; i < c.n; i++ {
			if c.val[i] < limit {
				c.n = i
				break
			}
		}
	}
	return 0, false, nil
}

// penalize applies the repetition penalty to s.cand for the last
// RepeatLastN tokens of the history followed by extra, once per token.
func (s *Sampler) penalize(logits []float32, extra []int32) {
	if s.p.RepeatPenalty == 1 || len(s.history) == 0 {
		return
	}
	c := &s.cand
	n := len(logits)
	pen := func(t int32) {
		if int(t) < n && t >= 0 && c.val[t] == logits[t] { // not yet penalised: once per token, as llama.cpp
			if c.val[t] > 0 {
				c.val[t] /= s.p.RepeatPenalty
			} else {
				c.val[t] *= s.p.RepeatPenalty
			}
		}
	}
	L := len(s.history)
	ne := min(len(extra), L)
	for _, t := range extra[len(extra)-ne:] {
		pen(t)
	}
	keep := min(s.hlen, L-ne) // the most recent history tokens still in the window
	for i := range keep {
		pen(s.history[((s.hpos-1-i)%L+L)%L])
	}
}

// candidates is a (token, value) list sortable by value, descending.
type candidates struct {
	tok []int32
	val []float32
	n   int
}

func (c *candidates) Len() int { return c.n }
func (c *candidates) Less(i, j int) bool {
	return c.val[i] > c.val[j] || (c.val[i] == c.val[j] && c.tok[i] < c.tok[j])
}
func (c *candidates) Swap(i, j int) {
	c.tok[i], c.tok[j] = c.tok[j], c.tok[i]
	c.val[i], c.val[j] = c.val[j], c.val[i]
}

// selectTop moves the k best candidates to the front, sorted best first.
// It keeps a min-heap of the best k seen (O(n log k)), then sorts it.
func (c *candidates) selectTop(k int) {
	if k >= c.n {
		sort.Sort(c)
		return
	}
	// heap over [0, k): the root is the worst of the best k.
	worse := func(i, j int) bool { return c.Less(j, i) }
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= k {
				return
			}
			m := l
			if r := l + 1; r < k && worse(r, l) {
				m = r
			}
			if !worse(m, i) {
				return
			}
			c.Swap(i, m)
			i = m
		}
	}
	for i := k/2 - 1; i >= 0; i-- {
		down(i)
	}
	for i := k; i < c.n; i++ {
		if c.Less(i, 0) {
			c.Swap(i, 0)
			down(0)
		}
	}
	n := c.n
	c.n = k
	sort.Sort(c)
	c.n = n
}
