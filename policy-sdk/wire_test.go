package sdk

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/edgellm/edgellm/abi"
)

// span is a run of wire bytes the wire codec copies in bulk into a Go struct
// at offset wire − shift.
type span struct{ from, to, shift int }

// TestWireLayout checks the wire codec's assumptions field by field against
// abi's layout table (the source of ABI.md) and the Go structs: every field
// with a Go name lies in a bulk span with the span's shift and the same
// size, or is one of the fields the codec handles one by one at the offset
// the codec uses; bools are normalised; and every Go field is in the table.
func TestWireLayout(t *testing.T) {
	for _, tc := range []struct {
		name   string
		typ    reflect.Type
		layout []abi.Field
		size   int
		spans  []span
		single map[string]int // wire name → offset the codec uses
		bools  map[string]int // wire name → offset the codec normalises
	}{
		{
			name: "Sensors", typ: reflect.TypeFor[abi.Sensors](), layout: abi.SensorsLayout(), size: abi.SensorsSize,
			spans: []span{{wsPrefix, wsPrefixEnd, 8}, {wsArrays, abi.SensorsSize, 12}},
			bools: map[string]int{"low_memory": wsLowMemory, "charging": wsCharging},
		},
		{
			name: "Decision", typ: reflect.TypeFor[abi.Decision](), layout: abi.DecisionLayout(), size: abi.DecisionSize,
			spans: []span{{wdScalars, wdScalarsEnd, 8}, {wdWindowScale, wdScaleEnd, 16}},
			single: map[string]int{
				"kv_type": wdKVType, "reason_len": wdReasonLen, "reason_code": wdReasonCode,
				"reason_text": wdReasonText, "layer_bits": wdLayerBits, "draft": wdDraft, "kv_evict": wdKVEvict,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			named := 0
			end := 0
			for _, f := range tc.layout {
				if f.Offset != end {
					t.Errorf("%s: wire offset %d, previous field ends at %d", f.Name, f.Offset, end)
				}
				end = f.Offset + f.Size
				if f.GoName == "" {
					// Header and reserved bytes: outside every span.
					for _, s := range tc.spans {
						if f.Offset < s.to && end > s.from {
							t.Errorf("%s [%d, %d) overlaps the bulk span [%d, %d)", f.Name, f.Offset, end, s.from, s.to)
						}
					}
					continue
				}
				named++
				sf, ok := tc.typ.FieldByName(f.GoName)
				if !ok {
					t.Errorf("%s: no Go field %s", f.Name, f.GoName)
					continue
				}
				if int(sf.Type.Size()) != f.Size {
					t.Errorf("%s: Go size %d, wire size %d", f.Name, sf.Type.Size(), f.Size)
				}
				if k := baseKind(sf.Type); k == reflect.Int || k == reflect.Uint || k == reflect.Uintptr || k == reflect.Pointer {
					t.Errorf("%s: Go kind %v has no fixed wire form", f.Name, k)
				}
				var in *span
				for i, s := range tc.spans {
					if f.Offset >= s.from && end <= s.to {
						in = &tc.spans[i]
					}
				}
				_, single := tc.single[f.Name]
				switch {
				case in != nil && single:
					t.Errorf("%s is both in a span and handled singly", f.Name)
				case in != nil:
					if int(sf.Offset) != f.Offset-in.shift {
						t.Errorf("%s: Go offset %d, want wire %d − %d", f.Name, sf.Offset, f.Offset, in.shift)
					}
				case single:
					if off := tc.single[f.Name]; off != f.Offset {
						t.Errorf("%s: the codec uses wire offset %d, the table says %d", f.Name, off, f.Offset)
					}
				default:
					t.Errorf("%s [%d, %d): neither in a bulk span nor handled singly", f.Name, f.Offset, end)
				}
				if sf.Type.Kind() == reflect.Bool {
					if off, ok := tc.bools[f.Name]; !ok || off != f.Offset {
						t.Errorf("bool %s at %d is not normalised by the codec (it normalises %v)", f.Name, f.Offset, tc.bools)
					}
				}
			}
			if end != tc.size {
				t.Errorf("layout ends at %d, want %d", end, tc.size)
			}
			if named != tc.typ.NumField() {
				t.Errorf("the table names %d Go fields, %s has %d", named, tc.typ, tc.typ.NumField())
			}
		})
	}
}

func baseKind(t reflect.Type) reflect.Kind {
	for t.Kind() == reflect.Array {
		t = t.Elem()
	}
	return t.Kind()
}

// validWire returns n random bytes under a valid 1.0 header of size n, with
// a few zero and one bytes (readings that are often special on the wire).
func validWire(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	for range r.IntN(8) {
		b[r.IntN(n)] = byte(r.IntN(2))
	}
	b[0], b[1], b[2], b[3] = abi.VersionMajor, 0, abi.VersionMinor, 0
	b[4], b[5], b[6], b[7] = byte(n), byte(n>>8), 0, 0
	return b
}

// randomWire is validWire most of the time, and otherwise a broken header,
// size or length (or a newer minor, which both codecs accept).
func randomWire(r *rand.Rand, n int) []byte {
	b := validWire(r, n)
	switch r.IntN(16) {
	case 0:
		b[0] = byte(2 + r.IntN(10)) // another major
	case 1:
		b[4]-- // size below the base
	case 2:
		b[4]++ // size beyond the buffer
	case 3:
		b = b[:r.IntN(n)] // short buffer
	case 4:
		b[2] = 1 // a newer minor of the base size
	case 5:
		b = append(b, make([]byte, 64)...) // a longer buffer than the header says
	}
	return b
}

