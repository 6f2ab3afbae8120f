package native

import (
	"fmt"
	"testing"

	"github.com/edgellm/edgellm/internal/sample"
)

// TestSpecSeedIdentity: with sampling (temperature 0.8, top-k, top-p,
// min-p, a repetition penalty) and a fixed seed, speculative decoding emits
// exactly the tokens plain sampling does, for every draft kind, with a fixed
// K, with auto K (chosen from measured timings, so it differs run to run)
// and with K changed before every round as a policy would: the draws are
// keyed by position and coupled between draft and target
// (internal/sample keyed.go), so the text is a function of the seed alone.
func TestSpecSeedIdentity(t *testing.T) {
	e := loadSpecTarget(t)
	prompt := specPrompt(t, e)
	const n = 200
	p := sample.Params{Temp: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.1, RepeatLastN: 64, Seed: 7}
	s := specSession(t, e, specSetups[0])
	want := plainRun(t, s, p, prompt, n)
	s.Close()
	other := p
	other.Seed = 8
	s = specSession(t, e, specSetups[0])
	if firstDiff(plainRun(t, s, other, prompt, n), want) < 0 {
		t.Fatal("seeds 7 and 8 gave the same text: the test cannot tell seeds apart")
	}
	s.Close()
	for _, d := range specDrafts(t, e) {
		for _, mode := range []string{"K1", "K3", "auto", "policy"} {
			t.Run(fmt.Sprintf("%s/%s", d, mode), func(t *testing.T) {
				s := specSession(t, e, specSetups[0])
				defer s.Close()
				sp, err := NewSpeculator(s, d, p, 4)
				if err != nil {
					t.Fatal(err)
				}
				defer sp.Close()
				switch mode {
				case "K1":
					sp.SetK(1)
				case "K3":
					sp.SetK(3)
				case "auto":
					sp.SetAuto(true)
				}
				tok, err := sp.Start(prompt)
				if err != nil {
					t.Fatal(err)
				}
				got, ks := []int32{tok}, map[int]bool{}
				for step := 0; len(got) < n; step++ {
					if mode == "policy" {
						ks[sp.SetK((step*5+1)%9)] = true // 1, 6, 2, 7, 3, 8, 4, 0, 5, …
					}
					toks, err := sp.Step()
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, toks...)
				}
				if i := firstDiff(got[:n], want); i >= 0 {
					t.Fatalf("token %d: speculative %d, plain %d (acceptance %.3f)", i, got[i], want[i], sp.Stats().Acceptance())
				}
				if st := sp.Stats(); st.Rounds == 0 || (mode == "policy" && len(ks) < 5) {
					t.Fatalf("%d rounds, K values %v: speculation did not run as the mode asks", st.Rounds, ks)
				}
				t.Logf("acceptance %.3f over %d rounds", sp.Stats().Acceptance(), sp.Stats().Rounds)
			})
		}
	}
}
