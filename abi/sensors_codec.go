package abi

// The wire encoding of Sensors: field offsets, encode and decode.

import (
	"encoding/binary"
	"math"
)

var le = binary.LittleEndian

// Byte offsets of the Sensors fields (ABI 1.0). layout.go lists them for
// ABI.md; layout_test.go checks both against the encoder.
const (
	offSMajor          = 0
	offSMinor          = 2
	offSSize           = 4
	offSPresent        = 8
	offSStep           = 16
	offSTimeNS         = 24
	offSMemAvailable   = 32
	offSMemThreshold   = 36
	offSMemTotal       = 40
	offSLowMemory      = 44
	offSTrimLevel      = 45
	offSThermalStatus  = 46
	offSCharging       = 47
	offSPSISome        = 48
	offSPSIFull        = 52
	offSCgroupLimit    = 56
	offSCgroupUsage    = 60
	offSRSS            = 64
	offSPSS            = 68
	offSTempC          = 72
	offSBatteryPct     = 76
	offSTokPerSec      = 80
	offSTokPerSecSmoot = 84
	offSAcceptRate     = 88
	offSCtxLen         = 92
	offSTiers          = 96
	offSLayerCount     = 100
	offSCurTier        = 104
	offSCurSpecK       = 108
	offSCurWindow      = 112
	offSCurAnchors     = 116
	offSCurKVType      = 120
	offSReserved       = 121 // 7 bytes, zero
	offSLayerLatency   = 128 // [128]f32
	offSCurLayerBits   = 640 // [128]u8
	// end = 768 = SensorsSize10

	// 1.1
	offSSpecAcceptByPos  = 768 // [8]f32
	offSSpecMeanAccepted = 800
	offSSpecDraftCost    = 804
	offSSpecVerifyCost   = 808 // [9]f32
	offSSpecKMax         = 844
	// end = 848 = SensorsSize11

	// 1.2
	offSLayerMinBits    = 848  // [128]u8
	offSLayerMaxBits    = 976  // [128]u8
	offSLayerSensRank   = 1104 // [128]u8
	offSTokPerSecTarget = 1232
	// end = 1236 = SensorsSize12

	// 1.3
	offSCPUPSISome    = 1236
	offSCPURunnable   = 1240
	offSCPUAllowed    = 1244
	offSStepTimeRatio = 1248
	offSCurThreads    = 1252
	// end = 1256 = SensorsSize13

	// 1.4
	offSRepackLayers    = 1256
	offSRepackLayersMax = 1260
	offSRepackMB        = 1264
	offSRepackMBMax     = 1268
	// end = 1272 = SensorsSize14

	// 1.5
	offSCPUOtherBusy     = 1272
	offSCPUPSISomeRecent = 1276
	offSCPUSpanMS        = 1280
	// end = 1284 = SensorsSize15

	// 1.6
	offSLayerLatencyBatch = 1284
	offSLayerLatencyPos   = 1288
	offSDraftState        = 1292
	offSDraftMB           = 1296
	// end = 1300 = SensorsSize16

	// 1.7
	offSKVEvict = 1300
	// end = 1304 = SensorsSize17
)

