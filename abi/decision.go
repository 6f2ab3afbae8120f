package abi

import "unicode/utf8"

// Decision is what a policy asks the host to do. The host pre-fills it with the
// engine's current state before every call, so a policy changes only the
// fields it cares about; the host validates and clamps the result to what the
// engine can do.
type Decision struct {
	// Tier is the tier index; 0 is the highest precision, higher indexes are
	// lower precision (less memory, faster).
	Tier int32 `json:"tier"`
	// SpecK is the number of tokens to speculate per step (0 = off).
	SpecK int32 `json:"spec_k"`
	// Window is the KV window in tokens (0 = full context).
	Window int32 `json:"window"`
	// Anchors is the number of anchor (sink) tokens kept at the window start.
	Anchors int32 `json:"anchors"`
	// Threads is the decode thread count (0 = host default).
	Threads int32 `json:"threads"`
	// CadenceSteps asks the host to call the policy again after this many
	// decode steps (0 or 1 = every step).
	CadenceSteps int32 `json:"cadence_steps"`
	// KVType is the KV cache type (KVUnknown = leave as is).
	KVType KVType `json:"kv_type"`
	// ReasonCode says why the decision changed (ReasonNone if it did not).
	ReasonCode Reason `json:"reason_code"`
	// ReasonLen is the number of valid bytes in ReasonText.
	ReasonLen uint8 `json:"-"`
	// ReasonText is a short UTF-8 explanation; use SetReason and Reason.
	ReasonText [ReasonTextSize]byte `json:"-"`
	// LayerBits is the per-layer weight precision in bits (0 = leave as is).
	LayerBits [MaxLayers]uint8 `json:"layer_bits"`
	// LayerWindowScale scales Window per layer, in (0, 1] (0 = leave as is).
	LayerWindowScale [MaxLayers]float32 `json:"layer_window_scale"`

	// 1.1: speculative decoding.

	// SpecPMin stops drafting within a round once the draft's most likely
	// token has probability below it, in [0, 1] (0 = leave as is).
	SpecPMin float32 `json:"spec_p_min"`
	// DraftThreads is the thread count of draft steps (0 = leave as is).
	DraftThreads int32 `json:"draft_threads"`
	// DraftCPUMask is the CPUs draft steps may run on, bit i = CPU i
	// (0 = leave as is); the host keeps it within the CPUs the process may use.
	DraftCPUMask uint64 `json:"draft_cpu_mask"`
	// VerifyCPUMask is the CPUs target (verify and plain) steps may run on
	// (0 = leave as is).
	VerifyCPUMask uint64 `json:"verify_cpu_mask"`

	// 1.4: repacked weights.

	// RepackLayers is the number of layers to keep repacked, from layer 0
	// up, the output head last: layers 0..RepackLayers−1 use their repacked
	// copy, and the head only when RepackLayers is the layer count + 1 (all).
	// Lowering it releases the head first, then the highest layers; raising
	// it repacks them again from the mapped file. Negative = leave as is;
	// the host pre-fills the count in force (Sensors.RepackLayers), so a
	// policy that leaves it untouched asks for no change. The host clamps it
	// to Sensors.RepackLayersMax; engines without repacked weights ignore it.
	RepackLayers int32 `json:"repack_layers"`

	// 1.6: the draft model.

	// Draft asks the host to attach or detach the draft model: DraftLeave
	// (0, leave as is), DraftAttach (1) or DraftDetach (2: drop the draft
	// and free its memory, weights and KV). The host pre-fills DraftLeave;
	// on an engine without a configured draft it is ignored. Values outside
	// 0–2 are clamped to DraftLeave.
	Draft int32 `json:"draft"`

	// 1.7: the KV window's eviction mode.

	// KVEvict sets what the KV window does with positions it evicts:
	// EvictLeave (0, leave as is), EvictDrop (1) or EvictMerge (2: fold
	// the evicted K/V into the next visible position with a decay weight;
	// F16/F32 KV only). Values outside 0–2 are clamped to EvictLeave.
	KVEvict int32 `json:"kv_evict"`
}

// Values of Decision.KVEvict and Sensors.KVEvict (ABI 1.7).
const (
	EvictLeave = 0 // leave the eviction mode as it is (Decision only)
	EvictDrop  = 1 // evicted positions are masked out
	EvictMerge = 2 // evicted positions are merged into the next visible one
)

