package serve

import (
	"context"
	"errors"
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
	// --policy-inbox swaps a newer bundle in. It is read just after the
	// policy call: a bundle swapped in during that very call is credited
	// with the decision its predecessor made.
	Revision int64 `json:"revision"`
	// LayerBits is the per-layer precision in bits, for layers the model has
	// (absent when the policy leaves it).
	LayerBits []uint8 `json:"layer_bits,omitempty"`
	Time      int64   `json:"time_ms"` // Unix milliseconds
}

// worker owns the session: it runs one job at a time, in queue order.
type worker struct {
	sess    host.Session
	vocab   host.Vocab
	adapter *host.Adapter // nil without a policy
	nLayer  int
	queue   chan *job
	hub     *hub
	onToken func(n int, tok int32) error // Config.OnToken (nil: none)

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
	PromptTokens, ReusedTokens       int
	GeneratedTokens                  int
	LastDecodeTPS, LastPrefillTPS    float64
	LastTTFT                         time.Duration
	Busy                             bool
	Current                          abi.Decision
	PolicyCalls, PolicyFails, Change int
	Revision                         uint64 // the policy revision in service (host.Adapter.Revision)
}

func (w *worker) snapshot() workerStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// run serves jobs until ctx ends.
func (w *worker) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-w.queue:
			close(j.started)
			j.done <- w.do(j)
		}
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
	keep := w.reusable(j.prompt)
	if err := w.sess.Truncate(keep); err != nil {
		keep = 0
		if err := w.sess.Truncate(0); err != nil {
			return jobResult{err: err}
		}
	}
	w.cached = append(w.cached[:keep], j.prompt[keep:]...)
	var res jobResult
	res.reused = keep
	gen := host.GenerateOptions{NPredict: j.nPredict, Sampling: j.sampling}
	if w.adapter != nil {
		gen.BeforeStep = func(step int) error { return w.beforeStep(step, &res) }
	}
	emit := func(tok int32) error {
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
	// The KV holds what was decoded: the last sampled token never is.
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
		s.GeneratedTokens += st.GeneratedTokens
		if st.DecodeTokens > 0 {
			s.LastDecodeTPS = st.DecodeTPS()
		}
		if st.PromptTokens > 0 {
			s.LastPrefillTPS = st.PrefillTPS()
			s.LastTTFT = st.FirstToken
		}
		switch {
		case res.err != nil && j.ctx.Err() != nil:
			s.Cancelled++
		case res.err != nil:
			s.Failed++
		}
	})
	return res
}

// reusable is how many leading tokens of prompt the session's KV already
// holds. At least one prompt token is always prefilled (its logits start
// generation); a policy KV window drops old positions, so nothing is reused
// under one.
func (w *worker) reusable(prompt []int32) int {
	if w.adapter != nil && w.adapter.Current().Window > 0 {
		return 0
	}
	n := min(len(w.cached), w.sess.Len(), len(prompt)-1)
	i := 0
	for i < n && w.cached[i] == prompt[i] {
		i++
	}
	return i
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
	w.count(func(s *workerStats) {
		s.Current, s.PolicyCalls, s.PolicyFails, s.Change = cur, ps.Calls, ps.Failures, ps.Changes
		s.Revision = uint64(w.adapter.Revision())
	})
	if ps.Changes != before {
		d := decisionOf(step, cur, w.nLayer)
		d.Revision = w.adapter.Revision()
		res.decisions = append(res.decisions, d)
		w.hub.publish(event{Kind: "decision", Decision: &d})
	}
	return err
}

func decisionOf(step int, cur abi.Decision, nLayer int) Decision {
	d := Decision{Step: step, Tier: cur.Tier, SpecK: cur.SpecK, Window: cur.Window, Threads: cur.Threads,
		KVType: cur.KVType.String(), Reason: cur.Reason(), Time: time.Now().UnixMilli()}
	n := min(nLayer, len(cur.LayerBits))
	for i := 0; i < n; i++ {
		if cur.LayerBits[i] != 0 {
			d.LayerBits = append([]uint8(nil), cur.LayerBits[:n]...)
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
