package engine

import (
	"fmt"
	"math"
)

// SamplingParams configures token sampling: greedy when Temp ≤ 0, otherwise
// a seeded draw after repetition penalty, top-k, top-p, min-p and
// temperature. The zero value is greedy decoding.
type SamplingParams struct {
	// Temp is the softmax temperature; ≤ 0 selects greedy (argmax).
	Temp float32
	// TopK keeps the K most likely tokens; 0 disables.
	TopK int
	// TopP keeps the smallest set of tokens whose probability sums to ≥ TopP; 1 disables.
	TopP float32
	// MinP drops tokens less likely than MinP × the top token's probability; 0 disables.
	MinP float32
	// RepeatPenalty divides positive (multiplies negative) logits of tokens seen
	// in the last RepeatLastN tokens; 1 disables.
	RepeatPenalty float32
	RepeatLastN   int
	// Seed seeds the random draw.
	Seed uint64
}

// DefaultSampling returns llama.cpp's default sampling parameters.
func DefaultSampling() SamplingParams {
	return SamplingParams{Temp: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1, RepeatLastN: 64, Seed: 42}
}

// Validate reports the first parameter out of range.
func (p SamplingParams) Validate() error {
	switch {
	case math.IsNaN(float64(p.Temp)) || p.Temp > 100:
		return fmt.Errorf("temperature %v out of range [0, 100]", p.Temp)
	case p.TopK < 0:
		return fmt.Errorf("top-k %d is negative", p.TopK)
	case !(p.TopP > 0 && p.TopP <= 1):
		return fmt.Errorf("top-p %v out of range (0, 1]", p.TopP)
	case !(p.MinP >= 0 && p.MinP < 1):
		return fmt.Errorf("min-p %v out of range [0, 1)", p.MinP)
	case !(p.RepeatPenalty > 0):
		return fmt.Errorf("repeat penalty %v must be > 0", p.RepeatPenalty)
	case p.RepeatLastN < 0:
		return fmt.Errorf("repeat-last-n %d is negative", p.RepeatLastN)
	}
	return nil
}

// Greedy reports whether the parameters select argmax.
func (p SamplingParams) Greedy() bool { return p.Temp <= 0 }
