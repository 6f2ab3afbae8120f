// Package runstats is the machine-readable statistics stream of `edgellm
// run` (--stats-json FILE): the run writes it, `edgellm scenario run`
// follows it while the child runs. The file is JSONL, written line by line
// without buffering so a reader can follow it:
//
//	{"event":"start","unix_us":…,"prompt_tokens":5,"n_tiers":2,"tier":0,"pid":123}
//	{"event":"token","unix_us":…,"i":0,"tier":0,"k":0,"window":512,"threads":1}
//	…
//	{"event":"end","unix_us":…,"generated":200,"decode_tps":48.100,"prefill_ms":35.600,
//	 "policy_calls":13,"policy_changes":1,"tier_swaps":1,"policy_failures":0,"error":""}
//
// i counts generated tokens from 0; tier is the tier that produced token i.
// k, window and threads are the policy decision in force, and the policy_*
// counts are present only with a policy. A run with per-layer weight sets
// also writes {"event":"sets","unix_us":…,"i":0,"layer_sets":[0,0,2,1]}
// before token 0's record and before the record of each token produced
// with a new assignment. With a policy, a token record also carries the CPU
// readings of the policy's last call when the host had them:
// "cpu_other" (cores other processes used, ABI 1.5), "cpu_psi_recent" (%),
// "step_ratio" (step time ÷ quiet baseline), so a thread change can be
// read against what the policy saw. A run with --draft writes one
// {"event":"round","unix_us":…,"i":12,"k":4,"drafted":4,"accepted":3} per
// speculative round: i is the first token the round produced, k the K in
// force, drafted the draft tokens it verified (fewer than k when p_min or
// the context ended drafting early; 0 for a plain step) and accepted how
// many of them the target kept.
package runstats

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Event kinds.
const (
	Start = "start"
	Token = "token"
	End   = "end"
	// Sets is the per-layer weight-set assignment (native engine with
	// --layer-sets), written before the first token and before the token
	// record of each token it changed for (Writer.Sets).
	Sets = "sets"
	// Round is one speculative round (--draft, Writer.Round).
	Round = "round"
)

// Event is one line of the stream. Fields a line does not carry are zero.
type Event struct {
	Event  string `json:"event"`
	UnixUS int64  `json:"unix_us"`
	// start
	PromptTokens int `json:"prompt_tokens"`
	NTiers       int `json:"n_tiers"`
	PID          int `json:"pid"`
	// token (Tier also in start)
	I       int `json:"i"`
	Tier    int `json:"tier"`
	K       int `json:"k"`
	Window  int `json:"window"`
	Threads int `json:"threads"`
	// RepackLayers is the units using repacked weights (ABI 1.4; with a
	// policy on an engine that has them, else 0).
	RepackLayers int `json:"repack_layers"`
	// LayerLatencyUS and StepComputeUS are a per-layer latency sample of
	// the native engine (on the first token record after each new sample).
	LayerLatencyUS []float64 `json:"layer_latency_us"`
	StepComputeUS  float64   `json:"step_compute_us"`
	// CPUOther, CPUPSIRecent and StepRatio are the policy's last CPU
	// readings (Decision.HasCPU, HasStepRatio); a record without them
	// leaves them 0.
	CPUOther     float64 `json:"cpu_other"`
	CPUPSIRecent float64 `json:"cpu_psi_recent"`
	StepRatio    float64 `json:"step_ratio"`
	// sets (I is the first token produced with it): the weight set of
	// each layer, 0 being the model's own.
	LayerSets []int `json:"layer_sets"`
	// round (I and K too)
	Drafted  int `json:"drafted"`
	Accepted int `json:"accepted"`
	// end
	Generated      int     `json:"generated"`
	DecodeTPS      float64 `json:"decode_tps"`
	PrefillMs      float64 `json:"prefill_ms"`
	PolicyCalls    int     `json:"policy_calls"`
	PolicyChanges  int     `json:"policy_changes"`
	TierSwaps      int     `json:"tier_swaps"`
	PolicyFailures int     `json:"policy_failures"`
	Error          string  `json:"error"`
}

// Parse reads one line of the stream.
func Parse(line []byte) (Event, error) {
	var ev Event
	if err := json.Unmarshal(line, &ev); err != nil {
		return Event{}, fmt.Errorf("stats line: %v", err)
	}
	switch ev.Event {
	case Start, Token, End, Sets, Round:
		return ev, nil
	}
	return Event{}, fmt.Errorf("stats line: unknown event %q", ev.Event)
}

// Decision is the policy decision in force at a token (Writer.Token), with
// the CPU readings of the policy's last call when HasCPU / HasStepRatio.
type Decision struct {
	K, Window, Threads, RepackLayers int

	HasCPU                 bool
	CPUOther, CPUPSIRecent float64
	HasStepRatio           bool
	StepRatio              float64
}

// Policy counts what the policy did over the run (Writer.End).
type Policy struct{ Calls, Changes, Swaps, Failures int }

// Writer writes the stream. A nil *Writer does nothing, so a run calls it
// unconditionally. Token does not allocate.
type Writer struct {
	w   io.Writer
	buf []byte
	now func() time.Time
	err error // first write error
}

