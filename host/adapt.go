package host

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"time"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/policy"
)

// DefaultCadence is how many decode steps pass between policy calls unless the
// policy asks for another cadence (Decision.CadenceSteps): every step, as
// DESIGN.md asks. There is no minimum time between calls either: the
// per-step path costs a few µs of CPU (the device readings behind it are
// re-read only every DefaultSensorInterval, or less often when reading
// them is slow). Measured 1.1-2.4% of decode CPU time on stories260K on a
// loaded machine (its steps take ~0.6 ms; TestPolicyOverheadStories260K,
// docs/BENCHMARKS.md "Policy at every decode step"); the 1% goal is not
// shown there.
const DefaultCadence = 1

// ThreadSetter is implemented by sessions whose thread count can change
// between steps.
type ThreadSetter interface{ SetThreads(n int) error }

// WindowSetter is implemented by sessions with a ring KV cache: keep the
// first anchors positions and the most recent window (the native engine).
type WindowSetter interface {
	SetWindow(anchors, window int) error
}

// LayerWindowSetter is implemented by sessions whose layers can each keep
// their own window (the native engine): layer il keeps the first anchors
// positions and its most recent windows[il] (every window ≥ 1).
type LayerWindowSetter interface {
	SetLayerWindows(anchors int, windows []int) error
}

// tierReporter is implemented by engines loaded as tier ladders.
type tierReporter interface{ Tiers() (n, cur int) }

// Adapter runs the policy in the decode loop: at every cadence step it fills
// the Sensors struct (device readings + engine telemetry), asks the policy,
// and applies what the engine supports. Decisions the engine cannot apply are
// clamped away by the runtime's Limits, so a policy can never break decoding.
type Adapter struct {
	rt      *policy.Runtime
	src     SensorSource
	owned   bool // src was built by AttachPolicy: Close closes it
	eng     Engine
	sess    Session
	log     io.Writer // decision changes; nil = none
	start   time.Time
	next    int
	s       abi.Sensors
	cur     abi.Decision
	lastTok time.Time
	// reread counts down the steps to a second sensor refresh after
	// RefreshSensors (adapt_refresh.go); 0 = none due.
	reread int
	prec   precisionSensors // manifest and tok/s target (adapt_precision.go)
	ewma   float32
	steps  stepClock // step time per thread count (adapt_threads.go)
	// stepBase turns a Generate call's step into the session's (BeforeStep);
	// lastStep is the last session step seen, stepped whether one was.
	stepBase, lastStep int
	stepped            bool
	// wall is set for readings on the wall clock (live sensors): the policy
	// is then also asked when MaxInterval passed since lastCall. A trace
	// replay is paced by the step cadence alone, so it is reproducible.
	wall     bool
	lastCall time.Time

	// What the session can do, found once (type assertions and engine
	// calls kept off the per-step path): the ladder's tier count, the
	// per-layer latency sampler, what policy.Apply may change.
	nTiers   int32
	layerLat LayerLatencySampler
	// repackable is the session when its engine has repacked weights
	// (adapt_repack.go); nil otherwise.
	repackable RepackSetter
	can        policy.Abilities
	haveCan    bool // can is set (an Adapter built field by field finds it on first use)

	ctx  int         // the session's context length
	spec speculation // speculative decoding driven by the policy (adapt_spec.go), nil = none
	// draft is the Draft the policy may detach and attach (ABI 1.6,
	// draft_attach.go), nil = none.
	draft draftSwitch
	// repack is a raise of the repacked layers being carried out a few
	// units per step (adapt_repack.go).
	repack repackPacer

	st PolicyStats
	// decRev is the revision of the module the last decision came from
	// (DecisionRevision).
	decRev int64
}

// PolicyStats count what an Adapter did.
type PolicyStats struct {
	Calls    int // policy calls
	Changes  int // calls whose decision changed what the engine does
	Failures int // calls answered by the fallback (trap, deadline, bad status)
	Swaps    int // tier swaps
	// Refused counts changes the session refused (kept at the value in
	// force, with a log line; RATIONALE.md, "A failed change").
	Refused int
	// RepackChanges counts changes of the repacked layers (ABI 1.4).
	RepackChanges int
	// PolicyTime is the time spent in policy calls, filling sensors included.
	PolicyTime time.Duration
	// DeadlineGraces counts deadline extensions: the deadline timer ran
	// late, so the process was not running (CPU quota, stopped), and the
	// call was not charged for it (policy.Stats.DeadlineGraces).
	DeadlineGraces uint64
}

