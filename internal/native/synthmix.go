package native

// The SIMULATED acceptance of speculation benchmarks (Options.SynthAgree).
// With random weights a greedy model falls into a fixed point (it repeats
// one token), so no choice of weights makes a draft agree with its target
// at a chosen rate: it agrees at every position or at none. The benchmark
// pair is therefore built in two parts, both outside the forward pass:
// the target's layers ≥ N write nothing into the residual stream
// (synth.ZeroFrom zeroes their output projections in a copy of the file,
// so they are still read and multiplied: the target costs what the real
// model costs), which makes a skip:N draft propose exactly the target's
// token; and this wrapper replaces the proposal at a hashed ≈ 1 − p share
// of positions with another token, which the verification rejects. The
// draft's acceptance is then ≈ p, independently per position, as the
// analytic (1 − α^(K+1)) / (1 − α) assumes, and the output is still the
// target's own. Not a real model: results are labelled SYNTHETIC.

// synthAgreeAt reports whether position pos is an agreeing one for
// agreement probability p: a splitmix64 hash of pos against p.
func synthAgreeAt(pos int32, p float32) bool {
	z := uint64(pos) + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>40)/(1<<24) < float64(p)
}

// synthMiss wraps a drafter: the proposal judged by the target row at a
// non-agreeing position is moved to the next token id (SIMULATED).
type synthMiss struct {
	drafter
	p      float32
	nVocab int32
}

func (d *synthMiss) draft(sp *Speculator, k int) error {
	n := int32(sp.s.n) // the target row of the round's last token
	if err := d.drafter.draft(sp, k); err != nil {
		return err
	}
	for i, t := range sp.drafts {
		if !synthAgreeAt(n+int32(i), d.p) {
			sp.drafts[i] = (t + 1) % d.nVocab
		}
	}
	return nil
}
