package engine

import "fmt"

// The one rule for a session's context length, used by both engines, the
// host, the CLI and the C API: a length left at 0 becomes DefaultNCtx
// capped by the model's training context (Resolve); a length asked for
// explicitly above the training context is refused (Fit) with an error
// naming both numbers. A caller with its own default (a command-line flag
// whose default is DefaultNCtx, say) passes 0 when the user did not set it.

// ContextError is an explicit context length above what a model was
// trained on.
type ContextError struct {
	NCtx      int    // the context asked for
	NCtxTrain int    // the model's training context
	Model     string // the model's name in messages ("" = "the model")
}

func (e *ContextError) Error() string {
	m := "the model"
	if e.Model != "" {
		m = e.Model
	}
	return fmt.Sprintf("context %d is above the training context %d of %s", e.NCtx, e.NCtxTrain, m)
}

// Fit is Resolve for a model trained on nCtxTrain positions, refusing an
// explicit NCtx above nCtxTrain with a *ContextError. nCtxTrain 0 (a model
// that states none) checks nothing.
func (c SessionConfig) Fit(nCtxTrain int) (SessionConfig, error) {
	if nCtxTrain > 0 && c.NCtx > nCtxTrain {
		return c, &ContextError{NCtx: c.NCtx, NCtxTrain: nCtxTrain}
	}
	return c.Resolve(nCtxTrain), nil
}
