package host

import (
	"fmt"
	"strings"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/engine"
	"github.com/edgellm/edgellm/internal/native"
)

// The native engine: our own llama forward pass on ggml over weights we mmap
// and a KV arena we own (internal/native).
func init() {
	nativeLoader = func(path string, opts LoadOptions) (Engine, error) {
		if len(opts.Tiers) > 0 { // set i = tier i; path is tier StartTier
			return native.Load(opts.Tiers[0], native.Options{ExtraSets: opts.Tiers[1:], Tiers: true, StartTier: opts.StartTier, Repack: opts.Repack, RepackLayers: opts.RepackLayers, WillNeedLayers: opts.WillNeedLayers, Kernels: opts.Kernels, ShareAnchors: opts.ShareAnchors})
		}
		return native.Load(path, native.Options{ExtraSets: opts.LayerSets, Repack: opts.Repack, RepackLayers: opts.RepackLayers, WillNeedLayers: opts.WillNeedLayers, Kernels: opts.Kernels, ShareAnchors: opts.ShareAnchors})
	}
}

// LayerSetter is implemented by sessions that choose per layer among weight
// sets of different precision (the native engine with LoadOptions.LayerSets).
type LayerSetter interface {
	// LayerSets is each layer's current set.
	LayerSets() []int
	// SetLayerSets selects every layer's set from the next step on.
	SetLayerSets(sets []int) error
	// SetBits is the nominal precision of each set, in bits.
	SetBits() []int
	// AdviseUnused releases the pages of (set, layer)s no session uses.
	AdviseUnused() error
}

var _ LayerSetter = (*native.Session)(nil)

// WeightSet describes one weight set of a model (LoadOptions.LayerSets).
type WeightSet = engine.WeightSet

// WeightSets lists the weight sets eng maps, set 0 first; nil when it has
// only the model's own (no LoadOptions.LayerSets, or the llamacpp engine).
func WeightSets(eng Engine) []WeightSet {
	ws, ok := eng.(interface{ Sets() []WeightSet })
	if !ok {
		return nil
	}
	if s := ws.Sets(); len(s) > 1 {
		return s
	}
	return nil
}

// applyLayerBits moves each layer with a non-zero entry in bits to the set
// whose precision is closest (ties: the more precise), then releases the
// sets left unused. bits becomes the precision now in force per layer
// (zero past the model's layers). It returns a one-line change description,
// "" when nothing moved.
func applyLayerBits(sess Session, bits *[abi.MaxLayers]uint8, old [abi.MaxLayers]uint8) (string, error) {
	ls, ok := sess.(LayerSetter)
	if !ok {
		*bits = old
		return "", nil
	}
	cur, setBits := ls.LayerSets(), ls.SetBits()
	next := append([]int(nil), cur...)
	moved := 0
	for i := range bits {
		if i >= len(cur) {
			bits[i] = 0
			continue
		}
		if b := int(bits[i]); b != 0 {
			best := next[i]
			for k, sb := range setBits {
				d, bd := abs(sb-b), abs(setBits[best]-b)
				if d < bd || (d == bd && sb > setBits[best]) {
					best = k
				}
			}
			if best != next[i] {
				next[i] = best
				moved++
			}
		}
		bits[i] = uint8(min(setBits[next[i]], 255))
	}
	if moved == 0 {
		return "", nil
	}
	if err := ls.SetLayerSets(next); err != nil {
		return "", err
	}
	if err := ls.AdviseUnused(); err != nil {
		return "", err
	}
	var sb strings.Builder
	for i, s := range next {
		if i > 0 {
			sb.WriteByte(' ')
		}
		fmt.Fprint(&sb, setBits[s])
	}
	return fmt.Sprintf("layer bits [%s] (%d layers switched)", sb.String(), moved), nil
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// LoadOptions.WillNeedLayers values besides a count.
const (
	WillNeedAll  = engine.WillNeedAll
	WillNeedNone = engine.WillNeedNone
)

// sessionIs reports whether s is the native session ns (NewSession hands
// out a wrapper of it: native.SessionOf).
func sessionIs(s Session, ns *native.Session) bool { return native.SessionOf(s) == ns }