// EncodeSensors writes s into dst[:SensorsSize] (every field of this
// package's version) with this package's version and size in the header. It
// fails only if dst is shorter than SensorsSize.
func EncodeSensors(dst []byte, s *Sensors) error {
	if len(dst) < SensorsSize {
		return &Error{Kind: ErrShortBuffer, Struct: "Sensors", Got: len(dst), Want: SensorsSize}
	}
	b := dst[:SensorsSize]
	putHeader(b, SensorsSize)
	le.PutUint64(b[offSPresent:], uint64(s.Present))
	le.PutUint64(b[offSStep:], s.Step)
	le.PutUint64(b[offSTimeNS:], uint64(s.TimeNS))
	le.PutUint32(b[offSMemAvailable:], uint32(s.MemAvailableMB))
	le.PutUint32(b[offSMemThreshold:], uint32(s.MemThresholdMB))
	le.PutUint32(b[offSMemTotal:], uint32(s.MemTotalMB))
	b[offSLowMemory] = b2u(s.LowMemory)
	b[offSTrimLevel] = uint8(s.TrimLevel)
	b[offSThermalStatus] = uint8(s.ThermalStatus)
	b[offSCharging] = b2u(s.Charging)
	putF32(b[offSPSISome:], s.PSISomeAvg10)
	putF32(b[offSPSIFull:], s.PSIFullAvg10)
	le.PutUint32(b[offSCgroupLimit:], uint32(s.CgroupLimitMB))
	le.PutUint32(b[offSCgroupUsage:], uint32(s.CgroupUsageMB))
	le.PutUint32(b[offSRSS:], uint32(s.RSSMB))
	le.PutUint32(b[offSPSS:], uint32(s.PSSMB))
	putF32(b[offSTempC:], s.TempC)
	putF32(b[offSBatteryPct:], s.BatteryPct)
	putF32(b[offSTokPerSec:], s.TokPerSec)
	putF32(b[offSTokPerSecSmoot:], s.TokPerSecSmoothed)
	putF32(b[offSAcceptRate:], s.AcceptRate)
	le.PutUint32(b[offSCtxLen:], uint32(s.CtxLen))
	le.PutUint32(b[offSTiers:], uint32(s.TiersAvailable))
	le.PutUint32(b[offSLayerCount:], uint32(s.LayerCount))
	le.PutUint32(b[offSCurTier:], uint32(s.CurTier))
	le.PutUint32(b[offSCurSpecK:], uint32(s.CurSpecK))
	le.PutUint32(b[offSCurWindow:], uint32(s.CurWindow))
	le.PutUint32(b[offSCurAnchors:], uint32(s.CurAnchors))
	b[offSCurKVType] = uint8(s.CurKVType)
	clear(b[offSReserved:offSLayerLatency])
	lat := b[offSLayerLatency : offSLayerLatency+4*MaxLayers]
	for i := range s.LayerLatencyUS {
		putF32(lat[4*i:], s.LayerLatencyUS[i])
	}
	copy(b[offSCurLayerBits:offSCurLayerBits+MaxLayers], s.CurLayerBits[:])
	// 1.1
	for i, v := range s.SpecAcceptByPos {
		putF32(b[offSSpecAcceptByPos+4*i:], v)
	}
	putF32(b[offSSpecMeanAccepted:], s.SpecMeanAccepted)
	putF32(b[offSSpecDraftCost:], s.SpecDraftCost)
	for i, v := range s.SpecVerifyCost {
		putF32(b[offSSpecVerifyCost+4*i:], v)
	}
	le.PutUint32(b[offSSpecKMax:], uint32(s.SpecKMax))
	// 1.2
	copy(b[offSLayerMinBits:offSLayerMinBits+MaxLayers], s.LayerMinBits[:])
	copy(b[offSLayerMaxBits:offSLayerMaxBits+MaxLayers], s.LayerMaxBits[:])
	copy(b[offSLayerSensRank:offSLayerSensRank+MaxLayers], s.LayerSensRank[:])
	putF32(b[offSTokPerSecTarget:], s.TokPerSecTarget)
	// 1.3
	putF32(b[offSCPUPSISome:], s.CPUPSISomeAvg10)
	putF32(b[offSCPURunnable:], s.CPURunnable)
	le.PutUint32(b[offSCPUAllowed:], uint32(s.CPUAllowed))
	putF32(b[offSStepTimeRatio:], s.StepTimeRatio)
	le.PutUint32(b[offSCurThreads:], uint32(s.CurThreads))
	// 1.4
	le.PutUint32(b[offSRepackLayers:], uint32(s.RepackLayers))
	le.PutUint32(b[offSRepackLayersMax:], uint32(s.RepackLayersMax))
	le.PutUint32(b[offSRepackMB:], uint32(s.RepackMB))
	le.PutUint32(b[offSRepackMBMax:], uint32(s.RepackMBMax))
	// 1.5
	putF32(b[offSCPUOtherBusy:], s.CPUOtherBusy)
	putF32(b[offSCPUPSISomeRecent:], s.CPUPSISomeRecent)
	putF32(b[offSCPUSpanMS:], s.CPUSpanMS)
	// 1.6
	le.PutUint32(b[offSLayerLatencyBatch:], uint32(s.LayerLatencyBatch))
	le.PutUint32(b[offSLayerLatencyPos:], uint32(s.LayerLatencyPos))
	le.PutUint32(b[offSDraftState:], uint32(s.DraftState))
	putF32(b[offSDraftMB:], s.DraftMB)
	// 1.7
	le.PutUint32(b[offSKVEvict:], uint32(s.KVEvict))
	return nil
}

