package engine

import (
	"errors"
	"testing"
)

// TestSessionConfigFit: the one context rule. NCtx 0 is DefaultNCtx capped
// by the training context; an explicit NCtx up to it is kept; above it is
// a *ContextError naming both numbers.
func TestSessionConfigFit(t *testing.T) {
	for _, c := range []struct{ nctx, train, want int }{
		{0, 128, 128}, {0, 4096, DefaultNCtx}, {64, 128, 64}, {128, 128, 128}, {3000, 4096, 3000},
	} {
		got, err := SessionConfig{NCtx: c.nctx}.Fit(c.train)
		if err != nil || got.NCtx != c.want || got.NBatch != min(DefaultNBatch, c.want) {
			t.Errorf("NCtx %d, train %d: %+v, %v; want NCtx %d", c.nctx, c.train, got, err, c.want)
		}
	}
	_, err := SessionConfig{NCtx: 256}.Fit(128)
	var ce *ContextError
	if !errors.As(err, &ce) || ce.NCtx != 256 || ce.NCtxTrain != 128 || err.Error() != "context 256 is above the training context 128 of the model" {
		t.Errorf("NCtx 256 on 128: %v", err)
	}
}