// randomSensors returns Sensors with random values in every field.
func randomSensors(r *rand.Rand) abi.Sensors {
	var s abi.Sensors
	if err := abi.DecodeSensors(validWire(r, abi.SensorsSize), &s); err != nil {
		panic(err)
	}
	return s
}

// randomDecision returns a Decision with random values in every field,
// including a ReasonLen past ReasonTextSize and text past ReasonLen.
func randomDecision(r *rand.Rand) abi.Decision {
	var d abi.Decision
	if err := abi.DecodeDecision(validWire(r, abi.DecisionSize), &d); err != nil {
		panic(err)
	}
	d.ReasonLen = uint8(r.Uint32())
	for i := range d.ReasonText {
		d.ReasonText[i] = byte(r.Uint32())
	}
	return d
}

func sensorsBytes(s *abi.Sensors) []byte {
	b := make([]byte, abi.SensorsSize)
	if err := abi.EncodeSensors(b, s); err != nil {
		panic(err)
	}
	return b
}

// compareWireDecode decodes src with both codecs into structs that start
// from the same garbage and fails unless they agree exactly (bit for bit:
// random floats include NaNs).
func compareWireDecode(t *testing.T, r *rand.Rand, sensors bool, src []byte) {
	t.Helper()
	if sensors {
		a := randomSensors(r)
		w := a
		ea, ew := abi.DecodeSensors(src, &a), wireDecodeSensors(src, &w)
		if !sameErr(ea, ew) {
			t.Fatalf("Sensors %x…: abi error %v, wire error %v", src[:min(len(src), 8)], ea, ew)
		}
		if ba, bw := sensorsBytes(&a), sensorsBytes(&w); !bytes.Equal(ba, bw) || a.LowMemory != w.LowMemory || a.Charging != w.Charging {
			t.Fatalf("Sensors differ from wire offset %d (bools abi %v %v, wire %v %v)",
				firstDiff(ba, bw), a.LowMemory, a.Charging, w.LowMemory, w.Charging)
		}
		return
	}
	a := randomDecision(r)
	w := a
	ea, ew := abi.DecodeDecision(src, &a), wireDecodeDecision(src, &w)
	if !sameErr(ea, ew) {
		t.Fatalf("Decision %x…: abi error %v, wire error %v", src[:min(len(src), 8)], ea, ew)
	}
	if !sameDecision(&a, &w) {
		t.Fatalf("Decision differs\nabi  %v %d %x\nwire %v %d %x", a.Tier, a.ReasonLen, a.ReasonText, w.Tier, w.ReasonLen, w.ReasonText)
	}
}

// firstDiff returns the first offset where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

func sameErr(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Error() == b.Error()
}

// sameDecision compares every field of two Decisions, floats by bits: the
// encoding covers all but the reason text past ReasonLen, compared apart.
func sameDecision(a, b *abi.Decision) bool {
	ea, eb := make([]byte, abi.DecisionSize), make([]byte, abi.DecisionSize)
	_ = abi.EncodeDecision(ea, a)
	_ = abi.EncodeDecision(eb, b)
	return bytes.Equal(ea, eb) && a.ReasonLen == b.ReasonLen && a.ReasonText == b.ReasonText
}

// TestWireMatchesABI: on random buffers (valid and broken headers, NaN
// floats, non-0/1 bools, reason lengths past 48) the wire codec decodes and
// encodes exactly what the abi codec does.
func TestWireMatchesABI(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		compareWireDecode(t, r, true, randomWire(r, abi.SensorsSize))
		compareWireDecode(t, r, false, randomWire(r, abi.DecisionSize))
		// An older host's prefixes (1.3: no repack fields) take the abi
		// codec's path: the 1.4 Sensors fields zero, the Decision's pre-fill kept.
		compareWireDecode(t, r, true, validWire(r, abi.SensorsSize13))
		compareWireDecode(t, r, false, validWire(r, abi.DecisionSize11))

		d := randomDecision(r)
		n := abi.DecisionSize
		if i%16 == 0 {
			n = r.IntN(abi.DecisionSize) // short buffer
		}
		ba, bw := make([]byte, n), make([]byte, n)
		for j := range ba {
			ba[j] = byte(r.Uint32())
			bw[j] = ba[j]
		}
		ea, ew := abi.EncodeDecision(ba, &d), wireEncodeDecision(bw, &d)
		if !sameErr(ea, ew) || !bytes.Equal(ba, bw) {
			t.Fatalf("EncodeDecision differs (errors %v, %v) from offset %d", ea, ew, firstDiff(ba, bw))
		}
	}
}

// FuzzWireDecode: any bytes decode identically with both codecs.
func FuzzWireDecode(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 8 {
		f.Add(randomWire(r, abi.SensorsSize), randomWire(r, abi.DecisionSize))
	}
	f.Fuzz(func(t *testing.T, sensors, decision []byte) {
		r := rand.New(rand.NewPCG(uint64(len(sensors)), uint64(len(decision))))
		compareWireDecode(t, r, true, sensors)
		compareWireDecode(t, r, false, decision)
	})
}