// EncodeSensorsSize writes the first size bytes of s's encoding into
// dst[:size], with this package's version and size in the header: what a
// host sends a guest of an older minor (size from ExchangeSizes). The
// presence bits of fields past size are cleared. size must be one of the
// SensorsSize1x sizes.
func EncodeSensorsSize(dst []byte, s *Sensors, size int) error {
	var mask Presence
	switch size {
	case SensorsSize:
		return EncodeSensors(dst, s)
	case SensorsSize10:
		mask = presence11 | presence12 | presence13 | presence14 | presence15 | presence16 | presence17
	case SensorsSize11:
		mask = presence12 | presence13 | presence14 | presence15 | presence16 | presence17
	case SensorsSize12:
		mask = presence13 | presence14 | presence15 | presence16 | presence17
	case SensorsSize13:
		mask = presence14 | presence15 | presence16 | presence17
	case SensorsSize14:
		mask = presence15 | presence16 | presence17
	case SensorsSize15:
		mask = presence16 | presence17
	case SensorsSize16:
		mask = presence17
	default:
		return &Error{Kind: ErrBadSize, Struct: "Sensors", Got: size, Want: SensorsSize}
	}
	if len(dst) < size {
		return &Error{Kind: ErrShortBuffer, Struct: "Sensors", Got: len(dst), Want: size}
	}
	var full [SensorsSize]byte
	_ = EncodeSensors(full[:], s) // cannot fail: full is SensorsSize long
	copy(dst[:size], full[:size])
	le.PutUint32(dst[offSSize:], uint32(size))
	le.PutUint64(dst[offSPresent:], uint64(s.Present&^mask))
	return nil
}

