package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host"
)

// job is one generation waiting for, or running on, the engine.
type job struct {
	ctx      context.Context
	prompt   []int32
	nPredict int
	sampling host.SamplingParams
	// emit receives each generated token on the worker goroutine; an error
	// stops generation (errStopSequence: a stop sequence was generated).
	emit func(tok int32) error
	// started is closed when the worker takes the job (its queue wait ends).
	started chan struct{}
	done    chan jobResult
}

type jobResult struct {
	stats     host.Stats
	err       error
	reused    int        // prompt tokens whose KV was kept from the last request
	reuseLost int        // common-prefix tokens the KV window had made unusable
	reuseNote string     // why, when reuseLost > 0
	decisions []Decision // policy decisions taken during the job
}

// errStopSequence ends a generation whose text reached a stop sequence.
var errStopSequence = errors.New("stop sequence")

// Decision is one policy decision that changed what the engine does, taken
// during a request: the response's "edgellm.decisions" entries.
type Decision struct {
	// Step is the request's generated-token count when it applied.
	Step    int    `json:"step"`
	Tier    int32  `json:"tier"`
	SpecK   int32  `json:"spec_k"`
	Window  int32  `json:"window"`
	Threads int32  `json:"threads"`
	KVType  string `json:"kv_type"`
	Reason  string `json:"reason"`
	// Revision is the manifest revision of the policy in service when the
	// decision applied (0: an unsigned module); it rises when
	// --policy-inbox swaps a newer bundle in. It is the revision of the
	// module that made the decision (host.Adapter.DecisionRevision), also
	// when a newer bundle was swapped in during that very call.
	Revision int64 `json:"revision"`
	// LayerBits is the per-layer precision in bits, for layers the model has
	// (absent when the policy leaves it).
	LayerBits Bits  `json:"layer_bits,omitempty"`
	Time      int64 `json:"time_ms"` // Unix milliseconds
}

// worker owns the session: it runs one job at a time, in queue order.
type worker struct {
	sess    host.Session
	vocab   host.Vocab
	adapter *host.Adapter // nil without a policy
	nLayer  int
	queue   *jobQueue
	hub     *hub
	onToken func(n int, tok int32) error // Config.OnToken (nil: none)
	logf    func(string, ...any)         // Config.Logf (nil: none)
	noReuse bool                         // Config.NoPrefixReuse
	window  abi.Decision                 // Config.Window/Anchors: the KV window without a policy

	// Owned by the worker goroutine.
	cached []int32 // the tokens whose KV the session holds, in order
	step   int     // decode steps since start: the adapter's monotonic step
	tokens int     // tokens emitted since start: Config.OnToken's count

	mu    sync.Mutex // guards stats
	stats workerStats
}

// workerStats are the counters /metrics shows.
type workerStats struct {
	Requests, Cancelled, Failed      int
	SlowClients                      int // streams cut off (errSlowClient)
	PromptTokens, ReusedTokens       int
	ReuseLostTokens                  int // common-prefix tokens the KV window made unusable
	GeneratedTokens                  int
	LastDecodeTPS, LastPrefillTPS    float64
	LastTTFT                         time.Duration
	Busy                             bool
	Current                          abi.Decision
	PolicyCalls, PolicyFails, Change int
	Revision                         uint64      // the policy revision in service (host.Adapter.Revision)
	Sensors                          abi.Sensors // what the policy was last given (zero before its first call)
	HasSensors                       bool
}

func (w *worker) snapshot() workerStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// run serves jobs until ctx ends.
func (w *worker) run(ctx context.Context) {
	for {
		j := w.queue.pop(ctx)
		if j == nil {
			return
		}
		j.done <- w.do(j)
	}
}

