package host

import (
	"fmt"

	"github.com/edgellm/edgellm/internal/native"
)

// ActivationMemory is the activation memory of one forward pass: ggml's
// graph allocator against keeping every intermediate tensor, and the peak
// of live bytes when each is freed after its last consumer (see
// kernels.GraphMemory for what counts).
type ActivationMemory struct {
	NTok, NKV int   // batch tokens, attended positions
	KeepAll   int64 // every intermediate tensor its own allocation
	PeakLive  int64 // most bytes live at once, freed after the last use
	Allocated int64 // ggml's graph allocator's buffer for this graph
	Tensors   int   // intermediate tensors counted
	// Rings is the attended positions of each KV ring the graph reads (one
	// without a window, one per distinct window with them).
	Rings []int `json:",omitempty"`
	// Buffer is the session's own graph allocator buffer when measured:
	// reserved for the largest graph of its KV layout, never shrunk.
	Buffer int64
}

// MeasureActivations builds the graph of a native-engine session for a
// batch of nTok tokens attending nKV positions (a 512-token prefill: 512,
// 512; a decode step at position p: 1, p+1) and measures its activation
// memory with an allocator of its own; the session's decoding is not
// changed. Other engines return an error.
func MeasureActivations(sess Session, nTok, nKV int) (ActivationMemory, error) {
	ns := native.SessionOf(sess)
	if ns == nil {
		return ActivationMemory{}, fmt.Errorf("activation memory is measured on native-engine sessions only")
	}
	m, err := ns.ActivationMemory(nTok, nKV)
	return activationMemory(m), err
}

// MeasureLastGraph measures the graph of sess's last Decode (its batch,
// attended positions and KV window layout) as MeasureActivations does, on
// a scratch graph: the session's decoding is not changed. Call it after a
// Decode and before the window changes. Other engines return an error.
func MeasureLastGraph(sess Session) (ActivationMemory, error) {
	ns := native.SessionOf(sess)
	if ns == nil {
		return ActivationMemory{}, fmt.Errorf("activation memory is measured on native-engine sessions only")
	}
	m, err := ns.LastGraphMemory()
	return activationMemory(m), err
}

func activationMemory(m native.ActivationMemory) ActivationMemory {
	return ActivationMemory{NTok: m.NTok, NKV: m.NKV, KeepAll: m.Graph.KeepAll, PeakLive: m.Graph.PeakLive,
		Allocated: m.Allocated, Tensors: m.Graph.Tensors, Rings: m.Rings, Buffer: m.Buffer}
}