// DecodeSensors reads an encoded Sensors from src into s, overwriting every
// field. It accepts any minor of major 1: fields beyond the size in the header
// (an older writer) are zeroed and their presence bits cleared; bytes beyond
// what this package knows (a newer writer) are ignored. It fails on a short
// buffer, another major, or a size below SensorsSize10 (the 1.0 size).
func DecodeSensors(src []byte, s *Sensors) error {
	n, err := checkHeader(src, "Sensors", SensorsSize10, SensorsSize)
	if err != nil {
		return err
	}
	b := src[:n]
	s.Present = Presence(le.Uint64(b[offSPresent:]))
	s.Step = le.Uint64(b[offSStep:])
	s.TimeNS = int64(le.Uint64(b[offSTimeNS:]))
	s.MemAvailableMB = int32(le.Uint32(b[offSMemAvailable:]))
	s.MemThresholdMB = int32(le.Uint32(b[offSMemThreshold:]))
	s.MemTotalMB = int32(le.Uint32(b[offSMemTotal:]))
	s.LowMemory = b[offSLowMemory] != 0
	s.TrimLevel = TrimLevel(b[offSTrimLevel])
	s.ThermalStatus = ThermalStatus(b[offSThermalStatus])
	s.Charging = b[offSCharging] != 0
	s.PSISomeAvg10 = getF32(b[offSPSISome:])
	s.PSIFullAvg10 = getF32(b[offSPSIFull:])
	s.CgroupLimitMB = int32(le.Uint32(b[offSCgroupLimit:]))
	s.CgroupUsageMB = int32(le.Uint32(b[offSCgroupUsage:]))
	s.RSSMB = int32(le.Uint32(b[offSRSS:]))
	s.PSSMB = int32(le.Uint32(b[offSPSS:]))
	s.TempC = getF32(b[offSTempC:])
	s.BatteryPct = getF32(b[offSBatteryPct:])
	s.TokPerSec = getF32(b[offSTokPerSec:])
	s.TokPerSecSmoothed = getF32(b[offSTokPerSecSmoot:])
	s.AcceptRate = getF32(b[offSAcceptRate:])
	s.CtxLen = int32(le.Uint32(b[offSCtxLen:]))
	s.TiersAvailable = int32(le.Uint32(b[offSTiers:]))
	s.LayerCount = int32(le.Uint32(b[offSLayerCount:]))
	s.CurTier = int32(le.Uint32(b[offSCurTier:]))
	s.CurSpecK = int32(le.Uint32(b[offSCurSpecK:]))
	s.CurWindow = int32(le.Uint32(b[offSCurWindow:]))
	s.CurAnchors = int32(le.Uint32(b[offSCurAnchors:]))
	s.CurKVType = KVType(b[offSCurKVType])
	lat := b[offSLayerLatency : offSLayerLatency+4*MaxLayers]
	for i := range s.LayerLatencyUS {
		s.LayerLatencyUS[i] = getF32(lat[4*i:])
	}
	copy(s.CurLayerBits[:], b[offSCurLayerBits:offSCurLayerBits+MaxLayers])
	// Minor 0 is the base: every field above is inside n. A later minor's
	// fields are read when the writer's struct holds all of them; otherwise
	// they are zero and their presence bits clear.
	if n >= SensorsSize11 {
		for i := range s.SpecAcceptByPos {
			s.SpecAcceptByPos[i] = getF32(b[offSSpecAcceptByPos+4*i:])
		}
		s.SpecMeanAccepted = getF32(b[offSSpecMeanAccepted:])
		s.SpecDraftCost = getF32(b[offSSpecDraftCost:])
		for i := range s.SpecVerifyCost {
			s.SpecVerifyCost[i] = getF32(b[offSSpecVerifyCost+4*i:])
		}
		s.SpecKMax = int32(le.Uint32(b[offSSpecKMax:]))
	} else {
		s.SpecAcceptByPos, s.SpecMeanAccepted, s.SpecDraftCost = [MaxSpecK]float32{}, 0, 0
		s.SpecVerifyCost, s.SpecKMax = [MaxSpecK + 1]float32{}, 0
		s.Present &^= presence11
	}
	if n >= SensorsSize12 {
		copy(s.LayerMinBits[:], b[offSLayerMinBits:offSLayerMinBits+MaxLayers])
		copy(s.LayerMaxBits[:], b[offSLayerMaxBits:offSLayerMaxBits+MaxLayers])
		copy(s.LayerSensRank[:], b[offSLayerSensRank:offSLayerSensRank+MaxLayers])
		s.TokPerSecTarget = getF32(b[offSTokPerSecTarget:])
	} else {
		s.LayerMinBits, s.LayerMaxBits, s.LayerSensRank = [MaxLayers]uint8{}, [MaxLayers]uint8{}, [MaxLayers]uint8{}
		s.TokPerSecTarget = 0
		s.Present &^= presence12
	}
	if n >= SensorsSize13 {
		s.CPUPSISomeAvg10 = getF32(b[offSCPUPSISome:])
		s.CPURunnable = getF32(b[offSCPURunnable:])
		s.CPUAllowed = int32(le.Uint32(b[offSCPUAllowed:]))
		s.StepTimeRatio = getF32(b[offSStepTimeRatio:])
		s.CurThreads = int32(le.Uint32(b[offSCurThreads:]))
	} else {
		s.CPUPSISomeAvg10, s.CPURunnable, s.CPUAllowed, s.StepTimeRatio, s.CurThreads = 0, 0, 0, 0, 0
		s.Present &^= presence13
	}
	if n >= SensorsSize14 {
		s.RepackLayers = int32(le.Uint32(b[offSRepackLayers:]))
		s.RepackLayersMax = int32(le.Uint32(b[offSRepackLayersMax:]))
		s.RepackMB = int32(le.Uint32(b[offSRepackMB:]))
		s.RepackMBMax = int32(le.Uint32(b[offSRepackMBMax:]))
	} else {
		s.RepackLayers, s.RepackLayersMax, s.RepackMB, s.RepackMBMax = 0, 0, 0, 0
		s.Present &^= presence14
	}
	if n >= SensorsSize15 {
		s.CPUOtherBusy = getF32(b[offSCPUOtherBusy:])
		s.CPUPSISomeRecent = getF32(b[offSCPUPSISomeRecent:])
		s.CPUSpanMS = getF32(b[offSCPUSpanMS:])
	} else {
		s.CPUOtherBusy, s.CPUPSISomeRecent, s.CPUSpanMS = 0, 0, 0
		s.Present &^= presence15
	}
	if n >= SensorsSize16 {
		s.LayerLatencyBatch = int32(le.Uint32(b[offSLayerLatencyBatch:]))
		s.LayerLatencyPos = int32(le.Uint32(b[offSLayerLatencyPos:]))
		s.DraftState = int32(le.Uint32(b[offSDraftState:]))
		s.DraftMB = getF32(b[offSDraftMB:])
	} else {
		s.LayerLatencyBatch, s.LayerLatencyPos, s.DraftState, s.DraftMB = 0, 0, 0, 0
		s.Present &^= presence16
	}
	if n >= SensorsSize17 {
		s.KVEvict = int32(le.Uint32(b[offSKVEvict:]))
	} else {
		s.KVEvict = 0
		s.Present &^= presence17
	}
	return nil
}

func b2u(v bool) uint8 {
	if v {
		return 1
	}
	return 0
}

func putF32(b []byte, v float32) { le.PutUint32(b, math.Float32bits(v)) }
func getF32(b []byte) float32    { return math.Float32frombits(le.Uint32(b)) }
