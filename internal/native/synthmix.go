package native

import "github.com/edgellm/edgellm/kernels"

// The per-position SYNTHETIC mix (Options.SynthAgree). With random weights
// a greedy model falls into a fixed point (it repeats one token), so a
// global ε makes the skip:N draft agree at every position or at none: the
// acceptance jumps from 1 to 0 as ε grows. The mix instead chooses, per
// absolute position, between a target that IS the skip:N draft (layers ≥ N
// scaled by 0) and the full model (layers ≥ N scaled by ε, 1 when ε is 0),
// with a fixed hash of the position: the draft's token at a position is
// accepted with probability ≈ SynthAgree, independently of the others, as
// the analytic (1 − α^(K+1)) / (1 − α) assumes. Every layer is still
// computed at every position, so the target's cost is the real model's.
// Not a real model: results are labelled SYNTHETIC.

// synthAgreeAt reports whether position pos is an agreeing one (scale 0)
// for agreement probability p: a splitmix64 hash of pos against p.
func synthAgreeAt(pos int32, p float32) bool {
	z := uint64(pos) + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>40)/(1<<24) < float64(p)
}

// synthScale is the scale of layers ≥ synthFrom at position pos.
func (g *graph) synthScale(pos int32) float32 {
	if synthAgreeAt(pos, g.synthAgree) {
		return 0
	}
	if g.synthEps != 0 {
		return g.synthEps
	}
	return 1
}

// fillSynthRow writes each batch row's scale (no-op without the mix).
func (g *graph) fillSynthRow(pos []int32) {
	if g.synthRow.Nil() {
		return
	}
	row := g.synthRow.Float32s()
	for i, p := range pos {
		row[i] = g.synthScale(p)
	}
}

// synthOut scales t (the output of a layer ≥ synthFrom, rows = batch rows,
// or the logits rows when out is set) by the SYNTHETIC ε or the per-row mix.
func (g *graph) synthOut(c *kernels.GGMLContext, t kernels.Tensor, il int, out bool) kernels.Tensor {
	switch {
	case il < g.synthFrom:
		return t
	case !g.synthRow.Nil():
		row := g.synthRow
		if out {
			row = c.GetRows(row, g.outIDs)
		}
		return c.Mul(t, row)
	case g.synthEps != 0:
		return c.Scale(t, g.synthEps)
	}
	return t
}