// do runs one job: it keeps the KV of the longest common prefix with the
// previous request's tokens (prefix reuse), prefills the rest, generates.
func (w *worker) do(j *job) jobResult {
	if err := j.ctx.Err(); err != nil {
		w.count(func(s *workerStats) { s.Cancelled++ })
		return jobResult{err: err}
	}
	w.setBusy(true)
	defer w.setBusy(false)
	keep, lost := w.reusable(j.prompt)
	if err := w.sess.Truncate(keep); err != nil {
		keep = 0
		if err := w.sess.Truncate(0); err != nil {
			return jobResult{err: err}
		}
	}
	w.cached = append(w.cached[:keep], j.prompt[keep:]...)
	var res jobResult
	res.reused, res.reuseLost = keep, lost
	if lost > 0 {
		res.reuseNote = fmt.Sprintf("%d common-prefix tokens prefilled again: the KV window (%d) had evicted positions they need (the session held %d)",
			lost, minWindow(w.windowDecision(), w.nLayer), w.sess.Len()) // lost > 0 only under a window
	}
	gen := host.GenerateOptions{NPredict: j.nPredict, Sampling: j.sampling}
	if w.adapter != nil {
		gen.BeforeStep = func(step int) error { return w.beforeStep(step, &res) }
	}
	var last time.Time
	var ema float64
	emit := func(tok int32) error {
		now := time.Now()
		if !last.IsZero() {
			if dt := now.Sub(last).Seconds(); dt > 0 {
				r := 1 / dt
				if ema == 0 {
					ema = r
				}
				ema += (r - ema) / 4
				w.hub.publish(event{Kind: "token", Token: &tokEvent{Time: now.UnixMilli(), TPS: r, TPSSmoothed: ema}})
			}
		}
		last = now
		w.cached = append(w.cached, tok)
		err := j.emit(tok)
		w.tokens++ // every generated token counts (as in Stats.GeneratedTokens), also the one a stop sequence ends on
		if w.onToken != nil {
			if herr := w.onToken(w.tokens, tok); err == nil {
				err = herr
			}
		}
		return err
	}
	gen.Prompt, gen.Emit = j.prompt[keep:], emit
	st, err := host.Generate(j.ctx, w.sess, gen)
	res.stats, res.err = st, err
	if errors.Is(err, errStopSequence) {
		res.err = nil
	}
	// The worker's copy follows the KV (every emitted token is in it; an
	// error mid-step may leave fewer).
	if n := w.sess.Len(); n <= len(w.cached) {
		w.cached = w.cached[:n]
	} else {
		w.cached = w.cached[:0]
	}
	w.hub.publish(event{Kind: "request", Request: &reqEvent{DecodeTPS: st.DecodeTPS(), TTFTMs: ms(st.FirstToken),
		Tokens: st.GeneratedTokens, Reused: keep}})
	w.count(func(s *workerStats) {
		s.Requests++
		s.PromptTokens += len(j.prompt)
		s.ReusedTokens += keep
		s.ReuseLostTokens += lost
		s.GeneratedTokens += st.GeneratedTokens
		if st.DecodeTokens > 0 {
			s.LastDecodeTPS = st.DecodeTPS()
		}
		if st.PromptTokens > 0 {
			s.LastPrefillTPS = st.PrefillTPS()
			s.LastTTFT = st.FirstToken
		}
		switch {
		case res.err != nil && (errors.Is(res.err, errSlowClient) || errors.Is(context.Cause(j.ctx), errSlowClient)):
			s.SlowClients++
		case res.err != nil && j.ctx.Err() != nil:
			s.Cancelled++
		case res.err != nil:
			s.Failed++
		}
	})
	return res
}

// reusable is how many leading tokens of prompt the session's KV already
// holds and may keep, and how many more of the common prefix it cannot
// keep (lost). At least one prompt token is always prefilled (its logits
// start generation).
//
// Under a policy's KV window positions older than the window are evicted
// as the session grows. A prompt that extends everything the session
// holds keeps all of it (its new tokens see the same window a fresh
// prefill would). Truncating back to an earlier point is different once
// the session has outgrown the smallest window: the tokens after that
// point would attend a window with evicted holes, so only the anchors
// (kept forever) are reused and the rest of the common prefix is
// prefilled again.
func (w *worker) reusable(prompt []int32) (keep, lost int) {
	if w.noReuse {
		return 0, 0
	}
	return w.reusableUnder(prompt, w.windowDecision())
}

// fixedWindow is Config.Window and Anchors as a decision's window.
func fixedWindow(cfg Config) abi.Decision {
	return abi.Decision{Window: int32(cfg.Window), Anchors: int32(cfg.Anchors)}
}

