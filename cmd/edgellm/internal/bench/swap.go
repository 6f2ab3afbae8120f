package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"time"

	"github.com/edgellm/edgellm/host"
)

// SwapOptions configures Swap.
type SwapOptions struct {
	// Tiers is the ladder: GGUF files of one base model, high to low precision.
	// Swap uses the first two: it starts on Tiers[0] and swaps 0→1, 1→0.
	Tiers []string
	// NCtxTokens are prefilled on tier 0 before the first swap (the KV that
	// migrates); 0 = 512.
	NCtxTokens int
	// Repeats is the number of round trips (two swaps each).
	Repeats int
	Threads int
	// NCtx is the session context; 0 = SessionConfig.Resolve's default.
	NCtx   int
	KVType host.KVType
	Repack bool
	// Text, TextName: the context tokens, as for Options.
	Text, TextName string
	Progress       io.Writer
	MemTick        time.Duration
}

// SwapSample is one swap.
type SwapSample struct {
	From        int     `json:"from"`
	To          int     `json:"to"`
	TotalMS     float64 `json:"total_ms"`
	SerializeMS float64 `json:"serialize_ms"`
	UnloadMS    float64 `json:"unload_ms"`
	LoadMS      float64 `json:"load_ms"`
	RestoreMS   float64 `json:"restore_ms"`
	StateBytes  int     `json:"state_bytes"`
}

// SwapResult is the latency of tier swaps with KV migration (llamacpp).
type SwapResult struct {
	Engine     string   `json:"engine"`
	Tiers      []string `json:"tiers"`
	NCtxTokens int      `json:"n_ctx_tokens"`
	NCtx       int      `json:"n_ctx"`
	Threads    int      `json:"threads"`
	KVType     string   `json:"kv_type"`
	Repeats    int      `json:"repeats"`
	// SwapMSMedian is the median total over every swap; the phases are
	// medians of each phase (they need not add up to the total's median).
	SwapMSMedian float64 `json:"swap_ms_median"`
	// DownMSMedian (0→1) and UpMSMedian (1→0) split the median by direction.
	DownMSMedian float64 `json:"down_ms_median"`
	UpMSMedian   float64 `json:"up_ms_median"`
	SerializeMS  float64 `json:"serialize_ms"`
	UnloadMS     float64 `json:"unload_ms"`
	LoadMS       float64 `json:"load_ms"`
	RestoreMS    float64 `json:"restore_ms"`
	// StateBytes is the serialised sequence state that migrates.
	StateBytes int `json:"state_bytes"`
	// InitialLoadMS is the load of tier 0 before the first swap.
	InitialLoadMS float64      `json:"initial_load_ms"`
	Swaps         []SwapSample `json:"swaps"`
	RSSPeakMB     float64      `json:"rss_peak_mb"`
	PSSPeakMB     float64      `json:"pss_peak_mb"`
	PromptSource  string       `json:"prompt_source"`
}

