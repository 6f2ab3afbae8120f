//go:build 386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm

package sdk

import (
	"encoding/binary"
	"unsafe"

	"github.com/edgellm/edgellm/abi"
)

// The wire codec: a bulk-copy equivalent of abi.DecodeSensors,
// abi.DecodeDecision and abi.EncodeDecision for little-endian targets, where
// an encoded number has the same bytes as the Go value in memory. The guest
// uses it on wasip1 (see Call): with the host's deadline on, wazero checks
// for termination at every loop back-edge, and the field-by-field abi codec
// runs four 128-iteration loops per call; this one runs a few memory.copy
// instructions and field moves, with no loop. The abi package stays free of unsafe.
//
// Each bulk copy covers a span whose fields appear in the same order with
// the same sizes in the wire struct and the Go struct, shifted by a constant:
//
//	Sensors  wire [8, 121)    present … cur_kv_type         Go offset = wire − 8
//	Sensors  wire [128, 1304) layer_latency_us … kv_evict   Go offset = wire − 12
//	Decision wire [8, 32)     tier … cadence_steps          Go offset = wire − 8
//	Decision wire [96, 224)   layer_bits
//	Decision wire [224, 764)  layer_window_scale … repack_layers   Go offset = wire − 16
//
// Every field that later minors appended (1.1–1.7) lies in the last span of
// each struct, at naturally aligned offsets, so the spans stay contiguous,
// except the Decision's: its last span ends before 1.4's 4 reserved bytes
// [764, 768), which the encoder writes as zero and the decoder ignores, and
// 1.6's draft (wire 768) and 1.7's kv_evict (wire 772, in the 4 bytes 1.6
// reserved) are moved as single fields.
//
// wire_test.go checks every field of both structs against abi's layout table
// (offset, size) and the Go struct (reflect offsets), and that the result
// equals abi's codec on random input. The compile-time checks below make a
// guest build fail if the span ends move.

// Wire offsets of the spans and single fields the codec touches (ABI 1.7).
const (
	wsPrefix      = 8   // present
	wsPrefixEnd   = 121 // end of cur_kv_type
	wsLowMemory   = 44  // bool on the wire: any nonzero byte is true
	wsCharging    = 47  // bool on the wire
	wsArrays      = 128 // layer_latency_us, cur_layer_bits and the 1.1–1.7 fields up to SensorsSize
	wdScalars     = 8   // tier … cadence_steps, six i32
	wdScalarsEnd  = 32
	wdKVType      = 32
	wdReasonLen   = 33
	wdReasonCode  = 34
	wdReasonText  = 36
	wdLayerBits   = 96
	wdWindowScale = 224
	wdScaleEnd    = 764 // end of repack_layers; 4 reserved bytes follow
	wdDraft       = 768 // draft (1.6)
	wdKVEvict     = 772 // kv_evict (1.7), up to DecisionSize
)

// Compile-time span checks: an index into [1]struct{} must be the constant 0,
// and a negative uintptr constant does not compile, so each expression below
// fails the build unless it is exactly zero.
var (
	_ = [1]struct{}{}[unsafe.Offsetof(abi.Sensors{}.Present)+wsPrefix-wsPrefix]
	_ = [1]struct{}{}[unsafe.Offsetof(abi.Sensors{}.CurKVType)+1+wsPrefix-wsPrefixEnd]
	_ = [1]struct{}{}[unsafe.Offsetof(abi.Sensors{}.LayerLatencyUS)+12-wsArrays]
	_ = [1]struct{}{}[unsafe.Offsetof(abi.Sensors{}.KVEvict)+4+12-abi.SensorsSize]
	_ = [1]struct{}{}[unsafe.Offsetof(abi.Decision{}.LayerWindowScale)+16-wdWindowScale]
	_ = [1]struct{}{}[unsafe.Offsetof(abi.Decision{}.RepackLayers)+4+16-wdScaleEnd]
	_ = [1]struct{}{}[wdDraft-4-wdScaleEnd]
	_ = [1]struct{}{}[wdKVEvict-4-wdDraft]
	_ = [1]struct{}{}[abi.DecisionSize-4-wdKVEvict]
	_ = [1]struct{}{}[unsafe.Offsetof(abi.Decision{}.Tier)+wdScalars-wdScalars]
	_ = [1]struct{}{}[unsafe.Offsetof(abi.Decision{}.CadenceSteps)+4+wdScalars-wdScalarsEnd]
)

var le = binary.LittleEndian

// The spans as fixed-size arrays: assigning one compiles to a Wasm
// memory.copy, inline or in runtime.memmove (a leaf without a loop header),
// with no length checks. (unsafe.Slice with a run-time length calls
// math.MulUintptr, a function with a loop header: one termination check more
// per use.)
type (
	sensorsPrefix [wsPrefixEnd - wsPrefix]byte
	sensorsArrays [abi.SensorsSize - wsArrays]byte
	decScalars    [wdScalarsEnd - wdScalars]byte
	decScale      [wdScaleEnd - wdWindowScale]byte
)

