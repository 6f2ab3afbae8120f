package host

import (
	"context"
	"errors"
	"testing"
)

// TestErrContextFull: both engines report a context overrun as the one
// ErrContextFull, through Generate, whether the prompt or the generation
// overruns it.
func TestErrContextFull(t *testing.T) {
	forEachEngine(t, func(t *testing.T, eng Engine) {
		const nCtx = 256 // llama.cpp pads a context to a multiple of 256
		greedy := SamplingParams{TopP: 1, RepeatPenalty: 1}
		for _, tc := range []struct {
			name    string
			prompt  int
			predict int
		}{{"prompt", nCtx + 1, 1}, {"generation", 8, nCtx}} {
			sess, err := eng.NewSession(SessionConfig{NCtx: nCtx, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			prompt := make([]int32, tc.prompt)
			for i := range prompt {
				prompt[i] = int32(1 + i)
			}
			_, err = Generate(context.Background(), sess,
				GenerateOptions{Prompt: prompt, NPredict: tc.predict, Sampling: greedy})
			sess.Close()
			if !errors.Is(err, ErrContextFull) {
				t.Errorf("%s overruns the context: err = %v, want ErrContextFull", tc.name, err)
			}
		}
	})
}
