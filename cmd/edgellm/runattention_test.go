package main

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/edgellm/edgellm/internal/logitlog"
	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/kernels/matvec"
)

// TestRunAttentionEdgellm: `run --attention edgellm` reaches the session
// through the CLI's door. Greedy on stories260K with edgellm's matmuls,
// the logits it samples from (--logits-out) are not flash attention's
// bitwise (so the flag was not dropped on the way), and stay within the
// parity tolerance of them (so it is attention, not something broken).
func TestRunAttentionEdgellm(t *testing.T) {
	if !matvec.AttnUsable() {
		t.Skip("no edgellm attention kernel on this CPU: the session runs ggml's flash attention")
	}
	model := sharedtest.Stories260K(t)
	dir := t.TempDir()
	logs := map[string]*logitlog.Log{}
	for _, att := range []string{"edgellm", "flash"} {
		out := filepath.Join(dir, att+".bin")
		_, errs, code := runCLI(t, "run", "-m", model, "--engine", "native", "--kernels", "edgellm", "--attention", att,
			"--temp", "0", "-n", "8", "--threads", "1", "-p", "Once upon a time", "--logits-out", out)
		if code != 0 {
			t.Fatalf("--attention %s: exit %d: %s", att, code, errs)
		}
		l, err := logitlog.Read(out)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Logits) != 8 {
			t.Fatalf("--attention %s: %d logit rows, want 8", att, len(l.Logits))
		}
		logs[att] = l
	}
	ours, flash := logs["edgellm"], logs["flash"]
	same := true
	for i := range ours.Logits {
		if !slices.Equal(ours.Tokens[:i], flash.Tokens[:i]) {
			break // different contexts from here on: nothing to compare
		}
		if err := sharedtest.CompareLogits(ours.Logits[i], flash.Logits[i]); err != nil {
			t.Errorf("token %d: edgellm attention against flash: %v", i, err)
		}
		same = same && slices.Equal(ours.Logits[i], flash.Logits[i])
	}
	if same {
		t.Fatal("every logit bitwise flash attention's: --attention edgellm did not reach the session")
	}
}
