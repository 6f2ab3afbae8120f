package host

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/policy"
)

var errKnob = errors.New("refused on purpose")

// knobSession is a session whose every setter works or fails on demand
// (fail), counting calls; what the adapter never calls is the nil
// embedded Session.
type knobSession struct {
	Session
	fail  bool
	calls int
}

func (f *knobSession) result() error {
	f.calls++
	if f.fail {
		return errKnob
	}
	return nil
}
func (f *knobSession) SwapTier(int) (SwapTimings, error) { return SwapTimings{}, f.result() }
func (f *knobSession) SetThreads(int) error              { return f.result() }
func (f *knobSession) SetWindow(int, int) error          { return f.result() }
func (f *knobSession) SetEvictMode(string) error         { return f.result() }
func (f *knobSession) EvictMode() string                 { return "drop" }
func (f *knobSession) SetKVType(KVType) (KVChange, error) {
	return KVChange{Changed: !f.fail}, f.result()
}
func (f *knobSession) LayerSets() []int         { return []int{0, 0} }
func (f *knobSession) SetLayerSets([]int) error { return f.result() }
func (f *knobSession) SetBits() []int           { return []int{8, 4} }
func (f *knobSession) AdviseUnused() error      { return nil }
func (f *knobSession) RepackState() RepackState { return RepackState{Layers: 2, MaxLayers: 4} }
func (f *knobSession) SetRepackLayers(k int) (RepackChange, error) {
	if err := f.result(); err != nil {
		return RepackChange{From: 2, To: 2}, err
	}
	return RepackChange{From: 2, To: k, Released: 1}, nil
}

// knobSpec and knobDraft fail on demand too.
type knobSpec struct {
	fakeSpec
	s *knobSession
}

func (f *knobSpec) SetDraftThreads(int, uint64) error { return f.s.result() }
func (f *knobSpec) SetVerifyCPUMask(uint64) error     { return f.s.result() }

type knobDraft struct {
	fakeDraft
	s *knobSession
}

func (f *knobDraft) Detach() error { return f.s.result() }

// TestKnobFailureRule: the rule of RATIONALE.md "A failed change", for
// every knob that can fail: a refused change keeps the decision in force
// for that knob, is logged with the knob's name and counted in
// PolicyStats.Refused, and apply returns nil (decoding goes on); the same
// change accepted moves the decision. Knobs that cannot fail (spec k,
// cadence) are not listed.
func TestKnobFailureRule(t *testing.T) {
	old := abi.Decision{Tier: 0, Threads: 2, Window: 256, KVType: abi.KVF16, RepackLayers: 2,
		LayerBits: [abi.MaxLayers]uint8{8, 8}, CadenceSteps: 4}
	for _, tc := range []struct {
		knob   string
		change func(d *abi.Decision)
		field  func(d *abi.Decision) any
	}{
		{"tier", func(d *abi.Decision) { d.Tier = 1 }, func(d *abi.Decision) any { return d.Tier }},
		{"threads", func(d *abi.Decision) { d.Threads = 1 }, func(d *abi.Decision) any { return d.Threads }},
		{"window", func(d *abi.Decision) { d.Window, d.Anchors = 64, 4 }, func(d *abi.Decision) any { return [2]int32{d.Window, d.Anchors} }},
		{"kv_evict", func(d *abi.Decision) { d.KVEvict = abi.EvictMerge }, func(d *abi.Decision) any { return d.KVEvict }},
		{"layer bits", func(d *abi.Decision) { d.LayerBits[1] = 4 }, func(d *abi.Decision) any { return d.LayerBits }},
		{"draft", func(d *abi.Decision) { d.Draft = abi.DraftDetach }, func(d *abi.Decision) any { return d.Draft }},
		{"KV type", func(d *abi.Decision) { d.KVType = abi.KVQ8_0 }, func(d *abi.Decision) any { return d.KVType }},
		{"draft threads", func(d *abi.Decision) { d.DraftThreads = 1 }, func(d *abi.Decision) any { return d.DraftThreads }},
		{"verify mask", func(d *abi.Decision) { d.VerifyCPUMask = 0b10 }, func(d *abi.Decision) any { return d.VerifyCPUMask }},
		{"repacked layers", func(d *abi.Decision) { d.RepackLayers = 1 }, func(d *abi.Decision) any { return d.RepackLayers }},
	} {
		for _, fail := range []bool{true, false} {
			s := &knobSession{fail: fail}
			var log bytes.Buffer
			a := &Adapter{sess: s, log: &log, ctx: 256, cur: old, repackable: s,
				spec: &knobSpec{s: s}, draft: &knobDraft{s: s},
				haveCan: true, can: policy.Abilities{Tier: true, Threads: true, SpecK: true, CPUMask: true, Window: true,
					LayerBits: true, KVType: true, Repack: true, Draft: true, Evict: true}}
			d := old
			tc.change(&d)
			if err := a.apply(7, d); err != nil {
				t.Fatalf("%s (fail %v): apply returned %v, want nil: a refusal does not stop decoding", tc.knob, fail, err)
			}
			if s.calls != 1 {
				t.Fatalf("%s (fail %v): %d setter calls, want 1", tc.knob, fail, s.calls)
			}
			kept := tc.field(&a.cur) == tc.field(&old)
			refused := strings.Contains(log.String(), tc.knob+" ") && strings.Contains(log.String(), "not applied: "+errKnob.Error())
			if fail && (!kept || !refused || a.st.Refused != 1) {
				t.Errorf("%s refused: decision kept %v, logged %v, Refused %d (log %q)", tc.knob, kept, refused, a.st.Refused, log.String())
			}
			if !fail && tc.knob != "draft" && (kept || a.st.Refused != 0) {
				t.Errorf("%s accepted: decision kept %v, Refused %d (log %q)", tc.knob, kept, a.st.Refused, log.String())
			}
		}
	}
}
