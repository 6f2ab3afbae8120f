package sample

import "math"

// Position-keyed randomness. Every random choice the sampler makes for the
// token at position pos (counted over the tokens the Sampler has accepted:
// the call's prompt, then everything emitted) comes from noise that is a
// pure function of (seed, pos, token id): a counter-based generator, no
// stream to consume. The draw is a Gumbel-max race (in its exponential
// form): token i wins when E_i / p_i is least, E_i = −log U(seed, pos, i)
// standard exponential, which picks i with probability exactly p_i.
//
// Speculative decoding races the draft's distribution q and the target's p
// with the same noise at the same position (a Gumbel coupling): the draft
// proposes x = race(q, pos), the target's token is y = race(p, pos), x is
// accepted when y = x and y is emitted otherwise. The emitted token is y
// either way, so the text is the one plain sampling gives with the same
// seed, whatever the draft, K, or the timing that chose K; and exact in
// distribution because y alone is a Gumbel-max draw from p. The price is
// acceptance: the coupling accepts with probability at least (1−δ)/(1+δ)
// (δ the total variation between p and q) instead of rejection sampling's
// 1−δ; for a point-mass draft (greedy, n-gram) it is p(x) in both.

// mix64 is SplitMix64's finaliser (Steele, Lea, Flood 2014): a bijection
// on 64 bits with full avalanche.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// KeyedUniform is U(seed, pos, tok) ∈ (0, 1): 53 random bits of a hash
// of the three, never 0 or 1.
func KeyedUniform(seed uint64, pos int, tok int32) float64 {
	h := mix64(seed ^ 0x9e3779b97f4a7c15)
	h = mix64(h ^ uint64(pos)*0xd1b54a32d192ed03)
	h = mix64(h ^ uint64(uint32(tok))*0x8cb92ba72f3d8dd7)
	return (float64(h>>11) + 0.5) / (1 << 53)
}

// race is the index i of (tok, p) minimising −log U(seed, pos, tok_i)/p_i
// (entries with p_i ≤ 0 never win; the first entry when none is positive).
func race(seed uint64, pos int, tok []int32, p []float32) int {
	best, bestKey := 0, math.Inf(1)
	for i, t := range tok {
		if p[i] <= 0 {
			continue
		}
		if k := -math.Log(KeyedUniform(seed, pos, t)) / float64(p[i]); k < bestKey {
			best, bestKey = i, k
		}
	}
	return best
}

// Race draws from d at position pos with the seed's keyed noise: the same
// (seed, pos) gives the same token for the same d, and coupled tokens for
// two distributions (see the package's position-keyed randomness).
func (d *Dist) Race(seed uint64, pos int) int32 {
	if len(d.Tok) == 0 {
		return -1
	}
	return d.Tok[race(seed, pos, d.Tok, d.P)]
}

// Pos is the position of the next token: how many tokens the Sampler has
// accepted.
func (s *Sampler) Pos() int { return s.pos }

// DrawAt draws from d for the token at Pos()+ahead (ahead > 0 when tokens
// not yet accepted come first: a speculative round's drafts) with the
// sampler's seed.
func (s *Sampler) DrawAt(d *Dist, ahead int) int32 { return d.Race(s.p.Seed, s.pos+ahead) }
