package abi

import "strconv"

// The ABI version this package implements. A host refuses a guest whose major
// differs; minors only append fields (see ABI.md, "Versioning").
const (
	VersionMajor = 1
	VersionMinor = 7
)

// Version is an ABI version as exported by a guest and carried in every
// struct header.
type Version struct {
	Major uint16
	Minor uint16
}

// Current is the version this package implements.
func Current() Version { return Version{Major: VersionMajor, Minor: VersionMinor} }

// String formats v as "major.minor".
func (v Version) String() string {
	return strconv.Itoa(int(v.Major)) + "." + strconv.Itoa(int(v.Minor))
}

// Compatible reports whether a peer speaking v can exchange structs with this
// package: same major, any minor.
func (v Version) Compatible() bool { return v.Major == VersionMajor }

// Encoded sizes in bytes of the structs, header included, by the minor that
// introduced them. Minors only append, so each size is a prefix of the next.
// SensorsSize and DecisionSize are this package's (the newest); a peer of an
// older minor reads and writes a shorter prefix (SensorsSizeFor,
// DecisionSizeFor), and the 1.0 sizes are the smallest a reader accepts.
const (
	SensorsSize10  = 768  // 1.0: device readings, telemetry, current state
	SensorsSize11  = 848  // 1.1: speculative decoding statistics and costs
	SensorsSize12  = 1236 // 1.2: the precision manifest, a throughput target
	SensorsSize13  = 1256 // 1.3: CPU contention
	SensorsSize14  = 1272 // 1.4: repacked weights
	SensorsSize15  = 1284 // 1.5: CPU use over a span
	SensorsSize16  = 1300 // 1.6: latency batch and position, draft state
	SensorsSize17  = 1304 // 1.7: KV eviction mode
	DecisionSize10 = 736  // 1.0
	DecisionSize11 = 760  // 1.1: draft p_min, draft threads, CPU masks (1.2, 1.3: unchanged)
	DecisionSize14 = 768  // 1.4: repacked layers (1.5: unchanged)
	DecisionSize16 = 776  // 1.6: draft attach/detach, 4 reserved bytes (1.7: kv_evict in them)

	SensorsSize  = SensorsSize17
	DecisionSize = DecisionSize16
)

// HeaderSize is the size of the header that starts both structs:
// u16 major, u16 minor, u32 size.
const HeaderSize = 8

// MaxLayers is the number of per-layer slots in both structs. Layers beyond
// MaxLayers cannot be addressed individually in ABI 1.
const MaxLayers = 128

// ReasonTextSize is the capacity of Decision.ReasonText in bytes.
const ReasonTextSize = 48

// MaxSpecK is the largest speculation length K: engines accept K ≤ MaxSpecK,
// Sensors.SpecAcceptByPos has one slot per draft position and
// Sensors.SpecVerifyCost one per verify batch size 1..MaxSpecK+1.
const MaxSpecK = 8

// SensorsSizeFor returns the encoded Sensors size that a peer of version v
// reads and writes, or an *Error if v has another major or is a minor newer
// than this package (whose size this package cannot know; such a peer still
// accepts the SensorsSize prefix, see ABI.md).
func SensorsSizeFor(v Version) (int, error) {
	if v.Major != VersionMajor {
		return 0, &Error{Kind: ErrMajorVersion, Struct: "Sensors", Got: int(v.Major), Want: VersionMajor}
	}
	switch v.Minor {
	case 0:
		return SensorsSize10, nil
	case 1:
		return SensorsSize11, nil
	case 2:
		return SensorsSize12, nil
	case 3:
		return SensorsSize13, nil
	case 4:
		return SensorsSize14, nil
	case 5:
		return SensorsSize15, nil
	case 6:
		return SensorsSize16, nil
	case 7:
		return SensorsSize17, nil
	}
	return 0, &Error{Kind: ErrMinorVersion, Struct: "Sensors", Got: int(v.Minor), Want: VersionMinor}
}

// DecisionSizeFor is SensorsSizeFor for the Decision struct.
func DecisionSizeFor(v Version) (int, error) {
	if v.Major != VersionMajor {
		return 0, &Error{Kind: ErrMajorVersion, Struct: "Decision", Got: int(v.Major), Want: VersionMajor}
	}
	switch v.Minor {
	case 0:
		return DecisionSize10, nil
	case 1, 2, 3:
		return DecisionSize11, nil
	case 4, 5:
		return DecisionSize14, nil
	case 6, 7:
		return DecisionSize16, nil
	}
	return 0, &Error{Kind: ErrMinorVersion, Struct: "Decision", Got: int(v.Minor), Want: VersionMinor}
}

// ExchangeSizes returns the Sensors and Decision sizes a host of this
// package exchanges with a peer speaking v: the smaller of the two versions'
// sizes. A peer newer than this package gets this package's sizes (it reads
// the newer fields as absent or untouched); a peer of another major is an
// *Error.
func ExchangeSizes(v Version) (sensors, decision int, err error) {
	if v.Major != VersionMajor {
		return 0, 0, &Error{Kind: ErrMajorVersion, Struct: "Sensors", Got: int(v.Major), Want: VersionMajor}
	}
	if v.Minor > VersionMinor {
		return SensorsSize, DecisionSize, nil
	}
	sensors, _ = SensorsSizeFor(v)
	decision, _ = DecisionSizeFor(v)
	return sensors, decision, nil
}

// Header is the 8-byte prefix of an encoded Sensors or Decision.
type Header struct {
	Version Version
	// Size is the number of bytes of the struct as its writer encoded it,
	// header included.
	Size uint32
}

// ReadHeader reads the header at the start of src without validating it
// against this package's version. It fails only when src is shorter than
// HeaderSize.
func ReadHeader(src []byte) (Header, error) {
	if len(src) < HeaderSize {
		return Header{}, &Error{Kind: ErrShortBuffer, Struct: "header", Got: len(src), Want: HeaderSize}
	}
	return Header{
		Version: Version{Major: le.Uint16(src[0:]), Minor: le.Uint16(src[2:])},
		Size:    le.Uint32(src[4:]),
	}, nil
}

// checkHeader validates the header of an encoded struct whose base (minor 0)
// size is base and returns the number of bytes this package should read:
// min(header size, known).
func checkHeader(src []byte, name string, base, known int) (int, error) {
	h, err := ReadHeader(src)
	if err != nil {
		err.(*Error).Struct = name
		return 0, err
	}
	if h.Version.Major != VersionMajor {
		return 0, &Error{Kind: ErrMajorVersion, Struct: name, Got: int(h.Version.Major), Want: VersionMajor}
	}
	if h.Size < uint32(base) || h.Size > 1<<20 {
		return 0, &Error{Kind: ErrBadSize, Struct: name, Got: int(h.Size), Want: base}
	}
	if int(h.Size) > len(src) {
		return 0, &Error{Kind: ErrShortBuffer, Struct: name, Got: len(src), Want: int(h.Size)}
	}
	return min(int(h.Size), known), nil
}

func putHeader(dst []byte, size int) {
	le.PutUint16(dst[0:], VersionMajor)
	le.PutUint16(dst[2:], VersionMinor)
	le.PutUint32(dst[4:], uint32(size))
}
