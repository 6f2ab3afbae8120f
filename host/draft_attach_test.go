package host

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestDraftDetachAttach: a draft model dropped at generated token 24 and
// attached again at 72 through the host API leaves Generate's greedy text
// identical to plain decoding; detaching frees what MemoryBytes counted
// (its KV and mapped weights: > 0 before, 0 after), and the session's KV
// type, pinned while the draft's KV shares its memfd, may change once the
// draft is gone.
func TestDraftDetachAttach(t *testing.T) {
	d := filepath.Join(sharedtest.Dir(), "models", "derived")
	eng, err := Load(filepath.Join(d, "stories260K-ff192-f32.gguf"), LoadOptions{Engine: "native"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	greedy := SamplingParams{TopP: 1, RepeatPenalty: 1}
	prompt, err := eng.Vocab().Tokenize("Once upon a time", true)
	if err != nil {
		t.Fatal(err)
	}
	const n, off, on = 96, 24, 72
	sc := SessionConfig{NCtx: 192, Threads: 1}
	run := func(dr *Draft, sess Session, before func(int) error) []int32 {
		var out []int32
		if _, err := Generate(context.Background(), sess, GenerateOptions{Prompt: prompt, NPredict: n, Sampling: greedy, Draft: dr,
			BeforeStep: before, Emit: func(tok int32) error { out = append(out, tok); return nil }}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	plain, err := eng.NewSession(sc)
	if err != nil {
		t.Fatal(err)
	}
	want := run(nil, plain, nil)
	plain.Close()

	sess, err := eng.NewSession(sc)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	dr, err := AttachDraft(eng, sess, DraftOptions{Spec: filepath.Join(d, "stories260K-first4layers.gguf"), K: 4, Sampling: greedy})
	if err != nil {
		t.Fatal(err)
	}
	defer dr.Close()
	var before, freedTo int64 = -1, -1
	got := run(dr, sess, func(pos int) error {
		switch {
		case pos >= off && pos < on && !dr.Detached():
			before = dr.MemoryBytes()
			if _, err := sess.(KVTypeSetter).SetKVType(KVQ8_0); err == nil {
				return errors.New("KV type changed while the draft's KV shares the arena")
			}
			if err := dr.Detach(); err != nil {
				return err
			}
			freedTo = dr.MemoryBytes()
		case pos >= on && dr.Detached():
			return dr.Attach()
		}
		return nil
	})
	if i := firstDiff(got, want); i >= 0 {
		t.Fatalf("token %d: %d with the draft dropped and re-attached, plain %d", i, got[i], want[i])
	}
	if before <= 0 || freedTo != 0 || dr.Detached() || dr.MemoryBytes() <= 0 {
		t.Fatalf("draft memory %d before detach, %d after; attached again %v with %d", before, freedTo, !dr.Detached(), dr.MemoryBytes())
	}
	t.Logf("draft memory %d bytes before detach, %d after; %d after re-attach", before, freedTo, dr.MemoryBytes())
	if _, err := sess.(KVTypeSetter).SetKVType(KVQ8_0); err != nil {
		t.Fatalf("SetKVType with the draft's KV on its own arena: %v", err)
	}
	if st := dr.Stats(); st.Accepted == 0 {
		t.Fatal("no draft token accepted")
	}
}

// fakeDraft is a draftSwitch that counts calls.
type fakeDraft struct {
	detached        bool
	detach, attach  int
	bytes, detBytes int64
}

func (f *fakeDraft) Detach() error { f.detached = true; f.detach++; return nil }
func (f *fakeDraft) Attach() error { f.detached = false; f.attach++; return nil }
func (f *fakeDraft) Detached() bool {
	return f.detached
}
func (f *fakeDraft) MemoryBytes() int64 {
	if f.detached {
		return 0
	}
	return f.bytes
}

// TestAdapterDraft: the Adapter reports the draft (ABI 1.6, bit 33) and
// carries out Decision.draft once per change, leaving the request at
// "leave" in the decision in force (the next pre-fill).
func TestAdapterDraft(t *testing.T) {
	a := &Adapter{}
	var s abi.Sensors
	a.fillDraft(&s)
	if s.Has(abi.PresentDraft) {
		t.Fatal("draft sensors without a draft")
	}
	f := &fakeDraft{bytes: 3 << 20}
	a.draft = f
	a.fillDraft(&s)
	if !s.Has(abi.PresentDraft) || s.DraftState != abi.DraftAttached || s.DraftMB != 3 {
		t.Fatalf("attached: %+v", s)
	}
	d := abi.Decision{Draft: abi.DraftDetach}
	ch := a.applyKnobs(1, &d, abi.Decision{})
	if f.detach != 1 || d.Draft != abi.DraftLeave || len(ch) != 1 || !strings.Contains(ch[0], "3.00 MiB freed") {
		t.Fatalf("detach: %+v, decision %d, changes %q", f, d.Draft, ch)
	}
	d.Draft = abi.DraftDetach // asked again: nothing to do
	if ch = a.applyKnobs(2, &d, abi.Decision{}); f.detach != 1 || len(ch) != 0 {
		t.Fatalf("second detach: %+v, changes %q", f, ch)
	}
	s = abi.Sensors{}
	a.fillDraft(&s)
	if s.DraftState != abi.DraftDetached || s.DraftMB != 0 {
		t.Fatalf("detached: %+v", s)
	}
	d.Draft = abi.DraftAttach
	if ch = a.applyKnobs(3, &d, abi.Decision{}); f.attach != 1 || len(ch) != 1 || d.Draft != abi.DraftLeave {
		t.Fatalf("attach: %+v, changes %q", f, ch)
	}
}