// NewWriter writes the stream to w, one Write per line.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w, buf: make([]byte, 0, 256), now: time.Now}
}

// Err is the first write error.
func (r *Writer) Err() error {
	if r == nil {
		return nil
	}
	return r.err
}

func (r *Writer) head(event string) {
	r.buf = append(r.buf[:0], `{"event":"`...)
	r.buf = append(r.buf, event...)
	r.buf = append(r.buf, `","unix_us":`...)
	r.buf = strconv.AppendInt(r.buf, r.now().UnixMicro(), 10)
}

func (r *Writer) int(key string, v int64) {
	r.buf = append(r.buf, ',', '"')
	r.buf = append(r.buf, key...)
	r.buf = append(r.buf, '"', ':')
	r.buf = strconv.AppendInt(r.buf, v, 10)
}

func (r *Writer) float(key string, v float64) {
	r.buf = append(r.buf, ',', '"')
	r.buf = append(r.buf, key...)
	r.buf = append(r.buf, '"', ':')
	r.buf = strconv.AppendFloat(r.buf, v, 'f', 3, 64)
}

func (r *Writer) flush() {
	r.buf = append(r.buf, '}', '\n')
	if _, err := r.w.Write(r.buf); err != nil && r.err == nil {
		r.err = err
	}
}

// Start records the start of generation.
func (r *Writer) Start(promptTokens, nTiers, tier, pid int) {
	if r == nil {
		return
	}
	r.head(Start)
	r.int("prompt_tokens", int64(promptTokens))
	r.int("n_tiers", int64(nTiers))
	r.int("tier", int64(tier))
	r.int("pid", int64(pid))
	r.flush()
}

// Layers is a per-layer latency sample: µs per layer, and the compute time
// of the step they add up to.
type Layers struct {
	US     []float64
	StepUS float64
}

// Token records generated token i, produced by tier; d is the policy
// decision in force (nil without a policy).
func (r *Writer) Token(i, tier int, d *Decision) { r.TokenLayers(i, tier, d, nil) }

// TokenLayers is Token with a per-layer latency sample (nil: none).
func (r *Writer) TokenLayers(i, tier int, d *Decision, l *Layers) {
	if r == nil {
		return
	}
	r.head(Token)
	r.int("i", int64(i))
	r.int("tier", int64(tier))
	if d != nil {
		r.int("k", int64(d.K))
		r.int("window", int64(d.Window))
		r.int("threads", int64(d.Threads))
		if d.RepackLayers > 0 {
			r.int("repack_layers", int64(d.RepackLayers))
		}
		if d.HasCPU {
			r.float("cpu_other", d.CPUOther)
			r.float("cpu_psi_recent", d.CPUPSIRecent)
		}
		if d.HasStepRatio {
			r.float("step_ratio", d.StepRatio)
		}
	}
	if l != nil {
		r.buf = append(r.buf, `,"layer_latency_us":[`...)
		for i, us := range l.US {
			if i > 0 {
				r.buf = append(r.buf, ',')
			}
			r.buf = strconv.AppendFloat(r.buf, us, 'f', 1, 64)
		}
		r.buf = append(r.buf, ']')
		r.float("step_compute_us", l.StepUS)
	}
	r.flush()
}

// Sets records the weight set of each layer from generated token i on.
func (r *Writer) Sets(i int, sets []int) {
	if r == nil {
		return
	}
	r.head(Sets)
	r.int("i", int64(i))
	r.buf = append(r.buf, `,"layer_sets":[`...)
	for j, v := range sets {
		if j > 0 {
			r.buf = append(r.buf, ',')
		}
		r.buf = strconv.AppendInt(r.buf, int64(v), 10)
	}
	r.buf = append(r.buf, ']')
	r.flush()
}

// Round records a speculative round that produced tokens from i on, at K
// k, with drafted draft tokens verified and accepted of them kept.
func (r *Writer) Round(i, k, drafted, accepted int) {
	if r == nil {
		return
	}
	r.head(Round)
	r.int("i", int64(i))
	r.int("k", int64(k))
	r.int("drafted", int64(drafted))
	r.int("accepted", int64(accepted))
	r.flush()
}

// End records the outcome of generation; p is nil without a policy.
func (r *Writer) End(generated int, decodeTPS float64, prefill time.Duration, p *Policy, genErr error) {
	if r == nil {
		return
	}
	r.head(End)
	r.int("generated", int64(generated))
	r.float("decode_tps", decodeTPS)
	r.float("prefill_ms", float64(prefill.Microseconds())/1000)
	if p != nil {
		r.int("policy_calls", int64(p.Calls))
		r.int("policy_changes", int64(p.Changes))
		r.int("tier_swaps", int64(p.Swaps))
		r.int("policy_failures", int64(p.Failures))
	}
	r.buf = append(r.buf, `,"error":`...)
	msg := ""
	if genErr != nil {
		msg = genErr.Error()
	}
	q, _ := json.Marshal(msg)
	r.buf = append(r.buf, q...)
	r.flush()
}