// at returns a pointer to the byte at offset off of the value at p (a
// struct without pointers); the caller casts it to a span type that lies
// inside that value.
func at[T any](p *T, off uintptr) unsafe.Pointer { return unsafe.Add(unsafe.Pointer(p), off) }

// headerIs reports whether b starts with a header of this package's major
// and exactly the given size, and holds that many bytes: the only case the
// fast paths handle. Anything else (a short buffer, another major or size)
// goes to the abi codec, which decodes it or says what is wrong.
func headerIs(b []byte, size int) bool {
	return len(b) >= size && le.Uint16(b) == abi.VersionMajor && le.Uint32(b[4:]) == uint32(size)
}

// wireDecodeSensors is abi.DecodeSensors by bulk copy.
func wireDecodeSensors(src []byte, s *abi.Sensors) error {
	if !headerIs(src, abi.SensorsSize) {
		return abi.DecodeSensors(src, s)
	}
	w := (*[abi.SensorsSize]byte)(src)
	// present … cur_kv_type, then the two per-layer arrays.
	*(*sensorsPrefix)(at(s, unsafe.Offsetof(s.Present))) = sensorsPrefix(w[wsPrefix:wsPrefixEnd])
	*(*sensorsArrays)(at(s, unsafe.Offsetof(s.LayerLatencyUS))) = sensorsArrays(w[wsArrays:])
	// A Go bool must hold 0 or 1; the wire says nonzero is true.
	s.LowMemory = w[wsLowMemory] != 0
	s.Charging = w[wsCharging] != 0
	return nil
}

// wireDecodeDecision is abi.DecodeDecision by bulk copy.
func wireDecodeDecision(src []byte, d *abi.Decision) error {
	if !headerIs(src, abi.DecisionSize) {
		return abi.DecodeDecision(src, d)
	}
	w := (*[abi.DecisionSize]byte)(src)
	*(*decScalars)(at(d, unsafe.Offsetof(d.Tier))) = decScalars(w[wdScalars:wdScalarsEnd])
	d.KVType = abi.KVType(w[wdKVType])
	n := min(w[wdReasonLen], abi.ReasonTextSize)
	d.ReasonLen = n
	d.ReasonCode = abi.Reason(le.Uint16(w[wdReasonCode:]))
	d.ReasonText = [abi.ReasonTextSize]byte(w[wdReasonText:])
	clear(d.ReasonText[n:]) // the text is valid up to n only
	d.LayerBits = [abi.MaxLayers]byte(w[wdLayerBits:wdWindowScale])
	*(*decScale)(at(d, unsafe.Offsetof(d.LayerWindowScale))) = decScale(w[wdWindowScale:wdScaleEnd])
	d.Draft = int32(le.Uint32(w[wdDraft:]))
	d.KVEvict = int32(le.Uint32(w[wdKVEvict:]))
	return nil
}

// wireEncodeDecision is abi.EncodeDecision by bulk copy.
func wireEncodeDecision(dst []byte, d *abi.Decision) error {
	if len(dst) < abi.DecisionSize {
		return abi.EncodeDecision(dst, d) // the short-buffer error
	}
	w := (*[abi.DecisionSize]byte)(dst)
	le.PutUint16(w[0:], abi.VersionMajor)
	le.PutUint16(w[2:], abi.VersionMinor)
	le.PutUint32(w[4:], abi.DecisionSize)
	*(*decScalars)(w[wdScalars:wdScalarsEnd]) = *(*decScalars)(at(d, unsafe.Offsetof(d.Tier)))
	w[wdKVType] = uint8(d.KVType)
	n := min(d.ReasonLen, abi.ReasonTextSize)
	w[wdReasonLen] = n
	le.PutUint16(w[wdReasonCode:], uint16(d.ReasonCode))
	*(*[abi.ReasonTextSize]byte)(w[wdReasonText:]) = d.ReasonText
	clear(w[wdReasonText+int(n) : wdLayerBits]) // text padding and the reserved bytes
	*(*[abi.MaxLayers]byte)(w[wdLayerBits:wdWindowScale]) = d.LayerBits
	*(*decScale)(w[wdWindowScale:wdScaleEnd]) = *(*decScale)(at(d, unsafe.Offsetof(d.LayerWindowScale)))
	*(*[wdDraft - wdScaleEnd]byte)(w[wdScaleEnd:]) = [wdDraft - wdScaleEnd]byte{} // reserved
	le.PutUint32(w[wdDraft:], uint32(d.Draft))
	le.PutUint32(w[wdKVEvict:], uint32(d.KVEvict))
	return nil
}
