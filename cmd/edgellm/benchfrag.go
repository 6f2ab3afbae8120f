package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/edgellm/edgellm/host"
)

// bench --activations --frag: fragmentation of ggml's graph allocator over
// a whole run whose KV window changes (issue #29.1). A -p token prefill,
// then one token per step to position -p + -n; the window changes at
// every eighth of the run (positions, not time): none, uniform windows,
// per-layer windows, then the whole context again. After every step the
// step's graph is measured (host.MeasureLastGraph): its peak live bytes
// (each intermediate freed after its last consumer), ggml's allocator's
// buffer for it alone, and the session's own buffer. Consecutive steps
// with the same graph are one row.

// fragAnchors are the anchor positions of every window in the schedule.
const fragAnchors = 4

// fragPhase is one part of the schedule: from position At, the windows
// of each layer (nil: none, only the first phase).
type fragPhase struct {
	At      int
	Name    string
	Windows []int
}

// fragSchedule is the window schedule of a run of total positions over
// nLayer layers; e is an eighth of the run. The last phase keeps the whole
// context (the native engine cannot switch a window off once its ring is
// in use; a window of the whole context is the same attention).
func fragSchedule(total, nLayer int) []fragPhase {
	e := total / 8
	uniform := func(w int) []int {
		ws := make([]int, nLayer)
		for i := range ws {
			ws[i] = w
		}
		return ws
	}
	ramp := func(lo, hi int, rev bool) []int { // layer 0 gets lo, the last hi
		ws := make([]int, nLayer)
		for il := range ws {
			k := il
			if rev {
				k = nLayer - 1 - il
			}
			ws[il] = lo + (hi-lo)*k/max(nLayer-1, 1)
		}
		return ws
	}
	alt := uniform(e)
	for il := 0; il < nLayer; il += 2 {
		alt[il] = max(e/8, 1)
	}
	return []fragPhase{
		{0, "none", nil},
		{e, fmt.Sprintf("uniform %d", e), uniform(e)},
		{2 * e, fmt.Sprintf("uniform %d", e/2), uniform(e / 2)},
		{3 * e, fmt.Sprintf("per-layer %d..%d", e/4, e), ramp(e/4, e, false)},
		{4 * e, fmt.Sprintf("per-layer %d/%d alternating", max(e/8, 1), e), alt},
		{5 * e, fmt.Sprintf("uniform %d", 2*e), uniform(2 * e)},
		{6 * e, fmt.Sprintf("per-layer %d..%d deep-first", e/4, 2*e), ramp(e/4, 2*e, true)},
		{7 * e, "whole context", uniform(total - fragAnchors - 1)},
	}
}

// fragRow is one graph of the run: the steps [From, To) that used it.
type fragRow struct {
	Phase    string `json:"phase"`
	From, To int
	host.ActivationMemory
	// AllocOverPeak is Allocated ÷ PeakLive (fragmentation of ggml's plan);
	// BufferOverPeak is Buffer ÷ PeakLive (what the session holds).
	AllocOverPeak  float64 `json:"alloc_over_peak"`
	BufferOverPeak float64 `json:"buffer_over_peak"`
}

// fragReport is the run: one row per graph, and the ratios over them.
type fragReport struct {
	Model              string    `json:"model"`
	Positions          int       `json:"positions"`
	Attention          string    `json:"attention"`
	Schedule           []string  `json:"schedule"`
	Graphs             []fragRow `json:"graphs"`
	AllocOverPeakMax   float64   `json:"alloc_over_peak_max"`
	AllocOverPeakMean  float64   `json:"alloc_over_peak_mean"`
	BufferOverPeakMax  float64   `json:"buffer_over_peak_max"`
	BufferOverPeakMean float64   `json:"buffer_over_peak_mean"`
	// BufferOverMaxPeak is the session's largest buffer ÷ the largest
	// graph's peak live: what the run held against what it ever needed.
	BufferOverMaxPeak float64 `json:"buffer_over_max_peak"`
}