// policyLimits is what the engine behind a session of nCtx positions can
// apply: the policy runtime clamps every decision into it.
func policyLimits(eng Engine, nCtx int) policy.Limits {
	l := policy.DefaultLimits()
	l.NTiers = 1
	if tr, ok := eng.(tierReporter); ok {
		l.NTiers, _ = tr.Tiers()
	}
	l.NLayers = max(1, min(eng.Info().NLayer, abi.MaxLayers))
	caps := eng.Capabilities()
	l.MaxK = 0
	if caps.Speculative {
		l.MaxK = min(caps.MaxSpeculativeK, abi.MaxSpecK)
	}
	l.MaxWindow = nCtx
	l.KVTypes = kvTypeLimits(eng) // nil: fixed per session (adapt_kv.go)
	l.MaxThreads = runtime.NumCPU()
	return l
}

// newAdapter prepares the policy loop for a session created with cfg
// (NCtx resolved). The runtime must have been built with
// policyLimits(eng, cfg.NCtx) and have a module loaded.
func newAdapter(rt *policy.Runtime, src SensorSource, eng Engine, sess Session, cfg SessionConfig, changes io.Writer) *Adapter {
	a := &Adapter{rt: rt, src: src, eng: eng, sess: sess, log: changes, start: time.Now(), wall: true}
	if _, ok := src.(*traceSensors); ok {
		// A trace's clock is the step count, not the wall clock: the step
		// cadence alone paces the policy, so replays are reproducible.
		a.wall = false
	}
	threads := cfg.Threads
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	tier, nTiers := 0, 1
	if tr, ok := eng.(tierReporter); ok {
		nTiers, tier = tr.Tiers()
	}
	a.nTiers = int32(nTiers)
	kv := cfg.KVType
	if kv == "" {
		kv = KVF16
	}
	a.cur = abi.Decision{Tier: int32(tier), Window: int32(cfg.NCtx), Threads: int32(threads),
		CadenceSteps: DefaultCadence, KVType: kv.ABI()}
	if rs, ok := sess.(RepackSetter); ok && rs.RepackState().MaxLayers > 0 {
		a.repackable = rs
		a.cur.RepackLayers = int32(rs.RepackState().Layers)
	}
	a.s.LayerCount = int32(min(eng.Info().NLayer, abi.MaxLayers))
	a.ctx = cfg.NCtx
	if enableLayerLatency(sess) {
		a.layerLat = sess.(LayerLatencySampler)
	}
	if ls, ok := sess.(LayerSetter); ok {
		// The precision in force per layer, so a policy reading CurLayerBits
		// (the throughput controller) starts from the truth.
		bits := ls.SetBits()
		for i, set := range ls.LayerSets() {
			if i < abi.MaxLayers && set >= 0 && set < len(bits) {
				a.cur.LayerBits[i] = uint8(min(bits[set], 255))
			}
		}
	}
	return a
}

// layerWindows is each layer's window for a policy's per-layer scales:
// max(1, round(scale × window)), scale 0 meaning 1 (leave as is). With
// every scale 0 or 1 it is window for every layer: SetLayerWindows then
// does what SetWindow does.
func layerWindows(window int, scale *[abi.MaxLayers]float32, nLayer int) []int {
	ws := make([]int, nLayer)
	for i := range ws {
		sc := float32(1)
		if i < len(scale) && scale[i] > 0 {
			sc = min(scale[i], 1)
		}
		ws[i] = max(1, int(math.Round(float64(sc)*float64(window))))
	}
	return ws
}

// Current is the decision in force.
func (a *Adapter) Current() abi.Decision { return a.cur }

// LastSensors is what the policy was given at its last call (zero before
// the first): for logs such as run --stats-json. The pointer is the
// adapter's own; it changes at the next step.
func (a *Adapter) LastSensors() *abi.Sensors { return &a.s }

// Stats counts what the adapter did so far.
func (a *Adapter) Stats() PolicyStats {
	st := a.st
	if a.rt != nil {
		st.DeadlineGraces = a.rt.Stats().DeadlineGraces
	}
	return st
}

// BeforeStep is GenerateOptions.BeforeStep: it calls the policy when the
// cadence is due and applies the decision. The policy sees the session's
// steps numbered across Generate calls: a step that does not advance
// (Generate's step 0) starts a new call, numbered after the last one, and
// the policy is always called there, so a reading pushed between two turns
// reaches the first step of the next (its prefill); the pause between the
// calls is not taken for a slow token.
func (a *Adapter) BeforeStep(step int) error {
	now := time.Now()
	newCall := false
	if a.stepped && a.stepBase+step <= a.lastStep {
		a.stepBase = a.lastStep + 1 - step
		a.lastTok = time.Time{}
		newCall = true
	}
	a.stepped = true
	step += a.stepBase
	a.lastStep = step
	if !a.lastTok.IsZero() {
		if dt := now.Sub(a.lastTok).Seconds(); dt > 0 {
			inst := float32(1 / dt)
			a.steps.observe(int(a.cur.Threads), now.Sub(a.lastTok))
			a.s.TokPerSec = inst
			if a.ewma == 0 {
				a.ewma = inst
			} else {
				a.ewma = 0.9*a.ewma + 0.1*inst
			}
		}
	}
	a.lastTok = now
	if a.reread > 0 {
		if a.reread--; a.reread == 0 {
			if r, ok := a.src.(sensorRefresher); ok {
				r.Refresh()
			}
		}
	}
	if !newCall && step < a.next && !a.overdue(now) {
		a.carryRepack(step)
		return nil
	}
	a.lastCall = now
	err := a.decide(step, now)
	a.carryRepack(step)
	return err
}

