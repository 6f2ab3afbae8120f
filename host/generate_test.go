package host

import (
	"context"
	"testing"
	"time"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestGenerateCPUTime: the thread CPU times are measured over the same spans
// as the wall times. One compute thread cannot use more CPU than wall time
// (plus clock granularity), and a prefill and 30 decode steps of real work
// use some.
func TestGenerateCPUTime(t *testing.T) {
	forEachEngine(t, func(t *testing.T, eng Engine) {
		sess, err := eng.NewSession(SessionConfig{NCtx: 128, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		prompt := make([]int32, 32)
		for i := range prompt {
			prompt[i] = int32(1 + i*7%500)
		}
		st, err := Generate(context.Background(), sess,
			GenerateOptions{Prompt: prompt, NPredict: 32, Sampling: SamplingParams{TopP: 1, RepeatPenalty: 1}, MeasureCPU: true})
		if err != nil {
			t.Fatal(err)
		}
		const slack = 2 * time.Millisecond // clock granularity and skew over ~30 readings
		t.Logf("prefill wall %v cpu %v; decode (%d steps) wall %v cpu %v", st.Prefill, st.PrefillCPU, st.DecodeTokens, st.Decode, st.DecodeCPU)
		if st.PrefillCPU <= 0 || st.DecodeCPU <= 0 {
			t.Fatalf("no CPU time measured: %+v", st)
		}
		if st.PrefillCPU > st.Prefill+slack || st.DecodeCPU > st.Decode+slack {
			t.Fatalf("CPU time above wall time with one thread: %+v", st)
		}
		// The two clocks differ by microseconds per step (CPU time can
		// read slightly above wall time on a quiet machine); the rates
		// must still agree within the slack.
		if r := st.DecodeCPUTPS() / st.DecodeTPS(); r < 0.9 {
			t.Fatalf("CPU-time rate %.0f far below wall rate %.0f", st.DecodeCPUTPS(), st.DecodeTPS())
		}
		// The whole process (every thread) over the decode span: at least
		// the generating thread's CPU, and at one thread at most 1.05
		// cores busy (+ the clock slack over the span): nothing else in
		// the process may spin while one thread decodes.
		t.Logf("process CPU over the decode span %v: %v (%.3f cores)", st.DecodeSpan, st.DecodeProcCPU, st.DecodeCores())
		if st.DecodeSpan < st.Decode || st.DecodeProcCPU+slack < st.DecodeCPU {
			t.Fatalf("decode span %v < decode %v, or process CPU %v < thread CPU %v", st.DecodeSpan, st.Decode, st.DecodeProcCPU, st.DecodeCPU)
		}
		if limit := 1.05 + slack.Seconds()/st.DecodeSpan.Seconds(); st.DecodeCores() > limit {
			t.Fatalf("%.3f cores busy while decoding on one thread (limit %.3f)", st.DecodeCores(), limit)
		}
		// Without MeasureCPU no thread CPU time is read (no system calls
		// per step).
		st, err = Generate(context.Background(), sess,
			GenerateOptions{Prompt: prompt, NPredict: 32, Sampling: SamplingParams{TopP: 1, RepeatPenalty: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if st.PrefillCPU != 0 || st.DecodeCPU != 0 || st.DecodeTokens == 0 {
			t.Fatalf("CPU time measured without MeasureCPU: %+v", st)
		}
	})
}

// forEachEngine runs f on stories260K loaded on each engine.
func forEachEngine(t *testing.T, f func(t *testing.T, eng Engine)) {
	for _, engine := range []string{"native", "llamacpp"} {
		t.Run(engine, func(t *testing.T) {
			eng, err := Load(sharedtest.Stories260K(t), LoadOptions{Engine: engine})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			f(t, eng)
		})
	}
}

// BeforeStep runs with step 0 before the prefill (the session still empty,
// so a policy's first decision applies to the prefill), then with 1, 2, …
// before each decode step, the last token's included.
func TestGenerateBeforeStepZero(t *testing.T) {
	forEachEngine(t, func(t *testing.T, eng Engine) {
		sess, err := eng.NewSession(SessionConfig{NCtx: 64, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		prompt := []int32{1, 2, 3, 4}
		var steps, lens []int
		_, err = Generate(context.Background(), sess, GenerateOptions{Prompt: prompt, NPredict: 4,
			Sampling:   SamplingParams{TopP: 1, RepeatPenalty: 1},
			BeforeStep: func(step int) error { steps, lens = append(steps, step), append(lens, sess.Len()); return nil }})
		if err != nil {
			t.Fatal(err)
		}
		// 4 tokens: step 0 before the prefill, steps 1-4 before the forward
		// passes of tokens 1-4 (the last one too: it stays in the KV cache)
		if len(steps) != 5 || steps[0] != 0 || lens[0] != 0 || steps[1] != 1 || lens[1] != len(prompt) || steps[4] != 4 || lens[4] != len(prompt)+3 {
			t.Fatalf("BeforeStep steps %v at session lengths %v; want 0 1 2 3 4 at 0 %d … %d", steps, lens, len(prompt), len(prompt)+3)
		}
		if sess.Len() != len(prompt)+4 {
			t.Errorf("session length %d after 4 tokens, want %d: every emitted token in the KV cache", sess.Len(), len(prompt)+4)
		}
	})
}
