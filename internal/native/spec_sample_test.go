package native

import (
	"math"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/sample"
)

// chiSquareCrit is the chi-square critical value at α = 0.001 for df
// degrees of freedom (Wilson–Hilferty; z = 3.0902 is the normal 0.999
// quantile; within 1% of the exact value for df ≥ 3).
func chiSquareCrit(df int) float64 {
	const z = 3.0902
	d := float64(df)
	a := 2 / (9 * d)
	return d * math.Pow(1-a+z*math.Sqrt(a), 3)
}

// TestSpecSamplingExact: at a fixed context, the first token a speculative
// round emits is distributed as the target's sampling distribution (after
// temperature, top-k, top-p, min-p and repetition penalty), with a good
// draft (self:q4_0) and a bad one (skip:3, acceptance < 0.5): chi-square
// at α = 0.001 over 3000 draws. Draw i uses seed i, so the test is
// deterministic.
func TestSpecSamplingExact(t *testing.T) {
	e := loadSpecTarget(t)
	prompt := specPrompt(t, e)
	params := sample.Params{Temp: 1.5, TopK: 40, TopP: 0.98, MinP: 0.01, RepeatPenalty: 1.3, RepeatLastN: 16}
	// The target's distribution after the prompt.
	ref, err := e.newSession(engine.SessionConfig{NCtx: 128})
	if err != nil {
		t.Fatal(err)
	}
	if err := ref.Decode(prompt, engine.LogitsLast); err != nil {
		t.Fatal(err)
	}
	logits := make([]float32, e.Config().NVocab)
	if err := ref.Logits(len(prompt)-1, logits); err != nil {
		t.Fatal(err)
	}
	ref.Close()
	smp, _ := sample.New(params, len(logits))
	for _, tk := range prompt[:len(prompt)-1] {
		smp.Accept(tk)
	}
	// The Speculator is started with the prompt minus its last token, whose
	// sampled continuation is then forced to the prompt's last token.
	smp.Accept(prompt[len(prompt)-1])
	var p sample.Dist
	if err := smp.Dist(logits, nil, &p); err != nil {
		t.Fatal(err)
	}
	const draws = 3000
	for _, c := range []struct {
		draft   DraftSpec
		k       int
		goodAcc bool
	}{
		{DraftSpec{Kind: DraftSelf, Type: "q4_0"}, 3, true},
		{DraftSpec{Kind: DraftSkip, N: 3}, 3, false}, // acceptance 0.14 here
	} {
		t.Run(c.draft.String(), func(t *testing.T) {
			s, err := e.newSession(engine.SessionConfig{NCtx: 128})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			sp, err := NewSpeculator(s, c.draft, params, c.k)
			if err != nil {
				t.Fatal(err)
			}
			defer sp.Close()
			if _, err := sp.Start(prompt[:len(prompt)-1]); err != nil {
				t.Fatal(err)
			}
			base := sp.hist[:len(prompt)-1]
			counts := map[int32]int{}
			for i := range draws {
				// Reset to the fixed context with a fresh seeded sampler.
				if err := s.Truncate(len(prompt) - 1); err != nil {
					t.Fatal(err)
				}
				sp.hist = append(base, prompt[len(prompt)-1])
				pi := params
				pi.Seed = uint64(i)
				sp.smp, _ = sample.New(pi, len(logits))
				sp.dsmp, _ = sample.New(pi, len(logits))
				for _, tk := range sp.hist {
					sp.smp.Accept(tk)
					sp.dsmp.Accept(tk)
				}
				out, err := sp.Step()
				if err != nil {
					t.Fatal(err)
				}
				counts[out[0]]++
			}
			acc := sp.Stats().Acceptance()
			if c.goodAcc != (acc >= 0.5) {
				t.Fatalf("acceptance %.3f: want %s 0.5 for this draft", acc, map[bool]string{true: "≥", false: "<"}[c.goodAcc])
			}
			// Chi-square over the tokens with expected count ≥ 5, the rest pooled.
			var chi, poolE float64
			poolO, bins := 0, 0
			for i, tk := range p.Tok {
				exp := float64(p.P[i]) * draws
				if exp < 5 {
					poolE += exp
					poolO += counts[tk]
					continue
				}
				d := float64(counts[tk]) - exp
				chi += d * d / exp
				bins++
			}
			outside := draws
			for _, tk := range p.Tok {
				outside -= counts[tk]
			}
			if outside != 0 {
				t.Fatalf("%d draws outside the target's support", outside)
			}
			if poolE >= 5 {
				d := float64(poolO) - poolE
				chi += d * d / poolE
				bins++
			}
			if bins < 4 {
				t.Fatalf("only %d bins: the distribution is too peaked for the test", bins)
			}
			crit := chiSquareCrit(bins - 1)
			t.Logf("acceptance %.3f, chi² %.1f over %d bins, critical %.1f (α = 0.001)", acc, chi, bins, crit)
			if chi > crit {
				t.Fatalf("chi² %.1f > %.1f: emitted tokens are not distributed as the target", chi, crit)
			}
		})
	}
}
