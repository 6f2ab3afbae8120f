package kernels

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

const storiesGolden = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park."

// stories is the stories260K model, loaded once for the package's tests.
var stories struct {
	once sync.Once
	m    *Model
	err  error
}

func loadStories(t testing.TB) *Model {
	t.Helper()
	path := sharedtest.Stories260K(t)
	stories.once.Do(func() { stories.m, stories.err = LoadModel(path, ModelParams{}) })
	if stories.err != nil {
		t.Fatal(stories.err)
	}
	return stories.m
}

func newCtx(t testing.TB, m *Model, p ContextParams) *Context {
	t.Helper()
	if p.Threads == 0 {
		p.Threads = 1 // the machine is shared; tiny model
	}
	c, err := NewContext(m, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newBatch(t testing.TB, n, nSeq int) *Batch {
	t.Helper()
	b, err := NewBatch(n, nSeq)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// greedy decodes n tokens greedily on sequence 0 after prompt (positions
// continue from start) and returns them.
func greedy(t testing.TB, c *Context, b *Batch, prompt []int32, start, n int) []int32 {
	t.Helper()
	logits := make([]float32, c.NVocab())
	b.Clear()
	for i, tok := range prompt {
		if err := b.Add(tok, start+i, 0, i == len(prompt)-1); err != nil {
			t.Fatal(err)
		}
	}
	pos := start + len(prompt)
	var out []int32
	for len(out) < n {
		if err := c.Decode(b); err != nil {
			t.Fatalf("decode at pos %d: %v", pos, err)
		}
		if err := c.Logits(b.Len()-1, logits); err != nil {
			t.Fatal(err)
		}
		tok := Argmax(logits)
		out = append(out, tok)
		b.Clear()
		if err := b.Add(tok, pos, 0, true); err != nil {
			t.Fatal(err)
		}
		pos++
	}
	return out
}

func TestGoldenStories260K(t *testing.T) {
	m := loadStories(t)
	c := newCtx(t, m, ContextParams{NCtx: 256})
	b := newBatch(t, 64, 1)
	v := m.Vocab()
	toks := greedy(t, c, b, []int32{v.BOS()}, 0, 64)
	text, err := v.Detokenize(toks, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(text, storiesGolden) {
		t.Fatalf("greedy text:\n%q\nwant prefix\n%q", text, storiesGolden)
	}
	// Pieces concatenate to the same text.
	var pieces []byte
	for _, tok := range toks {
		if pieces, err = v.Piece(pieces, tok, false); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.TrimLeft(string(pieces), " "); !strings.HasPrefix(got, storiesGolden) {
		t.Fatalf("pieces %q", got)
	}
	perf := c.Perf()
	if perf.NEval < 60 || perf.Eval <= 0 {
		t.Fatalf("perf counters not counting: %+v", perf)
	}
}

// TestGoldenKVTypesAndFlashAttn runs the golden prompt with the KV and flash
// attention settings stories260K allows (head size 8: no quantized KV).
func TestGoldenKVTypesAndFlashAttn(t *testing.T) {
	m := loadStories(t)
	for _, tc := range []struct {
		name string
		p    ContextParams
	}{
		{"f32-fa-off", ContextParams{TypeK: engine.KVF32, TypeV: engine.KVF32, FlashAttn: FlashAttnOff}},
		{"f16-fa-on", ContextParams{TypeK: engine.KVF16, TypeV: engine.KVF16, FlashAttn: FlashAttnOn}},
		{"ubatch-4", ContextParams{NBatch: 64, NUBatch: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.p.NCtx = 128
			c := newCtx(t, m, tc.p)
			b := newBatch(t, 8, 1)
			// A prompt batch of several tokens, then greedy continuation.
			prompt, err := m.Vocab().Tokenize("Once upon a time", true, false)
			if err != nil {
				t.Fatal(err)
			}
			toks := greedy(t, c, b, prompt, 0, 12)
			text, _ := m.Vocab().Detokenize(append(prompt, toks...), true, false)
			text = strings.TrimLeft(text, " ") // SentencePiece's leading space
			if !strings.HasPrefix(text, "Once upon a time, there was a little girl named Lily") {
				t.Fatalf("%s: %q", tc.name, text)
			}
		})
	}
}

// TestDecodeLogitsNoAlloc proves the per-token step (clear, add, decode,
// logits) allocates nothing.
func TestDecodeLogitsNoAlloc(t *testing.T) {
	m := loadStories(t)
	c := newCtx(t, m, ContextParams{NCtx: 512})
	b := newBatch(t, 1, 1)
	logits := make([]float32, c.NVocab())
	tok, pos := m.Vocab().BOS(), 0
	step := func() {
		b.Clear()
		if err := b.Add(tok, pos, 0, true); err != nil {
			t.Fatal(err)
		}
		if err := c.Decode(b); err != nil {
			t.Fatal(err)
		}
		if err := c.Logits(0, logits); err != nil {
			t.Fatal(err)
		}
		tok = Argmax(logits)
		pos++
	}
	step() // warm up: graph allocation happens on the first decode
	if a := testing.AllocsPerRun(100, step); a != 0 {
		t.Fatalf("decode+logits step allocates %v times per token", a)
	}
}

func TestDecodeValidation(t *testing.T) {
	m := loadStories(t)
	c := newCtx(t, m, ContextParams{NCtx: 64, NBatch: 8, NSeqMax: 2})
	big := newBatch(t, 16, 2)
	logits := make([]float32, c.NVocab())
	for _, tc := range []struct {
		name string
		fill func(b *Batch)
		want error
	}{
		{"empty", func(b *Batch) {}, ErrEmptyBatch},
		{"too-large", func(b *Batch) {
			for i := 0; i < 9; i++ {
				b.Add(1, i, 0, false)
			}
		}, ErrBatchTooLarge},
		{"token-negative", func(b *Batch) { b.Add(-1, 0, 0, true) }, ErrInvalidToken},
		{"token-n_vocab", func(b *Batch) { b.Add(int32(m.NVocab()), 0, 0, true) }, ErrInvalidToken},
		{"pos-negative", func(b *Batch) { b.Add(1, -1, 0, true) }, ErrInvalidPos},
		{"pos-n_ctx", func(b *Batch) { b.Add(1, c.NCtxSeq(), 0, true) }, ErrInvalidPos},
		{"seq-out-of-range", func(b *Batch) { b.Add(1, 0, 2, true) }, ErrInvalidSeq},
		{"seq-negative", func(b *Batch) { b.AddSeqs(1, 0, []int{0, -1}, true) }, ErrInvalidSeq},
		// llama.cpp's own check: positions must continue the sequence.
		{"non-consecutive", func(b *Batch) { b.Add(1, 0, 0, false); b.Add(1, 5, 0, true) }, ErrInvalidBatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			big.Clear()
			tc.fill(big)
			err := c.Decode(big)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Decode = %v, want %v", err, tc.want)
			}
			if err := c.Logits(0, logits); !errors.Is(err, ErrNoLogits) {
				t.Fatalf("Logits after failed decode = %v, want ErrNoLogits", err)
			}
		})
	}

	// Logits: index without logits, short buffer, out of range.
	big.Clear()
	big.Add(1, 0, 0, false)
	big.Add(2, 1, 0, true)
	if err := c.Decode(big); err != nil {
		t.Fatal(err)
	}
	if err := c.Logits(0, logits); !errors.Is(err, ErrNoLogits) {
		t.Fatalf("Logits(0) = %v, want ErrNoLogits", err)
	}
	if err := c.Logits(2, logits); !errors.Is(err, ErrNoLogits) {
		t.Fatalf("Logits(2) = %v, want ErrNoLogits", err)
	}
	if err := c.Logits(1, logits[:10]); !errors.Is(err, ErrShortBuffer) {
		t.Fatalf("Logits(short) = %v, want ErrShortBuffer", err)
	}
	if err := c.Logits(1, logits); err != nil {
		t.Fatal(err)
	}
	for _, v := range logits {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatal("non-finite logit")
		}
	}

	// Batch capacity.
	small := newBatch(t, 1, 1)
	if err := small.Add(1, 0, 0, true); err != nil {
		t.Fatal(err)
	}
	if err := small.Add(1, 1, 0, true); !errors.Is(err, ErrBatchFull) {
		t.Fatalf("Add beyond capacity = %v", err)
	}
	if err := small.AddSeqs(1, 1, []int{0, 1}, true); !errors.Is(err, ErrInvalidSeq) {
		t.Fatalf("AddSeqs with too many seqs = %v", err)
	}
}

func TestInterrupt(t *testing.T) {
	m := loadStories(t)
	c := newCtx(t, m, ContextParams{NCtx: 64})
	b := newBatch(t, 1, 1)
	b.Add(m.Vocab().BOS(), 0, 0, true)
	c.Interrupt()
	err := c.Decode(b)
	var de *DecodeError
	if !errors.Is(err, ErrAborted) || !errors.As(err, &de) || de.Code != 2 {
		t.Fatalf("Decode after Interrupt = %v, want ErrAborted (code 2)", err)
	}
	// The flag is consumed: the next decode runs. The aborted batch may have
	// left its cell in the KV cache; start the sequence afresh.
	if err := c.MemorySeqRm(0, -1, -1); err != nil {
		t.Fatal(err)
	}
	if err := c.Decode(b); err != nil {
		t.Fatalf("Decode after aborted decode: %v", err)
	}
}

func TestNoKVSlot(t *testing.T) {
	m := loadStories(t)
	// Two sequences in a unified cache of 256 cells (llama.cpp's minimum):
	// fill it with sequence 0, then sequence 1 has nowhere to go.
	c := newCtx(t, m, ContextParams{NCtx: 256, NBatch: 256, NSeqMax: 2, KVUnified: true})
	if c.NCtx() != 256 {
		t.Fatalf("NCtx = %d", c.NCtx())
	}
	b := newBatch(t, 256, 1)
	for i := 0; i < c.NCtx(); i++ {
		if err := b.Add(1, i, 0, i == c.NCtx()-1); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Decode(b); err != nil {
		t.Fatal(err)
	}
	b.Clear()
	b.Add(1, 0, 1, true)
	if err := c.Decode(b); !errors.Is(err, ErrNoKVSlot) {
		t.Fatalf("Decode into a full cache = %v, want ErrNoKVSlot", err)
	}
	// Freeing cells makes room again.
	if err := c.MemorySeqRm(0, 8, -1); err != nil {
		t.Fatal(err)
	}
	if err := c.Decode(b); err != nil {
		t.Fatalf("Decode after freeing cells: %v", err)
	}
}

func TestClosedHandles(t *testing.T) {
	m, err := LoadModel(sharedtest.Stories260K(t), ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewContext(m, ContextParams{NCtx: 32, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); !errors.Is(err, ErrInUse) {
		t.Fatalf("Model.Close with open context = %v, want ErrInUse", err)
	}
	b := newBatch(t, 1, 1)
	b.Add(1, 0, 0, true)
	c.Close()
	c.Close() // idempotent
	logits := make([]float32, 512)
	for name, err := range map[string]error{
		"Decode": c.Decode(b),
		"Logits": c.Logits(0, logits),
		"SeqRm":  c.MemorySeqRm(0, -1, -1),
		"Clear":  c.MemoryClear(false),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s on closed context = %v, want ErrClosed", name, err)
		}
	}
	if _, err := c.StateSeqSize(0); !errors.Is(err, ErrClosed) {
		t.Errorf("StateSeqSize on closed context = %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	v := m.Vocab()
	if _, err := v.Tokenize("hi", true, false); !errors.Is(err, ErrClosed) {
		t.Errorf("Tokenize on closed model = %v", err)
	}
	if _, err := v.Piece(nil, 1, false); !errors.Is(err, ErrClosed) {
		t.Errorf("Piece on closed model = %v", err)
	}
	if v.BOS() != -1 || v.IsEOG(2) || v.NVocab() != 0 {
		t.Error("closed vocab answers")
	}
	if _, err := NewContext(m, ContextParams{}); !errors.Is(err, ErrClosed) {
		t.Errorf("NewContext on closed model = %v", err)
	}
	var nilCtx *Context
	if err := nilCtx.Decode(b); !errors.Is(err, ErrClosed) {
		t.Errorf("nil Context Decode = %v", err)
	}
	if _, err := NewContext(nil, ContextParams{}); !errors.Is(err, ErrClosed) {
		t.Errorf("NewContext(nil) = %v", err)
	}
	b.Close()
	if err := b.Add(1, 0, 0, true); !errors.Is(err, ErrClosed) {
		t.Errorf("Add on closed batch = %v", err)
	}
}

// TestBatchLogitsMatchSequential: logits for every index of one prompt batch
// (speculative verify) equal those of decoding the tokens one at a time.
func TestBatchLogitsMatchSequential(t *testing.T) {
	m := loadStories(t)
	prompt, err := m.Vocab().Tokenize("Once upon a time, there was a", true, false)
	if err != nil {
		t.Fatal(err)
	}
	n, nv := len(prompt), m.NVocab()
	batched := make([]float32, n*nv)
	c := newCtx(t, m, ContextParams{NCtx: 256})
	b := newBatch(t, n, 1)
	for i, tok := range prompt {
		b.Add(tok, i, 0, true)
	}
	if err := c.Decode(b); err != nil {
		t.Fatal(err)
	}
	for i := range prompt {
		if err := c.Logits(i, batched[i*nv:(i+1)*nv]); err != nil {
			t.Fatal(err)
		}
	}
	seq := newCtx(t, m, ContextParams{NCtx: 256})
	one := newBatch(t, 1, 1)
	row := make([]float32, nv)
	for i, tok := range prompt {
		one.Clear()
		one.Add(tok, i, 0, true)
		if err := seq.Decode(one); err != nil {
			t.Fatal(err)
		}
		seq.Logits(0, row)
		// Tolerance relative to the logits' range, top-1 kept: see
		// sharedtest.LogitsRelTol for why (another CPU sums in another order).
		if err := sharedtest.CompareLogits(batched[i*nv:(i+1)*nv], row); err != nil {
			t.Fatalf("position %d, batched against sequential: %v", i, err)
		}
	}
}

func TestPerfCounters(t *testing.T) {
	m := loadStories(t)
	c := newCtx(t, m, ContextParams{NCtx: 256})
	b := newBatch(t, 8, 1)
	greedy(t, c, b, []int32{1, 400, 300, 200}, 0, 5) // 4-token prompt, then 4 single steps
	p := c.Perf()
	if p.NPromptEval != 4 || p.NEval != 4 || p.PromptEval <= 0 || p.Eval <= 0 {
		t.Fatalf("Perf = %+v, want 4 prompt tokens and 4 single decodes", p)
	}
	c.PerfReset()
	if p := c.Perf(); p.Eval != 0 || p.PromptEval != 0 {
		t.Fatalf("after PerfReset: %+v", p)
	}
	off := newCtx(t, m, ContextParams{NCtx: 256, NoPerf: true})
	greedy(t, off, b, []int32{1}, 0, 3)
	if p := off.Perf(); p.Eval != 0 {
		t.Fatalf("NoPerf context counts: %+v", p)
	}
}