// Values of Decision.Draft (ABI 1.6).
const (
	DraftLeave  = 0 // leave the draft as it is
	DraftAttach = 1 // attach the configured draft (load it again if dropped)
	DraftDetach = 2 // detach the draft and free its weights and KV
)

// SetReason sets the reason code and text. The text is truncated to
// ReasonTextSize bytes at a UTF-8 boundary. It does not allocate.
func (d *Decision) SetReason(code Reason, text string) {
	n := len(text)
	if n > ReasonTextSize {
		n = ReasonTextSize
		// Back off to the start of a rune so the text stays valid UTF-8.
		for n > 0 && !utf8.RuneStart(text[n]) {
			n--
		}
	}
	d.ReasonCode = code
	d.ReasonLen = uint8(copy(d.ReasonText[:], text[:n]))
	clear(d.ReasonText[n:])
}

// SetReasonBytes is SetReason for a text built in a byte buffer (a guest
// formats reasons without fmt and without allocating).
func (d *Decision) SetReasonBytes(code Reason, text []byte) {
	n := len(text)
	if n > ReasonTextSize {
		n = ReasonTextSize
		for n > 0 && !utf8.RuneStart(text[n]) {
			n--
		}
	}
	d.ReasonCode = code
	d.ReasonLen = uint8(copy(d.ReasonText[:], text[:n]))
	clear(d.ReasonText[n:])
}

// Reason returns the reason text (allocates one string; use ReasonBytes to
// avoid that).
func (d *Decision) Reason() string { return string(d.ReasonBytes()) }

// ReasonBytes returns the reason text as a slice of d.ReasonText (no copy).
func (d *Decision) ReasonBytes() []byte {
	return d.ReasonText[:min(int(d.ReasonLen), ReasonTextSize)]
}

// Byte offsets of the Decision fields (ABI 1.0); see layout.go.
const (
	offDMajor       = 0
	offDMinor       = 2
	offDSize        = 4
	offDTier        = 8
	offDSpecK       = 12
	offDWindow      = 16
	offDAnchors     = 20
	offDThreads     = 24
	offDCadence     = 28
	offDKVType      = 32
	offDReasonLen   = 33
	offDReasonCode  = 34
	offDReasonText  = 36  // [48]u8
	offDReserved    = 84  // 12 bytes, zero
	offDLayerBits   = 96  // [128]u8
	offDWindowScale = 224 // [128]f32
	// end = 736 = DecisionSize10

	// 1.1
	offDSpecPMin      = 736
	offDDraftThreads  = 740
	offDDraftCPUMask  = 744
	offDVerifyCPUMask = 752
	// end = 760 = DecisionSize11

	// 1.4
	offDRepackLayers = 760
	offDReserved2    = 764 // 4 bytes, zero
	// end = 768 = DecisionSize14

	// 1.6
	offDDraft = 768
	// end = 776 = DecisionSize16

	// 1.7 (in 1.6's reserved bytes)
	offDKVEvict = 772
)

// EncodeDecision writes d into dst[:DecisionSize] (every field of this
// package's version) with this package's version and size in the header. It
// fails only if dst is shorter than DecisionSize.
func EncodeDecision(dst []byte, d *Decision) error {
	if len(dst) < DecisionSize {
		return &Error{Kind: ErrShortBuffer, Struct: "Decision", Got: len(dst), Want: DecisionSize}
	}
	b := dst[:DecisionSize]
	putHeader(b, DecisionSize)
	le.PutUint32(b[offDTier:], uint32(d.Tier))
	le.PutUint32(b[offDSpecK:], uint32(d.SpecK))
	le.PutUint32(b[offDWindow:], uint32(d.Window))
	le.PutUint32(b[offDAnchors:], uint32(d.Anchors))
	le.PutUint32(b[offDThreads:], uint32(d.Threads))
	le.PutUint32(b[offDCadence:], uint32(d.CadenceSteps))
	b[offDKVType] = uint8(d.KVType)
	n := min(d.ReasonLen, ReasonTextSize)
	b[offDReasonLen] = n
	le.PutUint16(b[offDReasonCode:], uint16(d.ReasonCode))
	text := b[offDReasonText : offDReasonText+ReasonTextSize]
	copy(text, d.ReasonText[:n])
	clear(text[n:])
	clear(b[offDReserved:offDLayerBits])
	copy(b[offDLayerBits:offDLayerBits+MaxLayers], d.LayerBits[:])
	sc := b[offDWindowScale : offDWindowScale+4*MaxLayers]
	for i := range d.LayerWindowScale {
		putF32(sc[4*i:], d.LayerWindowScale[i])
	}
	// 1.1
	putF32(b[offDSpecPMin:], d.SpecPMin)
	le.PutUint32(b[offDDraftThreads:], uint32(d.DraftThreads))
	le.PutUint64(b[offDDraftCPUMask:], d.DraftCPUMask)
	le.PutUint64(b[offDVerifyCPUMask:], d.VerifyCPUMask)
	// 1.4
	le.PutUint32(b[offDRepackLayers:], uint32(d.RepackLayers))
	clear(b[offDReserved2:DecisionSize14])
	// 1.6
	le.PutUint32(b[offDDraft:], uint32(d.Draft))
	// 1.7
	le.PutUint32(b[offDKVEvict:], uint32(d.KVEvict))
	return nil
}

