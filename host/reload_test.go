package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgellm/edgellm/host/policy"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// swapOnChange is an adapter's change log that swaps the next bundle in
// the moment the adapter logs a change: after the policy call that made
// the decision, before anyone reads which revision made it.
type swapOnChange struct {
	a    *Adapter
	path string
	err  error
	done bool
}

func (w *swapOnChange) Write(p []byte) (int, error) {
	if w.a != nil && !w.done && strings.Contains(string(p), "tier") {
		w.done = true
		w.err = w.a.Load(context.Background(), w.path)
	}
	return len(p), nil
}

// TestDecisionRevision: a bundle swapped in right after a policy call
// (during its apply) does not take the credit for the decision its
// predecessor made: DecisionRevision stays 1 while Revision is already 2,
// and the next call's decision is revision 2's.
func TestDecisionRevision(t *testing.T) {
	pub, priv, err := policy.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bundle := func(fixture string, rev int64) string {
		wasm, err := os.ReadFile(filepath.Join("policy", "testdata", fixture+".wasm"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := policy.SignBundle(wasm, policy.Manifest{Name: "rev", Revision: rev, ABIVersion: "1.0", MinEngineVersion: "0.0.0"}, priv)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, fixture+".tar.gz")
		if err := b.Write(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a1, b2 := bundle("good_a", 1), bundle("good_b", 2)
	d := filepath.Join(sharedtest.Dir(), "models", "derived")
	var tiers []string
	for _, f := range []string{"stories260K-ff192-Q8_0.gguf", "stories260K-ff192-Q5_0.gguf", "stories260K-ff192-Q4_0.gguf"} {
		tiers = append(tiers, filepath.Join(d, f))
	}
	eng, err := Load("", LoadOptions{Tiers: tiers})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	sess, err := eng.NewSession(SessionConfig{NCtx: 64, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	log := &swapOnChange{path: b2}
	cfg := policy.NewConfig().WithTrustedKey(pub).WithDeadline(time.Second)
	a, err := AttachPolicy(context.Background(), sess, PolicyOptions{Path: a1, Config: &cfg, Log: log,
		Sensors: "trace:../testdata/traces/thermal_ramp.jsonl"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	log.a = a
	for step := 0; step < 64 && !log.done; step++ {
		if err := a.BeforeStep(step); err != nil {
			t.Fatal(err)
		}
	}
	if !log.done || log.err != nil {
		t.Fatalf("no tier change logged to swap on (done %v, load %v)", log.done, log.err)
	}
	if a.Revision() != 2 || a.DecisionRevision() != 1 || a.Current().Tier != 1 {
		t.Fatalf("after the swap: revision %d in service, decision from revision %d (tier %d): want 2, 1 (tier 1: good_a's)",
			a.Revision(), a.DecisionRevision(), a.Current().Tier)
	}
	for step := 64; step < 128 && a.DecisionRevision() != 2; step++ {
		if err := a.BeforeStep(step); err != nil {
			t.Fatal(err)
		}
	}
	if a.DecisionRevision() != 2 || a.Current().Tier != 2 {
		t.Fatalf("next calls: decision from revision %d, tier %d: want 2 (tier 2: good_b's)", a.DecisionRevision(), a.Current().Tier)
	}
}
