package llamacpp

import "github.com/edgellm/edgellm/host/engine"

// The session NewSession returns implements engine.TierSwapper only when
// the engine was loaded as a tier ladder (host/RATIONALE.md, "What a
// session can change"); *Session keeps SwapTier for this package.

// sessionCore is what every llama.cpp session can do.
type sessionCore interface {
	engine.Session
	SetThreads(n int) error
	Threads() int
	KVBytesPerToken() int64
	StateBytes() (int, error)
	engine.StateSaver
	DecodeCount() int64
	core() *Session
}

type (
	plainSession struct{ sessionCore }
	tierSession  struct {
		sessionCore
		engine.TierSwapper
	}
)

func (s *Session) core() *Session { return s }

// public is s as NewSession hands it out.
func (s *Session) public() engine.Session {
	if s.e.tiers != nil {
		return tierSession{s, s}
	}
	return plainSession{s}
}

// SessionOf is the llama.cpp session behind s; nil for another engine's.
func SessionOf(s engine.Session) *Session {
	if c, ok := s.(interface{ core() *Session }); ok {
		return c.core()
	}
	return nil
}
