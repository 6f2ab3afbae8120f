package sample

import "math"

// KL is the Kullback–Leibler divergence KL(softmax(p) ‖ softmax(q)) in nats,
// computed in float64. p and q must have the same length.
func KL(p, q []float32) float64 {
	lp, lq := LogSumExp(p), LogSumExp(q)
	var kl float64
	for i := range p {
		a := float64(p[i]) - lp
		b := float64(q[i]) - lq
		kl += math.Exp(a) * (a - b)
	}
	return max(kl, 0)
}

// LogSumExp is log Σ exp(x_i), computed stably in float64.
func LogSumExp(x []float32) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, float64(v))
	}
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v) - m)
	}
	return m + math.Log(s)
}
