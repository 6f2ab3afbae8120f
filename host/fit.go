package host

import "github.com/edgellm/edgellm/host/engine"

// ContextError is an explicit context length above the model's training
// context: SessionConfig.Fit, Engine.NewSession and a draft model whose
// training context is below its session's return it (wrapped). The one rule
// for context lengths is in host/engine/fit.go.
type ContextError = engine.ContextError

// DefaultNCtx is the context of a session whose SessionConfig.NCtx is 0,
// capped by the model's training context.
const DefaultNCtx = engine.DefaultNCtx
