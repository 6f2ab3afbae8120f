package kernels

import "testing"

// BenchmarkDecodeToken times llama.cpp's single-token step on stories260K
// (clear, add, decode, logits copy, argmax), one thread, positions wrapping
// at 256 with the sequence cleared. TestDecodeLogitsNoAlloc checks the same
// step allocates nothing; TestGoldenStories260K checks its result.
func BenchmarkDecodeToken(b *testing.B) {
	m := loadStories(b)
	c := newCtx(b, m, ContextParams{NCtx: 256})
	batch := newBatch(b, 1, 1)
	logits := make([]float32, c.NVocab())
	tok, pos := m.Vocab().BOS(), 0
	b.ReportAllocs()
	for b.Loop() {
		if pos == c.NCtx() {
			c.MemorySeqRm(0, -1, -1)
			pos, tok = 0, m.Vocab().BOS()
		}
		batch.Clear()
		batch.Add(tok, pos, 0, true)
		if err := c.Decode(batch); err != nil {
			b.Fatal(err)
		}
		c.Logits(0, logits)
		tok = Argmax(logits)
		pos++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
}