// windowDecision holds the KV window in force: the policy's, or without
// one the window serve set (Config.Window; zero: none).
func (w *worker) windowDecision() abi.Decision {
	if w.adapter != nil {
		return w.adapter.Current()
	}
	return w.window
}

func (w *worker) reusableUnder(prompt []int32, d abi.Decision) (keep, lost int) {
	n := min(len(w.cached), w.sess.Len(), len(prompt)-1)
	i := 0
	for i < n && w.cached[i] == prompt[i] {
		i++
	}
	if i == w.sess.Len() {
		return i, 0
	}
	win := minWindow(d, w.nLayer)
	if win <= 0 || w.sess.Len() <= win {
		return i, 0 // nothing evicted yet
	}
	keep = min(i, int(d.Anchors))
	return keep, i - keep
}

// minWindow is the smallest per-layer KV window of d (0: no window), as
// host's layerWindows computes them.
func minWindow(d abi.Decision, nLayer int) int {
	if d.Window <= 0 {
		return 0
	}
	m := int(d.Window)
	for l := 0; l < min(nLayer, len(d.LayerWindowScale)); l++ {
		if sc := d.LayerWindowScale[l]; sc > 0 && sc < 1 {
			m = min(m, max(1, int(math.Round(float64(sc)*float64(d.Window)))))
		}
	}
	return m
}

// beforeStep runs the policy with a step count that grows across requests
// (its cadence and trace replays count decode steps of the whole server)
// and records the decisions that changed something.
func (w *worker) beforeStep(step int, res *jobResult) error {
	w.step++
	before := w.adapter.Stats().Changes
	err := w.adapter.BeforeStep(w.step)
	ps := w.adapter.Stats()
	cur := w.adapter.Current()
	rev := uint64(w.adapter.Revision())
	var was uint64
	w.count(func(s *workerStats) {
		s.Current, s.PolicyCalls, s.PolicyFails, s.Change = cur, ps.Calls, ps.Failures, ps.Changes
		was, s.Revision = s.Revision, rev
		s.Sensors, s.HasSensors = *w.adapter.LastSensors(), true
	})
	if rev != was && w.logf != nil {
		w.logf("policy: revision %d swapped in from the inbox (was %d), at server step %d", rev, was, w.step)
	}
	if ps.Changes != before {
		d := decisionOf(step, cur, w.nLayer)
		d.Revision = w.adapter.DecisionRevision()
		res.decisions = append(res.decisions, d)
		w.hub.publish(event{Kind: "decision", Decision: &d})
	}
	return err
}

// Bits are per-layer precisions; they marshal as a JSON array of numbers
// (a plain []uint8 would be base64 text, which no page can draw).
type Bits []uint8

// MarshalJSON writes [8,4,...].
func (b Bits) MarshalJSON() ([]byte, error) {
	out := make([]byte, 0, 2+3*len(b))
	out = append(out, '[')
	for i, v := range b {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendUint(out, uint64(v), 10)
	}
	return append(out, ']'), nil
}

// UnmarshalJSON reads an array of numbers.
func (b *Bits) UnmarshalJSON(data []byte) error {
	var v []uint16
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*b = make(Bits, len(v))
	for i, x := range v {
		(*b)[i] = uint8(x)
	}
	return nil
}

func decisionOf(step int, cur abi.Decision, nLayer int) Decision {
	d := Decision{Step: step, Tier: cur.Tier, SpecK: cur.SpecK, Window: cur.Window, Threads: cur.Threads,
		KVType: cur.KVType.String(), Reason: cur.Reason(), Time: time.Now().UnixMilli()}
	n := min(nLayer, len(cur.LayerBits))
	for i := 0; i < n; i++ {
		if cur.LayerBits[i] != 0 {
			d.LayerBits = append(Bits(nil), cur.LayerBits[:n]...)
			break
		}
	}
	return d
}

func (w *worker) count(f func(*workerStats)) {
	w.mu.Lock()
	f(&w.stats)
	w.mu.Unlock()
}

func (w *worker) setBusy(b bool) { w.count(func(s *workerStats) { s.Busy = b }) }