// EncodeDecisionSize writes the first size bytes of d's encoding into
// dst[:size], with this package's version and size in the header: the
// pre-filled decision a host gives a guest of an older minor (size from
// ExchangeSizes). size must be one of the DecisionSize1x sizes.
func EncodeDecisionSize(dst []byte, d *Decision, size int) error {
	switch size {
	case DecisionSize:
		return EncodeDecision(dst, d)
	case DecisionSize10, DecisionSize11, DecisionSize14:
	default:
		return &Error{Kind: ErrBadSize, Struct: "Decision", Got: size, Want: DecisionSize}
	}
	if len(dst) < size {
		return &Error{Kind: ErrShortBuffer, Struct: "Decision", Got: len(dst), Want: size}
	}
	var full [DecisionSize]byte
	_ = EncodeDecision(full[:], d) // cannot fail: full is DecisionSize long
	copy(dst[:size], full[:size])
	le.PutUint32(dst[offDSize:], uint32(size))
	return nil
}

// DecodeDecision reads an encoded Decision from src into d. Fields inside the
// size in the header are overwritten; fields beyond it (an older writer) keep
// d's values, so a host that pre-filled d keeps its own state for fields the
// guest does not know. Bytes beyond what this package knows are ignored.
// Reason text bytes past ReasonLen are zeroed. It fails on a short buffer,
// another major, or a size below DecisionSize10 (the 1.0 size).
func DecodeDecision(src []byte, d *Decision) error {
	n, err := checkHeader(src, "Decision", DecisionSize10, DecisionSize)
	if err != nil {
		return err
	}
	b := src[:n]
	d.Tier = int32(le.Uint32(b[offDTier:]))
	d.SpecK = int32(le.Uint32(b[offDSpecK:]))
	d.Window = int32(le.Uint32(b[offDWindow:]))
	d.Anchors = int32(le.Uint32(b[offDAnchors:]))
	d.Threads = int32(le.Uint32(b[offDThreads:]))
	d.CadenceSteps = int32(le.Uint32(b[offDCadence:]))
	d.KVType = KVType(b[offDKVType])
	rl := min(b[offDReasonLen], ReasonTextSize)
	d.ReasonLen = rl
	d.ReasonCode = Reason(le.Uint16(b[offDReasonCode:]))
	copy(d.ReasonText[:rl], b[offDReasonText:offDReasonText+int(rl)])
	clear(d.ReasonText[rl:])
	copy(d.LayerBits[:], b[offDLayerBits:offDLayerBits+MaxLayers])
	sc := b[offDWindowScale : offDWindowScale+4*MaxLayers]
	for i := range d.LayerWindowScale {
		d.LayerWindowScale[i] = getF32(sc[4*i:])
	}
	// A later minor's fields are read when the writer's struct holds all of
	// them; otherwise d keeps its own values (the host's pre-fill).
	if n >= DecisionSize11 {
		d.SpecPMin = getF32(b[offDSpecPMin:])
		d.DraftThreads = int32(le.Uint32(b[offDDraftThreads:]))
		d.DraftCPUMask = le.Uint64(b[offDDraftCPUMask:])
		d.VerifyCPUMask = le.Uint64(b[offDVerifyCPUMask:])
	}
	if n >= DecisionSize14 {
		d.RepackLayers = int32(le.Uint32(b[offDRepackLayers:]))
	}
	if n >= DecisionSize16 {
		d.Draft = int32(le.Uint32(b[offDDraft:]))
		d.KVEvict = int32(le.Uint32(b[offDKVEvict:])) // zero (leave) from a 1.6 writer
	}
	return nil
}