// decide fills the sensors, asks the policy and applies its decision: the
// per-step path, which allocates nothing unless the decision changes.
func (a *Adapter) decide(step int, now time.Time) error {
	s := &a.s
	layers, inst := s.LayerCount, s.TokPerSec // BeforeStep's reading survives the reset
	*s = abi.Sensors{LayerCount: layers, TokPerSec: inst}
	a.src.Fill(step, now.Sub(a.start), s)
	if a.layerLat != nil {
		fillLayerLatency(a.layerLat, s)
	}
	a.prec.fill(s)
	s.Step = uint64(step)
	s.TimeNS = now.Sub(a.start).Nanoseconds()
	s.TokPerSecSmoothed = a.ewma
	s.CtxLen = int32(a.sess.Len())
	s.TiersAvailable = a.nTiers
	s.CurTier, s.CurSpecK, s.CurWindow, s.CurAnchors, s.CurKVType = a.cur.Tier, a.cur.SpecK, a.cur.Window, a.cur.Anchors, a.cur.KVType
	s.CurLayerBits = a.cur.LayerBits
	a.steps.fill(int(a.cur.Threads), s)
	s.Present |= abi.PresentCtxLen | abi.PresentTiers | abi.PresentCurrent
	if a.ewma > 0 {
		// Before the first timed step there is no reading: a policy
		// must not take it for 0 tok/s (the per-layer controller demoted
		// a layer at step 1 for "slow 0 tok/s").
		s.Present |= abi.PresentTokPerSec | abi.PresentTokPerSecSmoothed
	}
	a.fillSpec(s)
	a.fillRepack(s)
	a.fillDraft(s)
	a.fillEvict(s)

	d := a.cur
	d.ReasonCode, d.ReasonLen = 0, 0
	res, err := a.rt.Decide(context.Background(), s, &d)
	a.decRev = res.Revision
	a.st.Calls++
	a.st.PolicyTime += time.Since(now)
	if err != nil {
		return err
	}
	if res.Outcome.Failed() {
		a.st.Failures++
		if a.log != nil {
			fmt.Fprintf(a.log, "[policy step %d: %s, using the %s decision]\n", step, res.Outcome, res.Fallback)
		}
	}
	if err := a.apply(step, d); err != nil {
		return err
	}
	cad := int(max(d.CadenceSteps, 1))
	a.next = step + cad
	return nil
}

// abilities is what this session can change (policy.Apply's rule); the
// adapter keeps it in can.
func (a *Adapter) abilities() policy.Abilities {
	_, tiers := a.sess.(TierSwapper)
	_, threads := a.sess.(ThreadSetter)
	_, window := a.sess.(WindowSetter)
	_, layerWindows := a.sess.(LayerWindowSetter)
	_, layerBits := a.sess.(LayerSetter)
	_, kvType := a.sess.(KVTypeSetter)
	_, evict := a.sess.(EvictSetter)
	return policy.Abilities{
		Tier: tiers, Threads: threads, SpecK: a.eng.Capabilities().Speculative,
		Window:       window,
		LayerWindows: window && layerWindows,
		LayerBits:    layerBits,
		KVType:       kvType && kvTypeLimits(a.eng) != nil,
		Repack:       a.repackable != nil,
		Draft:        a.draft != nil,
		Evict:        window && evict,
	}
}

// refused logs a change the session refused (RATIONALE.md, "A failed
// change"): the decision keeps the value in force.
func (a *Adapter) refused(step int, knob string, want any, err error) {
	a.st.Refused++
	if a.log != nil {
		fmt.Fprintf(a.log, "[policy step %d: %s %v not applied: %v]\n", step, knob, want, err)
	}
}

// apply makes the engine follow d where it differs from the current
// decision: policy.Apply says what the session takes, and a change the
// engine then refuses keeps the current value, for every knob alike
// (RATIONALE.md, "A failed change"): decoding goes on, and a session a
// failed change left unusable stops generation at its next Decode.
func (a *Adapter) apply(step int, d abi.Decision) error {
	old := a.cur
	if !a.haveCan {
		a.can, a.haveCan = a.abilities(), true
	}
	d = policy.Apply(old, d, a.can)
	changes := a.applyKnobs(step, &d, old)
	a.cur = d
	if len(changes) > 0 {
		a.st.Changes++
		if a.log != nil {
			reason := d.Reason()
			if reason == "" {
				reason = "no reason given"
			}
			fmt.Fprintf(a.log, "[policy step %d: %s — %s]\n", step, strings.Join(changes, ", "), reason)
		}
	}
	return nil
}