// Swap loads tier 0 of the ladder, prefills NCtxTokens, then swaps 0→1 and
// 1→0 Repeats times, timing each phase. After the last swap it decodes one
// more token on the migrated state and checks the logits are finite.
func Swap(ctx context.Context, o SwapOptions) (*SwapResult, error) {
	if len(o.Tiers) < 2 {
		return nil, fmt.Errorf("a tier swap needs 2 tiers, got %d", len(o.Tiers))
	}
	if o.NCtxTokens == 0 {
		o.NCtxTokens = 512
	}
	switch {
	case o.NCtxTokens < 1:
		return nil, fmt.Errorf("context of %d tokens to migrate (want ≥ 1)", o.NCtxTokens)
	case o.Repeats < 1:
		return nil, fmt.Errorf("%d repeats (want ≥ 1)", o.Repeats)
	case o.Threads < 0 || o.NCtx < 0:
		return nil, fmt.Errorf("threads %d, context %d (want ≥ 0)", o.Threads, o.NCtx)
	}
	kv := o.KVType
	if kv == "" {
		kv = host.KVF16
	}
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	mem, err := NewMemSampler(o.MemTick)
	if err != nil {
		return nil, err
	}
	defer mem.Close()
	mem.Start()

	t0 := time.Now()
	eng, err := host.Load("", host.LoadOptions{Engine: "llamacpp", Tiers: o.Tiers, Repack: o.Repack, Notices: progress})
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	res := &SwapResult{Engine: eng.Name(), Tiers: o.Tiers, NCtxTokens: o.NCtxTokens, Threads: o.Threads,
		KVType: string(kv), Repeats: o.Repeats, InitialLoadMS: millis(time.Since(t0))}
	info := eng.Info()
	res.NCtx = o.NCtx
	if res.Threads == 0 {
		res.Threads = runtime.NumCPU()
	}
	res.NCtx = host.SessionConfig{NCtx: res.NCtx}.Resolve(info.NCtxTrain).NCtx
	if res.NCtx > info.NCtxTrain {
		return nil, fmt.Errorf("context %d is above the model's training context %d: %w", res.NCtx, info.NCtxTrain, ErrContext)
	}
	if o.NCtxTokens+1 > res.NCtx {
		return nil, fmt.Errorf("%d context tokens + 1 check token exceed the context of %d: %w", o.NCtxTokens, res.NCtx, ErrContext)
	}
	p, err := MakePrompt(eng.Vocab(), o.Text, o.TextName, o.NCtxTokens)
	if err != nil {
		return nil, err
	}
	res.PromptSource = p.Source

	sess, err := eng.NewSession(host.SessionConfig{NCtx: res.NCtx, Threads: o.Threads, KVType: kv})
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	sw, ok := sess.(host.TierSwapper)
	if !ok {
		return nil, fmt.Errorf("engine %s cannot swap tiers", eng.Name())
	}
	if err := sess.Decode(p.Tokens, host.LogitsLast); err != nil {
		return nil, fmt.Errorf("prefill of %d tokens: %w", len(p.Tokens), err)
	}
	fmt.Fprintf(progress, "bench: prefilled %d tokens on tier 0 (%s)\n", len(p.Tokens), o.Tiers[0])

	var total, down, up, ser, unl, ld, rst []float64
	for range o.Repeats {
		for _, to := range []int{1, 0} {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			t, err := sw.SwapTier(to)
			if err != nil {
				return nil, err
			}
			if sess.Len() != o.NCtxTokens {
				return nil, fmt.Errorf("after swap %d→%d the session holds %d positions, want %d", t.From, t.To, sess.Len(), o.NCtxTokens)
			}
			s := SwapSample{From: t.From, To: t.To, TotalMS: millis(t.Total()), SerializeMS: millis(t.Serialize),
				UnloadMS: millis(t.Unload), LoadMS: millis(t.Load), RestoreMS: millis(t.Restore), StateBytes: t.StateBytes}
			res.Swaps = append(res.Swaps, s)
			res.StateBytes = max(res.StateBytes, t.StateBytes)
			total = append(total, s.TotalMS)
			if to == 1 {
				down = append(down, s.TotalMS)
			} else {
				up = append(up, s.TotalMS)
			}
			ser, unl, ld, rst = append(ser, s.SerializeMS), append(unl, s.UnloadMS), append(ld, s.LoadMS), append(rst, s.RestoreMS)
			fmt.Fprintf(progress, "bench: swap %d/%d %d→%d: %.2f ms (serialize %.2f, unload %.2f, load %.2f, restore %.2f; state %d bytes)\n",
				len(total), 2*o.Repeats, t.From, t.To, s.TotalMS, s.SerializeMS, s.UnloadMS, s.LoadMS, s.RestoreMS, t.StateBytes)
		}
	}
	// The migrated state must still decode: one more token on tier 0.
	logits := make([]float32, eng.Vocab().NVocab())
	if err := sess.Decode(p.Tokens[len(p.Tokens)-1:], host.LogitsLast); err != nil {
		return nil, fmt.Errorf("decode after the swaps: %w", err)
	}
	if err := sess.Logits(0, logits); err != nil {
		return nil, fmt.Errorf("logits after the swaps: %w", err)
	}
	for _, l := range logits {
		if math.IsNaN(float64(l)) || math.IsInf(float64(l), 0) {
			return nil, fmt.Errorf("non-finite logits after the swaps")
		}
	}
	peak := mem.Stop()
	res.SwapMSMedian, res.DownMSMedian, res.UpMSMedian = Median(total), Median(down), Median(up)
	res.SerializeMS, res.UnloadMS, res.LoadMS, res.RestoreMS = Median(ser), Median(unl), Median(ld), Median(rst)
	res.RSSPeakMB, res.PSSPeakMB = mib(peak.RSS), mib(peak.PSS)
	return res, nil
}
