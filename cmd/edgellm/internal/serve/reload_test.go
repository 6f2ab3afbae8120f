package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/host/policy"
	"github.com/openai/openai-go"
)

// TestPolicyInboxReloadMidStream drops a newer signed bundle into the
// policy inbox while a streaming request runs, at a token position: the
// server's OnToken hook renames revision 2 into the inbox after token
// reloadAt and holds the decode loop until the inbox watcher has swapped it
// in (host.AttachPolicy's Inbox, as `serve --policy-inbox` wires it). The
// request must complete with every generated token streamed once, in order;
// the decisions before token reloadAt come from revision 1 (good_a: tier 1),
// those from it on from revision 2 (good_b: tier 2, on a 3-tier ladder so the
// two differ); /metrics reports revision 2.
func TestPolicyInboxReloadMidStream(t *testing.T) {
	const reloadAt, maxTokens = 12, 48
	pub, priv, err := policy.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	inbox, staging := filepath.Join(dir, "inbox"), filepath.Join(dir, "staging")
	os.Mkdir(inbox, 0o755)
	os.Mkdir(staging, 0o755)
	// deliver signs a fixture and renames it into the inbox (the contract:
	// write elsewhere on the same file system, then rename in).
	deliver := func(fixture string, rev int64) error {
		wasm, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "host", "policy", "testdata", fixture+".wasm"))
		if err != nil {
			return err
		}
		b, err := policy.SignBundle(wasm, policy.Manifest{Name: "reload", Revision: rev, ABIVersion: "1.0", MinEngineVersion: "0.0.0"}, priv)
		if err != nil {
			return err
		}
		name := fmt.Sprintf("reload-%d.tar.gz", rev)
		if err := b.Write(filepath.Join(staging, name)); err != nil {
			return err
		}
		return os.Rename(filepath.Join(staging, name), filepath.Join(inbox, name))
	}
	if err := deliver("good_a", 1); err != nil {
		t.Fatal(err)
	}

	var ts *testServer
	var seen []int // OnToken's counts, in call order
	var toks []int32
	onToken := func(n int, tok int32) error {
		seen, toks = append(seen, n), append(toks, tok)
		if n != reloadAt {
			return nil
		}
		if err := deliver("good_b", 2); err != nil {
			return err
		}
		// Hold the decode loop until the watcher has swapped revision 2
		// in; the bound only turns a hang into a failure.
		for deadline := time.Now().Add(time.Minute); ts.adapter.Revision() != 2; time.Sleep(2 * time.Millisecond) {
			if time.Now().After(deadline) {
				return fmt.Errorf("revision 2 not in service a minute after it was renamed into the inbox (revision %d)", ts.adapter.Revision())
			}
		}
		return nil
	}
	cfg := policy.NewConfig().WithTrustedKey(pub).WithDeadline(time.Second)
	ts = newTestServer(t, testOptions{
		cfg:   Config{OnToken: onToken},
		tiers: []string{"stories260K-ff192-Q8_0.gguf", "stories260K-ff192-Q5_0.gguf", "stories260K-ff192-Q4_0.gguf"},
		attach: &host.PolicyOptions{Inbox: inbox, Config: &cfg,
			Sensors: "trace:../../../../testdata/traces/thermal_ramp.jsonl"},
	})
	if r := ts.adapter.Revision(); r != 1 {
		t.Fatalf("revision %d in service at start, want 1 (the inbox's first scan)", r)
	}

	st := ts.client.Completions.NewStreaming(context.Background(), openai.CompletionNewParams{Model: "stories260K",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")}, MaxTokens: openai.Int(maxTokens),
		Temperature: openai.Float(0)})
	var text strings.Builder
	var last openai.Completion
	for st.Next() {
		c := st.Current()
		for _, ch := range c.Choices {
			text.WriteString(ch.Text)
		}
		last = c
	}
	if err := st.Err(); err != nil {
		t.Fatalf("the stream across the reload: %v", err)
	}

	// No token lost or duplicated: the engine emitted tokens 1..n once
	// each, and the client received exactly their text.
	want := make([]int, len(toks))
	for i := range want {
		want[i] = i + 1
	}
	if !slices.Equal(seen, want) || len(toks) <= reloadAt {
		t.Fatalf("OnToken counts %v: want 1..n with n > %d", seen, reloadAt)
	}
	var piece []byte
	var sent strings.Builder
	for _, tok := range toks {
		piece = ts.vocab.Piece(piece[:0], tok)
		sent.Write(piece)
	}
	if text.String() != sent.String() {
		t.Fatalf("streamed text %q, generated %q", text.String(), sent.String())
	}
	if int(last.Usage.CompletionTokens) != len(toks) {
		t.Fatalf("usage says %d completion tokens, the engine generated %d", last.Usage.CompletionTokens, len(toks))
	}

	// Decisions: revision 1 before the reload position, revision 2 from it.
	var ext Extension
	if err := json.Unmarshal([]byte(last.JSON.ExtraFields["edgellm"].Raw()), &ext); err != nil {
		t.Fatalf("the final chunk's edgellm object: %v (%s)", err, last.RawJSON())
	}
	var before, after int
	for _, d := range ext.Decisions {
		switch {
		case d.Step < reloadAt && d.Revision == 1 && d.Tier == 1:
			before++
		case d.Step >= reloadAt && d.Revision == 2 && d.Tier == 2:
			after++
		default:
			t.Errorf("decision at step %d from revision %d, tier %d: want revision 1 (tier 1) before step %d, revision 2 (tier 2) from it",
				d.Step, d.Revision, d.Tier, reloadAt)
		}
	}
	if before == 0 || after == 0 {
		t.Fatalf("decisions %+v: want some from revision 1 and some from revision 2", ext.Decisions)
	}
	if st := ts.worker.snapshot(); st.PolicyFails != 0 || st.Revision != 2 {
		t.Fatalf("policy failures %d, revision %d", st.PolicyFails, st.Revision)
	}
	resp, err := http.Get(ts.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "\nedgellm_policy_revision 2\n") {
		t.Fatalf("/metrics does not report revision 2:\n%s", b)
	}
	t.Logf("%d tokens, reload after token %d, decisions %+v", len(toks), reloadAt, ext.Decisions)
}
