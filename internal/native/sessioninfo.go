package native

import "github.com/edgellm/edgellm/host/engine"

// Engine is the engine the session decodes on.
func (s *Session) Engine() engine.Engine { return s.eng }

// Config is the configuration the session was created with, resolved
// (engine.SessionConfig.Resolve; Threads the count it started with).
func (s *Session) Config() engine.SessionConfig { return s.sc }
