package native

import "github.com/edgellm/edgellm/host/engine"

// The session NewSession returns implements a live setter only when the
// ability is real (host/RATIONALE.md, "What a session can change"): its
// dynamic type is one of the wrappers below, chosen by how the engine was
// loaded. A plain session has no SwapTier, a tier ladder no SetLayerSets,
// weights loaded without repacking no SetRepackLayers. *Session itself
// keeps every method for the package's own tools (calibration, the draft
// machinery); SessionOf unwraps.

// sessionCore is what every native session can do.
type sessionCore interface {
	engine.Session
	SetThreads(n int) error
	Threads() int
	SetWindow(anchors, window int) error
	SetLayerWindows(anchors int, windows []int) error
	LayerWindows() []int
	SetEvictMode(mode string) error // evict.go (issue #29)
	EvictMode() string
	Anchors() int
	SetKVType(typ engine.KVType) (engine.KVChange, error)
	SetLayerLatencyEvery(n int) error
	LastLayerLatency(dst *LayerLatency) bool
	KVBytesPerToken() int64
	Stats() Stats
	engine.StateSaver
	DecodeCount() int64
	core() *Session
}

// tierOps is a tier ladder's (Options.Tiers).
type tierOps interface {
	SwapTier(to int) (engine.SwapTimings, error)
}

// setOps is per-layer weight-set choice (Options.ExtraSets, not a ladder).
type setOps interface {
	LayerSets() []int
	SetLayerSets(sets []int) error
	SetBits() []int
	AdviseUnused() error
}

// repackOps is releasing and restoring repacked weights (Options.Repack,
// with something eligible).
type repackOps interface {
	RepackState() RepackState
	SetRepackLayers(k int) (RepackChange, error)
}

type (
	plainSession struct{ sessionCore }
	tierSession  struct {
		sessionCore
		tierOps
	}
	setSession struct {
		sessionCore
		setOps
	}
	repackSession struct {
		sessionCore
		repackOps
	}
	tierRepackSession struct {
		sessionCore
		tierOps
		repackOps
	}
	setRepackSession struct {
		sessionCore
		setOps
		repackOps
	}
)

func (s *Session) core() *Session { return s }

// public is s as NewSession hands it out: a value whose methods are the
// abilities s really has.
func (s *Session) public() engine.Session {
	e := s.eng
	tier, sets, repack := e.tier.on, len(e.sets) > 1 && !e.tier.on, e.RepackState().MaxLayers > 0
	switch {
	case tier && repack:
		return tierRepackSession{s, s, s}
	case tier:
		return tierSession{s, s}
	case sets && repack:
		return setRepackSession{s, s, s}
	case sets:
		return setSession{s, s}
	case repack:
		return repackSession{s, s}
	}
	return plainSession{s}
}

// SessionOf is the native session behind s (a session of this engine's
// NewSession, or a *Session); nil for another engine's.
func SessionOf(s engine.Session) *Session {
	if c, ok := s.(interface{ core() *Session }); ok {
		return c.core()
	}
	return nil
}