func runFrag(c *cmdEnv, path, label string, o benchOptions) error {
	total := o.NPrompt + o.NPredict
	if total < 64 || o.NPrompt > total/8 {
		return usagef("--frag: -p %d + -n %d: want ≥ 64 positions and the prompt within the first eighth (-p ≤ %d)", o.NPrompt, o.NPredict, total/8)
	}
	eng, err := host.Load(path, host.LoadOptions{Engine: "native"})
	if err != nil {
		return err
	}
	defer eng.Close()
	info := eng.Info()
	if total > info.NCtxTrain {
		return usagef("--frag: %d positions exceed the training context %d", total, info.NCtxTrain)
	}
	att, err := host.ParseAttention(o.Attention)
	if err != nil {
		return usagef("--attention: %v", err)
	}
	sess, err := eng.NewSession(host.SessionConfig{NCtx: total, NBatch: o.NPrompt, Threads: o.Threads, Attention: att})
	if err != nil {
		return err
	}
	defer sess.Close()
	rep, err := fragRun(c, sess, info.NLayer, info.NVocab, o.NPrompt, total)
	if err != nil {
		return err
	}
	rep.Model, rep.Attention = label, att.String()
	c.Logf("activations --frag: %s, native engine, %s attention, %d positions, window changed every %d", label, att, total, total/8)
	if o.JSON {
		return json.NewEncoder(c.Stdout).Encode(rep)
	}
	kib := func(b int64) string { return fmt.Sprintf("%.1f", float64(b)/1024) }
	tw := tabwriter.NewWriter(c.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tpositions\ttokens\tattended per ring\tpeak live KiB\tggml-alloc KiB\talloc ÷ peak live\tsession buffer KiB\tbuffer ÷ peak live\t")
	for _, r := range rep.Graphs {
		rings := strings.Trim(strings.ReplaceAll(fmt.Sprint(r.Rings), " ", ","), "[]")
		fmt.Fprintf(tw, "%s\t[%d,%d)\t%d\t%s\t%s\t%s\t%.3f\t%s\t%.1f\t\n", r.Phase, r.From, r.To, r.NTok, rings,
			kib(r.PeakLive), kib(r.Allocated), r.AllocOverPeak, kib(r.Buffer), r.BufferOverPeak)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.Stdout, "%d graphs: allocated ÷ peak live max %.3f, mean %.3f; session buffer ÷ peak live max %.1f, mean %.1f; largest buffer ÷ largest peak live %.3f\n",
		len(rep.Graphs), rep.AllocOverPeakMax, rep.AllocOverPeakMean, rep.BufferOverPeakMax, rep.BufferOverPeakMean, rep.BufferOverMaxPeak)
	return err
}

// fragRun decodes the run on sess (token ids: memory does not depend on
// them) and measures every step's graph.
func fragRun(c *cmdEnv, sess host.Session, nLayer, nVocab, nPrompt, total int) (*fragReport, error) {
	sched := fragSchedule(total, nLayer)
	rep := &fragReport{Positions: total}
	for _, p := range sched {
		rep.Schedule = append(rep.Schedule, fmt.Sprintf("%d: %s", p.At, p.Name))
	}
	tok := func(pos int) int32 { return int32((pos*7919 + 1) % nVocab) }
	phase := 0
	for pos := 0; pos < total; {
		for phase+1 < len(sched) && sched[phase+1].At <= pos {
			phase++
			if err := setWindows(sess, sched[phase].Windows); err != nil {
				return nil, fmt.Errorf("--frag at position %d (%s): %w", pos, sched[phase].Name, err)
			}
		}
		n := 1
		if pos == 0 {
			n = nPrompt
		}
		batch := make([]int32, n)
		for i := range batch {
			batch[i] = tok(pos + i)
		}
		if err := sess.Decode(batch, host.LogitsLast); err != nil {
			return nil, fmt.Errorf("--frag: decode at %d: %w", pos, err)
		}
		m, err := host.MeasureLastGraph(sess)
		if err != nil {
			return nil, err
		}
		if k := len(rep.Graphs) - 1; k >= 0 && rep.Graphs[k].Phase == sched[phase].Name && sameGraph(rep.Graphs[k].ActivationMemory, m) {
			rep.Graphs[k].To = pos + n
		} else {
			rep.Graphs = append(rep.Graphs, fragRow{Phase: sched[phase].Name, From: pos, To: pos + n, ActivationMemory: m})
		}
		pos += n
		if pos%(total/8) == 0 {
			c.Logf("activations --frag: %d/%d positions, %d graphs", pos, total, len(rep.Graphs))
		}
	}
	var maxPeak, maxBuf int64
	for i := range rep.Graphs {
		r := &rep.Graphs[i]
		maxPeak, maxBuf = max(maxPeak, r.PeakLive), max(maxBuf, r.Buffer)
		r.AllocOverPeak = float64(r.Allocated) / float64(max(r.PeakLive, 1))
		r.BufferOverPeak = float64(r.Buffer) / float64(max(r.PeakLive, 1))
		rep.AllocOverPeakMax = max(rep.AllocOverPeakMax, r.AllocOverPeak)
		rep.BufferOverPeakMax = max(rep.BufferOverPeakMax, r.BufferOverPeak)
		rep.AllocOverPeakMean += r.AllocOverPeak / float64(len(rep.Graphs))
		rep.BufferOverPeakMean += r.BufferOverPeak / float64(len(rep.Graphs))
	}
	rep.BufferOverMaxPeak = float64(maxBuf) / float64(max(maxPeak, 1))
	return rep, nil
}

// sameGraph: two steps measured the same graph (shape and buffers).
func sameGraph(a, b host.ActivationMemory) bool {
	return a.NTok == b.NTok && slices.Equal(a.Rings, b.Rings) && a.KeepAll == b.KeepAll && a.PeakLive == b.PeakLive &&
		a.Allocated == b.Allocated && a.Buffer == b.Buffer
}

// setWindows applies one phase's windows: uniform ones through SetWindow,
// others per layer.
func setWindows(sess host.Session, ws []int) error {
	if ws == nil {
		return nil
	}
	if slices.Min(ws) == slices.Max(ws) {
		s, ok := sess.(host.WindowSetter)
		if !ok {
			return fmt.Errorf("the session has no KV window")
		}
		return s.SetWindow(fragAnchors, ws[0])
	}
	s, ok := sess.(host.LayerWindowSetter)
	if !ok {
		return fmt.Errorf("the session has no per-layer KV windows")
	}
	return s.SetLayerWindows(fragAnchors, ws)
}
