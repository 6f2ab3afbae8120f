package precision

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Rule derives a layer's min_bits from its calibration numbers.
//
// "kl:T4,T56" (the default, kl:0.02,0.05): a precision of the 4-bit class
// (≤ 4 bits) is allowed when the layer's KL there is below T4, one of the
// 5/6-bit class (5-6 bits) when below T56, and 8 bits or more always.
// min_bits is the fewest bits allowed.
//
// "ppl:P" (e.g. ppl:0.5): a precision is allowed when the perplexity change
// it causes is below P percent.
//
// When no calibrated precision is allowed, min_bits is the base set's bits.
type Rule struct {
	Kind string  // "kl" or "ppl"
	T4   float64 // kl: threshold of the 4-bit class
	T56  float64 // kl: threshold of the 5/6-bit class
	PPL  float64 // ppl: threshold in percent
}

// DefaultRule is the seed rule: KL < 0.02 → 4-bit class, < 0.05 → 5/6-bit
// class, otherwise 8-bit.
var DefaultRule = Rule{Kind: "kl", T4: 0.02, T56: 0.05}

// ParseRule parses "kl:T4,T56" or "ppl:P" ("" = DefaultRule).
func ParseRule(s string) (Rule, error) {
	if s == "" {
		return DefaultRule, nil
	}
	kind, arg, _ := strings.Cut(s, ":")
	bad := func() (Rule, error) {
		return Rule{}, fmt.Errorf("min-bits rule %q: want kl:T4,T56 (e.g. kl:0.02,0.05) or ppl:P (e.g. ppl:0.5)", s)
	}
	num := func(x string) (float64, bool) {
		v, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		return v, err == nil && v > 0 && !math.IsInf(v, 0)
	}
	switch kind {
	case "kl":
		a, b, ok := strings.Cut(arg, ",")
		t4, ok1 := num(a)
		t56, ok2 := num(b)
		if !ok || !ok1 || !ok2 || t4 > t56 {
			return bad()
		}
		return Rule{Kind: "kl", T4: t4, T56: t56}, nil
	case "ppl":
		p, ok := num(arg)
		if !ok {
			return bad()
		}
		return Rule{Kind: "ppl", PPL: p}, nil
	}
	return bad()
}

// String is the rule in ParseRule's syntax.
func (r Rule) String() string {
	if r.Kind == "ppl" {
		return "ppl:" + strconv.FormatFloat(r.PPL, 'g', -1, 64)
	}
	return "kl:" + strconv.FormatFloat(r.T4, 'g', -1, 64) + "," + strconv.FormatFloat(r.T56, 'g', -1, 64)
}

// allows reports whether the rule accepts precision p for a layer.
func (r Rule) allows(p Precision) bool {
	if r.Kind == "ppl" {
		return p.PPLChangePct < r.PPL
	}
	switch {
	case p.Bits <= 4:
		return p.KL < r.T4
	case p.Bits <= 6:
		return p.KL < r.T56
	}
	return true
}

// MinBits is the fewest bits among precisions the rule allows, baseBits
// when it allows none.
func (r Rule) MinBits(ps []Precision, baseBits int) int {
	sorted := append([]Precision(nil), ps...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Bits < sorted[j].Bits })
	for _, p := range sorted {
		if r.allows(p) {
			return min(p.Bits, baseBits)
		}
	}
	return baseBits
}
