package sample

import "math"

// Dist is a token distribution after a Sampler's transforms: Tok[i] has
// probability P[i], the most likely first, summing to 1. Greedy parameters
// give a point mass on the argmax. Speculative decoding compares the
// target's and the draft's Dist (reject.go).
type Dist struct {
	Tok []int32
	P   []float32
}

// Dist computes the distribution Sample draws from for logits, as if the
// tokens in extra had been accepted after the history (the repetition
// penalty sees them), into d. It uses no randomness.
func (s *Sampler) Dist(logits []float32, extra []int32, d *Dist) error {
	tok, done, err := s.filter(logits, extra)
	if err != nil {
		return err
	}
	d.Tok, d.P = d.Tok[:0], d.P[:0]
	if done {
		d.Tok, d.P = append(d.Tok, tok), append(d.P, 1)
		return nil
	}
	c := &s.cand
	var total float64
	for i := 0; i < c.n; i++ {
		total += float64(c.val[i])
	}
	for i := 0; i < c.n; i++ {
		d.Tok = append(d.Tok, c.tok[i])
		d.P = append(d.P, float32(float64(c.val[i])/total))
	}
	return nil
}

// Prob is the probability of tok (0 outside the support).
func (d *Dist) Prob(tok int32) float32 {
	for i, t := range d.Tok {
		if t == tok {
			return d.P[i]
		}
	}
	return 0
}

// Top is the most likely token and its probability.
func (d *Dist) Top() (int32, float32) {
	if len(d.Tok) == 0 {
		return -1, 0
	}
	return d.Tok[0], d.P[0]
}

// Draw returns the token at cumulative probability u ∈ [0, 1).
func (d *Dist) Draw(u float32) int32 {
	r := float64(u)
	var total float64
	for _, p := range d.P {
		total += float64(p)
	}
	r *= total
	for i, p := range d.P {
		if r -= float64(p); r < 0 {
			return d.Tok[i]
		}
	}
	return d.Tok[len(d.Tok)-1]
}

// TopProb is the softmax probability (temperature 1) of the most likely
// token of logits: a draft's confidence for p_min.
func TopProb(logits []float32) float32 {
	if len(logits) == 0 {
		return 0
	}
	m := logits[0]
	for _, v := range logits {
		m = max(m, v)
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v - m))
	}
	return float32(1 / sum)
}
