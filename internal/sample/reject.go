package sample

// Rejection sampling for speculative decoding (Leviathan et al. 2023, Chen
// et al. 2023): a draft token x drawn from the draft's distribution q is
// accepted with probability min(1, p(x)/q(x)), p the target's; on the first
// rejection the token is drawn from norm(max(0, p − q)). Then every
// emitted token is distributed exactly as p. A greedy or n-gram draft is the
// point-mass case q = δ(x): x is accepted with probability p(x) and the
// residual is p with x removed.

// Rejector holds the dense scratch for the residual (one per sequence).
type Rejector struct {
	dense []float32 // q by token id; zero outside q's support between calls
	res   Dist
}

// NewRejector returns a Rejector for a vocabulary of nVocab tokens.
func NewRejector(nVocab int) *Rejector { return &Rejector{dense: make([]float32, nVocab)} }

// Accept reports whether draft token x, drawn from q, is accepted against
// the target p with the uniform draw u ∈ [0, 1). A nil q is a point mass on x.
func Accept(p, q *Dist, x int32, u float32) bool {
	px := float64(p.Prob(x))
	qx := 1.0
	if q != nil {
		qx = float64(q.Prob(x))
	}
	if px >= qx {
		return true
	}
	return float64(u) < px/qx
}

// Residual draws from norm(max(0, p − q)) with the uniform u; a nil q is a
// point mass on x. When p ≤ q everywhere (only possible when p = q, where a
// rejection has probability 0), it draws from p.
func (r *Rejector) Residual(p, q *Dist, x int32, u float32) int32 {
	if q == nil {
		r.dense[x] = 1
	} else {
		for i, t := range q.Tok {
			r.dense[t] = q.P[i]
		}
	}
	d := &r.res
	d.Tok, d.P = d.Tok[:0], d.P[:0]
	for i, t := range p.Tok {
		if v := p.P[i] - r.dense[t]; v > 0 {
			d.Tok, d.P = append(d.Tok, t), append(d.P, v)
		}
	}
	if q == nil {
		r.dense[x] = 0
	} else {
		for _, t := range q.Tok {
			r.dense[t] = 0
		}
	}
	if len(d.Tok) == 0 {
		return p.Draw(u)
	}
	return d.Draw(u) // Draw normalises by the total
}
