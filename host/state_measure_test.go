package host

import (
	"bytes"
	"flag"
	"testing"
	"time"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

var stateMeasureModel = flag.String("state-model", "", "model for TestStateRestoreVsReplay (default stories260K)")

// TestStateRestoreVsReplay measures, in one process and for each engine,
// restoring a 1,000-token context from its saved KV state against
// replaying it (decoding the 1,000 tokens again, what edgellm_session_restore
// did before 1.4). Run with -v; -state-model PATH for another model. The
// only assertion is that the restore decodes nothing and the state
// continues to the same next-token logits as the replay.
func TestStateRestoreVsReplay(t *testing.T) {
	path := *stateMeasureModel
	if testing.Short() && path == "" {
		t.Skip("a measurement (~10 s of prefill); not in -short")
	}
	if path == "" {
		path = sharedtest.Stories260K(t)
	}
	const n = 1000
	for _, engName := range []string{"native", "llamacpp"} {
		t.Run(engName, func(t *testing.T) {
			eng, err := Load(path, LoadOptions{Engine: engName})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			toks := make([]int32, n)
			for i := range toks {
				toks[i] = int32(1 + i*7%(eng.Vocab().NVocab()-1))
			}
			cfg := SessionConfig{NCtx: 1024, Threads: 1}
			a, err := eng.NewSession(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			t0 := time.Now()
			if err := decodeAll(a, toks); err != nil {
				t.Fatal(err)
			}
			replay := time.Since(t0)
			var buf bytes.Buffer
			t0 = time.Now()
			if err := a.(StateSaver).SaveState(&buf); err != nil {
				t.Fatal(err)
			}
			save := time.Since(t0)
			b, err := eng.NewSession(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			d0 := decodes(t, b)
			t0 = time.Now()
			if err := b.(StateSaver).RestoreState(bytes.NewReader(buf.Bytes())); err != nil {
				t.Fatal(err)
			}
			restore := time.Since(t0)
			if decodes(t, b) != d0 || b.Len() != n {
				t.Fatalf("restore decoded, or holds %d positions", b.Len())
			}
			// A second replay, on the restored session's twin, so both
			// numbers come from this moment of the machine's load.
			t0 = time.Now()
			if err := a.Truncate(0); err != nil {
				t.Fatal(err)
			}
			if err := decodeAll(a, toks); err != nil {
				t.Fatal(err)
			}
			replay = min(replay, time.Since(t0))
			next := []int32{3}
			la, lb := make([]float32, eng.Vocab().NVocab()), make([]float32, eng.Vocab().NVocab())
			for _, x := range []struct {
				s Session
				l []float32
			}{{a, la}, {b, lb}} {
				if err := x.s.Decode(next, LogitsLast); err != nil {
					t.Fatal(err)
				}
				if err := x.s.Logits(0, x.l); err != nil {
					t.Fatal(err)
				}
			}
			if err := sharedtest.CompareLogits(lb, la); err != nil {
				t.Fatalf("restored vs replayed: %v", err)
			}
			t.Logf("%s, %d tokens: state %d bytes; save %v, restore %v, replay (best of 2) %v: restore is %.4f of replay (%.0f× faster)",
				engName, n, buf.Len(), save, restore, replay, restore.Seconds()/replay.Seconds(), replay.Seconds()/restore.Seconds())
		})
	}
}

// decodeAll decodes toks in batches of 256, as the 1.1 C API's replay did.
func decodeAll(s Session, toks []int32) error {
	for i := 0; i < len(toks); i += 256 {
		if err := s.Decode(toks[i:min(i+256, len(toks))], LogitsLast); err != nil {
			return err
		}
	}
	return nil
}
