package abi

import (
	"errors"
	"math"
	"reflect"
	"testing"
)

func fullSensors() Sensors {
	s := Sensors{
		Present: PresentMemAvailable | PresentThermalStatus | PresentCurrent | PresentLayerLatency,
		Step:    123456789012, TimeNS: -42,
		MemAvailableMB: 812, MemThresholdMB: 256, MemTotalMB: 7680, LowMemory: true,
		TrimLevel: TrimRunningCritical, ThermalStatus: ThermalSevere, Charging: true,
		PSISomeAvg10: 12.5, PSIFullAvg10: 3.25, CgroupLimitMB: 2048, CgroupUsageMB: 1999,
		RSSMB: 640, PSSMB: 600, TempC: 41.5, BatteryPct: 77, TokPerSec: 18.5,
		TokPerSecSmoothed: 17.25, AcceptRate: 0.81, CtxLen: 1024, TiersAvailable: 3,
		LayerCount: 32, CurTier: 1, CurSpecK: 4, CurWindow: 2048, CurAnchors: 4, CurKVType: KVQ8_0,
		SpecMeanAccepted: 2.75, SpecDraftCost: 0.31, SpecKMax: 8, TokPerSecTarget: 12,
		CPUPSISomeAvg10: 37.5, CPURunnable: 3, CPUAllowed: 2, StepTimeRatio: 1.8, CurThreads: 2,
		RepackLayers: 12, RepackLayersMax: 17, RepackMB: 410, RepackMBMax: 581,
		CPUOtherBusy: 0.75, CPUPSISomeRecent: 46.5, CPUSpanMS: 251.5,
		LayerLatencyBatch: 5, LayerLatencyPos: 1019, DraftState: DraftDetached, DraftMB: 37.25, KVEvict: EvictMerge,
	}
	for i := range s.LayerLatencyUS {
		s.LayerLatencyUS[i] = float32(i) * 1.5
		s.CurLayerBits[i] = uint8(4 + i%5)
		s.LayerMinBits[i] = uint8(4 + i%3)
		s.LayerMaxBits[i] = uint8(8 + i%2*8)
		s.LayerSensRank[i] = uint8(127 - i)
	}
	for i := range s.SpecAcceptByPos {
		s.SpecAcceptByPos[i] = 0.9 - 0.1*float32(i)
	}
	for i := range s.SpecVerifyCost {
		s.SpecVerifyCost[i] = 1 + 0.4*float32(i)
	}
	return s
}

func fullDecision() Decision {
	d := Decision{Tier: 2, SpecK: 6, Window: 256, Anchors: 4, Threads: 2, CadenceSteps: 8, KVType: KVQ4_0,
		SpecPMin: 0.6, DraftThreads: 1, DraftCPUMask: 0b0011, VerifyCPUMask: 0b1100, RepackLayers: 9, Draft: DraftDetach, KVEvict: EvictDrop}
	d.SetReason(ReasonThermal, "thermal severe: tier 1→2")
	for i := range d.LayerBits {
		d.LayerBits[i] = uint8(i % 9)
		d.LayerWindowScale[i] = 1 / float32(i+1)
	}
	return d
}

func TestSensorsRoundTrip(t *testing.T) {
	nan := Sensors{Present: PresentTemp, TempC: float32(math.NaN())}
	neg := Sensors{MemAvailableMB: -1, CtxLen: math.MinInt32, Step: math.MaxUint64, TimeNS: math.MinInt64,
		RepackLayers: math.MaxInt32, RepackMBMax: math.MinInt32}
	for _, tc := range []struct {
		name string
		in   Sensors
	}{
		{"zero", Sensors{}},
		{"full", fullSensors()},
		{"nan", nan},
		{"extremes", neg},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := make([]byte, SensorsSize)
			if err := EncodeSensors(buf, &tc.in); err != nil {
				t.Fatal(err)
			}
			var out Sensors
			out.CtxLen = 99 // must be overwritten
			if err := DecodeSensors(buf, &out); err != nil {
				t.Fatal(err)
			}
			if tc.name == "nan" {
				if !math.IsNaN(float64(out.TempC)) {
					t.Fatalf("TempC = %v, want NaN", out.TempC)
				}
				out.TempC, tc.in.TempC = 0, 0
			}
			if !reflect.DeepEqual(out, tc.in) {
				t.Fatalf("round trip differs:\n got %+v\nwant %+v", out, tc.in)
			}
		})
	}
}

func TestDecisionRoundTrip(t *testing.T) {
	long := Decision{}
	long.SetReason(ReasonPolicy+7, "ééééééééééééééééééééééééééééééééééééé") // 74 bytes
	for _, tc := range []struct {
		name string
		in   Decision
	}{
		{"zero", Decision{}},
		{"full", fullDecision()},
		{"long reason", long},
		{"leave repack", Decision{RepackLayers: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := make([]byte, DecisionSize+10)
			if err := EncodeDecision(buf, &tc.in); err != nil {
				t.Fatal(err)
			}
			var out Decision
			out.Tier = 99
			if err := DecodeDecision(buf, &out); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(out, tc.in) {
				t.Fatalf("round trip differs:\n got %+v\nwant %+v", out, tc.in)
			}
		})
	}
}

func TestSetReason(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
	}{
		{"short", "ok", "ok"},
		{"exact", "012345678901234567890123456789012345678901234567", "012345678901234567890123456789012345678901234567"},
		{"ascii cut", "0123456789012345678901234567890123456789012345678_tail", "012345678901234567890123456789012345678901234567"},
		{"rune cut", "0123456789012345678901234567890123456789012345é", "0123456789012345678901234567890123456789012345é"},
		{"rune cut mid", "01234567890123456789012345678901234567890123456é", "01234567890123456789012345678901234567890123456"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d Decision
			d.SetReason(ReasonFixed, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx") // stale bytes must go
			d.SetReason(ReasonMemoryPressure, tc.text)
			if got := d.Reason(); got != tc.want {
				t.Errorf("Reason() = %q, want %q", got, tc.want)
			}
			var db Decision
			db.SetReason(ReasonFixed, "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy")
			db.SetReasonBytes(ReasonMemoryPressure, []byte(tc.text))
			if db != d {
				t.Errorf("SetReasonBytes differs from SetReason: %q vs %q", db.Reason(), d.Reason())
			}
			if d.ReasonCode != ReasonMemoryPressure {
				t.Errorf("code = %d", d.ReasonCode)
			}
			for i := int(d.ReasonLen); i < ReasonTextSize; i++ {
				if d.ReasonText[i] != 0 {
					t.Fatalf("byte %d not cleared", i)
				}
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	good := make([]byte, SensorsSize)
	s := fullSensors()
	if err := EncodeSensors(good, &s); err != nil {
		t.Fatal(err)
	}
	patch := func(off int, v ...byte) []byte {
		b := append([]byte(nil), good...)
		copy(b[off:], v)
		return b
	}
	for _, tc := range []struct {
		name string
		buf  []byte
		want ErrorKind
	}{
		{"empty", nil, ErrShortBuffer},
		{"header only", good[:HeaderSize], ErrShortBuffer},
		{"truncated", good[:SensorsSize-1], ErrShortBuffer},
		{"major 2", patch(0, 2, 0), ErrMajorVersion},
		{"major 0", patch(0, 0, 0), ErrMajorVersion},
		{"size below base", patch(4, 0xff, 2, 0, 0), ErrBadSize},
		{"size huge", patch(4, 0, 0, 0, 1), ErrBadSize},
		{"size beyond buffer", patch(4, 0x24, 5, 0, 0), ErrShortBuffer}, // 1316 > SensorsSize
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out Sensors
			err := DecodeSensors(tc.buf, &out)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			var e *Error
			if !errors.As(err, &e) || e.Struct != "Sensors" || e.Error() == "" {
				t.Fatalf("err = %#v, want *Error for Sensors", err)
			}
			// The same header problems on a Decision.
			var d Decision
			db := make([]byte, DecisionSize)
			copy(db, tc.buf[:min(len(tc.buf), HeaderSize)])
			if len(tc.buf) >= HeaderSize && tc.want == ErrMajorVersion {
				if err := DecodeDecision(db, &d); !errors.Is(err, tc.want) {
					t.Fatalf("Decision err = %v, want %v", err, tc.want)
				}
			}
		})
	}
	db := make([]byte, DecisionSize)
	dd := fullDecision()
	_ = EncodeDecision(db, &dd)
	le.PutUint32(db[4:], DecisionSize10-1)
	if err := DecodeDecision(db, &dd); !errors.Is(err, ErrBadSize) {
		t.Errorf("Decision size below base: %v", err)
	}
	if err := EncodeSensors(make([]byte, SensorsSize-1), &s); !errors.Is(err, ErrShortBuffer) {
		t.Errorf("EncodeSensors short: %v", err)
	}
	d := fullDecision()
	if err := EncodeDecision(make([]byte, DecisionSize-1), &d); !errors.Is(err, ErrShortBuffer) {
		t.Errorf("EncodeDecision short: %v", err)
	}
}

// TestNewerMinor: a newer writer (minor 8, a longer struct) is read up to
// what this package knows.
func TestNewerMinor(t *testing.T) {
	s := fullSensors()
	buf := make([]byte, SensorsSize+64)
	if err := EncodeSensors(buf, &s); err != nil {
		t.Fatal(err)
	}
	buf[2] = 8                            // minor 8
	le.PutUint32(buf[4:], SensorsSize+64) // appended fields
	for i := SensorsSize; i < len(buf); i++ {
		buf[i] = 0xEE
	}
	var out Sensors
	if err := DecodeSensors(buf, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, s) {
		t.Fatal("newer-minor decode differs")
	}
	h, err := ReadHeader(buf)
	if err != nil || h.Version != (Version{1, 8}) || h.Size != SensorsSize+64 {
		t.Fatalf("ReadHeader = %+v, %v", h, err)
	}
}

func TestVersion(t *testing.T) {
	if Current() != (Version{VersionMajor, VersionMinor}) || Current().String() != "1.7" {
		t.Fatalf("Current = %v", Current())
	}
	for _, tc := range []struct {
		v        Version
		sSize    int
		dSize    int
		wantKind ErrorKind
	}{
		{Version{1, 0}, 768, 736, ""},
		{Version{1, 1}, 848, 760, ""},
		{Version{1, 2}, 1236, 760, ""},
		{Version{1, 3}, 1256, 760, ""},
		{Version{1, 4}, 1272, 768, ""},
		{Version{1, 5}, 1284, 768, ""},
		{Version{1, 6}, 1300, 776, ""},
		{Version{1, 7}, 1304, 776, ""},
		{Version{1, 8}, 0, 0, ErrMinorVersion},
		{Version{2, 0}, 0, 0, ErrMajorVersion},
		{Version{0, 9}, 0, 0, ErrMajorVersion},
	} {
		ss, err1 := SensorsSizeFor(tc.v)
		ds, err2 := DecisionSizeFor(tc.v)
		if tc.wantKind == "" {
			if err1 != nil || err2 != nil || ss != tc.sSize || ds != tc.dSize {
				t.Errorf("%v: %d %d %v %v", tc.v, ss, ds, err1, err2)
			}
			if !tc.v.Compatible() {
				t.Errorf("%v not compatible", tc.v)
			}
			continue
		}
		if !errors.Is(err1, tc.wantKind) || !errors.Is(err2, tc.wantKind) {
			t.Errorf("%v: errs %v %v, want %v", tc.v, err1, err2, tc.wantKind)
		}
	}
}

func TestEnums(t *testing.T) {
	if KVQ4_0.String() != "q4_0" || KVUnknown.String() != "" || (KVQ4_0+1).String() != "" {
		t.Error("KVType.String")
	}
	if ThermalShutdown.String() != "shutdown" || ThermalStatus(7).String() != "invalid" {
		t.Error("ThermalStatus.String")
	}
	if StatusPanic.String() != "guest panic" || Status(77).String() != "unknown status" {
		t.Error("Status.String")
	}
}

// TestNoAlloc: encoders and decoders do not allocate (they run on the
// guest's hot path and in the host's decode loop).
func TestNoAlloc(t *testing.T) {
	s, d := fullSensors(), fullDecision()
	sb, db := make([]byte, SensorsSize), make([]byte, DecisionSize)
	var s2 Sensors
	var d2 Decision
	n := testing.AllocsPerRun(1000, func() {
		_ = EncodeSensors(sb, &s)
		_ = DecodeSensors(sb, &s2)
		_ = EncodeDecision(db, &d)
		_ = DecodeDecision(db, &d2)
		d2.SetReason(ReasonSpeculation, "k 4→6")
		d2.SetReasonBytes(ReasonSpeculation, sb[:60])
		_ = d2.ReasonBytes()
		_ = s2.Has(PresentCurrent)
	})
	if n != 0 {
		t.Fatalf("%v allocations per run, want 0", n)
	}
}

func BenchmarkEncodeDecode(b *testing.B) {
	s, d := fullSensors(), fullDecision()
	sb, db := make([]byte, SensorsSize), make([]byte, DecisionSize)
	var s2 Sensors
	var d2 Decision
	b.ReportAllocs()
	for b.Loop() {
		_ = EncodeSensors(sb, &s)
		_ = DecodeSensors(sb, &s2)
		_ = EncodeDecision(db, &d)
		_ = DecodeDecision(db, &d2)
	}
}

// TestExchangeSizes: a host sends each guest the prefix its minor knows, and
// a newer guest gets the host's sizes.
func TestExchangeSizes(t *testing.T) {
	for _, tc := range []struct {
		v      Version
		ss, ds int
	}{
		{Version{1, 0}, SensorsSize10, DecisionSize10},
		{Version{1, 1}, SensorsSize11, DecisionSize11},
		{Version{1, 2}, SensorsSize12, DecisionSize11},
		{Version{1, 3}, SensorsSize13, DecisionSize11},
		{Version{1, 4}, SensorsSize14, DecisionSize14},
		{Version{1, 5}, SensorsSize15, DecisionSize14},
		{Version{1, 6}, SensorsSize16, DecisionSize16},
		{Version{1, 9}, SensorsSize, DecisionSize},
	} {
		ss, ds, err := ExchangeSizes(tc.v)
		if err != nil || ss != tc.ss || ds != tc.ds {
			t.Errorf("ExchangeSizes(%v) = %d, %d, %v; want %d, %d", tc.v, ss, ds, err, tc.ss, tc.ds)
		}
	}
	if _, _, err := ExchangeSizes(Version{2, 0}); !errors.Is(err, ErrMajorVersion) {
		t.Errorf("major 2: %v", err)
	}
}

// TestOlderMinorPrefix: a struct encoded at an older minor's size decodes
// with that minor's fields intact, later fields zero and their presence bits
// clear (Sensors), or the reader's own values kept (Decision).
func TestOlderMinorPrefix(t *testing.T) {
	s := fullSensors()
	s.Present = ^Presence(0) >> 30 // bits 0–33: every reading of 1.6
	for _, size := range []int{SensorsSize10, SensorsSize11, SensorsSize12, SensorsSize13, SensorsSize14, SensorsSize15, SensorsSize16} {
		buf := make([]byte, size)
		if err := EncodeSensorsSize(buf, &s, size); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if h, _ := ReadHeader(buf); h.Size != uint32(size) || h.Version != Current() {
			t.Fatalf("size %d: header %+v", size, h)
		}
		var got Sensors
		if err := DecodeSensors(buf, &got); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		want := s
		if size < SensorsSize11 {
			want.SpecAcceptByPos, want.SpecMeanAccepted, want.SpecDraftCost = [MaxSpecK]float32{}, 0, 0
			want.SpecVerifyCost, want.SpecKMax = [MaxSpecK + 1]float32{}, 0
			want.Present &^= presence11
		}
		if size < SensorsSize12 {
			want.LayerMinBits, want.LayerMaxBits, want.LayerSensRank = [MaxLayers]uint8{}, [MaxLayers]uint8{}, [MaxLayers]uint8{}
			want.TokPerSecTarget = 0
			want.Present &^= presence12
		}
		if size < SensorsSize13 {
			want.CPUPSISomeAvg10, want.CPURunnable, want.CPUAllowed, want.StepTimeRatio, want.CurThreads = 0, 0, 0, 0, 0
			want.Present &^= presence13
		}
		if size < SensorsSize14 {
			want.RepackLayers, want.RepackLayersMax, want.RepackMB, want.RepackMBMax = 0, 0, 0, 0
			want.Present &^= PresentRepack
		}
		if size < SensorsSize15 {
			want.CPUOtherBusy, want.CPUPSISomeRecent, want.CPUSpanMS = 0, 0, 0
			want.Present &^= PresentCPUBusy
		}
		if size < SensorsSize16 {
			want.LayerLatencyBatch, want.LayerLatencyPos, want.DraftState, want.DraftMB = 0, 0, 0, 0
			want.KVEvict = 0
			want.Present &^= PresentLatencyShape | PresentDraft
		}
		if size < SensorsSize17 {
			want.KVEvict = 0
			want.Present &^= PresentEvict
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("size %d: decoded %+v\nwant %+v", size, got, want)
		}
	}
	if err := EncodeSensorsSize(make([]byte, 800), &s, 800); !errors.Is(err, ErrBadSize) {
		t.Errorf("size 800: %v", err)
	}
	if err := EncodeSensorsSize(make([]byte, 10), &s, SensorsSize10); !errors.Is(err, ErrShortBuffer) {
		t.Errorf("short: %v", err)
	}

	d := fullDecision()
	pre := Decision{SpecPMin: 0.25, DraftThreads: 3, DraftCPUMask: 0x5, VerifyCPUMask: 0xa, RepackLayers: 5, Draft: DraftLeave}
	for _, size := range []int{DecisionSize10, DecisionSize11, DecisionSize14, DecisionSize16} {
		buf := make([]byte, size)
		if err := EncodeDecisionSize(buf, &d, size); err != nil {
			t.Fatalf("decision size %d: %v", size, err)
		}
		if h, _ := ReadHeader(buf); h.Size != uint32(size) || h.Version != Current() {
			t.Fatalf("decision size %d: header %+v", size, h)
		}
		got := pre
		if err := DecodeDecision(buf, &got); err != nil {
			t.Fatal(err)
		}
		want := d
		if size < DecisionSize11 {
			want.SpecPMin, want.DraftThreads, want.DraftCPUMask, want.VerifyCPUMask = pre.SpecPMin, pre.DraftThreads, pre.DraftCPUMask, pre.VerifyCPUMask
		}
		if size < DecisionSize14 {
			want.RepackLayers = pre.RepackLayers // a 1.1–1.3 writer keeps the pre-fill
		}
		if size < DecisionSize16 {
			want.Draft = pre.Draft // a 1.0–1.5 writer leaves the draft as it is
			want.KVEvict = pre.KVEvict
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("decision of size %d over a pre-fill: %+v\nwant %+v", size, got, want)
		}
	}
	if err := EncodeDecisionSize(make([]byte, DecisionSize10), &d, 740); !errors.Is(err, ErrBadSize) {
		t.Errorf("decision size 740: %v", err)
	}
}

// TestMinor13Writer: structs written by a 1.3 peer (minor 3 in the header,
// the 1.3 sizes) decode with the 1.4 Sensors fields zero and PresentRepack
// clear, even if the writer set that bit, and with the reader's pre-filled
// RepackLayers kept in the Decision.
func TestMinor13Writer(t *testing.T) {
	s := fullSensors()
	s.Present |= PresentRepack | PresentCurrent
	buf := olderSensors(t, &s, 3, SensorsSize13)
	var got Sensors
	got.RepackLayers, got.RepackLayersMax, got.RepackMB, got.RepackMBMax = 1, 2, 3, 4 // must be cleared
	if err := DecodeSensors(buf, &got); err != nil {
		t.Fatal(err)
	}
	want := s
	want.RepackLayers, want.RepackLayersMax, want.RepackMB, want.RepackMBMax = 0, 0, 0, 0
	want.CPUOtherBusy, want.CPUPSISomeRecent, want.CPUSpanMS = 0, 0, 0
	want.LayerLatencyBatch, want.LayerLatencyPos, want.DraftState, want.DraftMB = 0, 0, 0, 0
	want.KVEvict = 0
	want.Present &^= PresentRepack | PresentCPUBusy
	if !reflect.DeepEqual(got, want) {
		t.Errorf("1.3 sensors: %+v\nwant %+v", got, want)
	}
	if got.Has(PresentRepack) || !got.Has(PresentCurrent) || got.CurThreads != s.CurThreads {
		t.Errorf("1.3 sensors: present %#x, cur_threads %d", got.Present, got.CurThreads)
	}

	d := fullDecision()
	dfull := make([]byte, DecisionSize)
	if err := EncodeDecision(dfull, &d); err != nil {
		t.Fatal(err)
	}
	dbuf := append([]byte(nil), dfull[:DecisionSize11]...)
	le.PutUint16(dbuf[2:], 3)
	le.PutUint32(dbuf[4:], DecisionSize11)
	for _, pre := range []int32{-1, 0, 7} {
		gd := Decision{RepackLayers: pre, Draft: DraftLeave}
		if err := DecodeDecision(dbuf, &gd); err != nil {
			t.Fatal(err)
		}
		wd := d
		wd.RepackLayers, wd.Draft, wd.KVEvict = pre, DraftLeave, EvictLeave
		if !reflect.DeepEqual(gd, wd) {
			t.Errorf("1.3 decision over pre-fill %d: %+v\nwant %+v", pre, gd, wd)
		}
	}
	// A 1.4 writer's value replaces the pre-fill, a negative one included.
	d.RepackLayers = -1
	_ = EncodeDecision(dfull, &d)
	gd := Decision{RepackLayers: 7}
	if err := DecodeDecision(dfull, &gd); err != nil || gd.RepackLayers != -1 {
		t.Errorf("1.4 decision: repack_layers %d, %v", gd.RepackLayers, err)
	}
	// The reserved bytes after repack_layers are written as zero.
	for i := range dfull[DecisionSize14-4 : DecisionSize14] {
		dfull[DecisionSize14-4+i] = 0xEE
	}
	_ = EncodeDecision(dfull, &d)
	if r := dfull[DecisionSize14-4 : DecisionSize14]; r[0]|r[1]|r[2]|r[3] != 0 {
		t.Errorf("reserved bytes %x", r)
	}
}

// TestMinor14Writer: Sensors written by a 1.4 peer decode with the 1.5
// fields zero and PresentCPUBusy clear even if the writer set that bit, and
// every 1.4 field intact.
func TestMinor14Writer(t *testing.T) {
	s := fullSensors()
	s.Present |= PresentRepack | PresentCPUBusy
	buf := olderSensors(t, &s, 4, SensorsSize14)
	got := Sensors{CPUOtherBusy: 1, CPUPSISomeRecent: 2, CPUSpanMS: 3} // must be cleared
	if err := DecodeSensors(buf, &got); err != nil {
		t.Fatal(err)
	}
	want := s
	want.CPUOtherBusy, want.CPUPSISomeRecent, want.CPUSpanMS = 0, 0, 0
	want.LayerLatencyBatch, want.LayerLatencyPos, want.DraftState, want.DraftMB = 0, 0, 0, 0
	want.KVEvict = 0
	want.Present &^= PresentCPUBusy
	if !reflect.DeepEqual(got, want) {
		t.Errorf("1.4 sensors: %+v\nwant %+v", got, want)
	}
	if !got.Has(PresentRepack) || got.RepackMB != s.RepackMB {
		t.Errorf("1.4 sensors: present %#x, repack_mb %d", got.Present, got.RepackMB)
	}
}

// TestMinor15Writer: structs written by a 1.5 peer decode with the 1.6
// Sensors fields zero and PresentLatencyShape, PresentDraft clear even if the
// writer set them, every 1.5 field intact, and the reader's pre-filled
// Decision.Draft kept (a 1.5 guest never attaches or detaches a draft).
func TestMinor15Writer(t *testing.T) {
	s := fullSensors()
	s.Present |= PresentCPUBusy | PresentLatencyShape | PresentDraft
	buf := olderSensors(t, &s, 5, SensorsSize15)
	got := Sensors{LayerLatencyBatch: 1, LayerLatencyPos: 2, DraftState: 1, DraftMB: 4} // must be cleared
	if err := DecodeSensors(buf, &got); err != nil {
		t.Fatal(err)
	}
	want := s
	want.LayerLatencyBatch, want.LayerLatencyPos, want.DraftState, want.DraftMB = 0, 0, 0, 0
	want.KVEvict = 0
	want.Present &^= PresentLatencyShape | PresentDraft
	if !reflect.DeepEqual(got, want) {
		t.Errorf("1.5 sensors: %+v\nwant %+v", got, want)
	}
	if !got.Has(PresentCPUBusy) || got.CPUSpanMS != s.CPUSpanMS {
		t.Errorf("1.5 sensors: present %#x, cpu_span_ms %v", got.Present, got.CPUSpanMS)
	}

	d := fullDecision()
	dfull := make([]byte, DecisionSize)
	if err := EncodeDecision(dfull, &d); err != nil {
		t.Fatal(err)
	}
	dbuf := append([]byte(nil), dfull[:DecisionSize14]...)
	le.PutUint16(dbuf[2:], 5)
	le.PutUint32(dbuf[4:], DecisionSize14)
	gd := Decision{Draft: DraftLeave}
	if err := DecodeDecision(dbuf, &gd); err != nil {
		t.Fatal(err)
	}
	wd := d
	wd.Draft, wd.KVEvict = DraftLeave, EvictLeave
	if !reflect.DeepEqual(gd, wd) {
		t.Errorf("1.5 decision: %+v\nwant %+v", gd, wd)
	}
	// A 1.6 writer's value replaces the pre-fill; the 4 bytes after it
	// (reserved in 1.6) carry 1.7's kv_evict.
	for i := DecisionSize16 - 4; i < DecisionSize16; i++ {
		dfull[i] = 0xEE
	}
	_ = EncodeDecision(dfull, &d)
	if r := int32(le.Uint32(dfull[DecisionSize16-4:])); r != d.KVEvict {
		t.Errorf("kv_evict bytes %d, want %d", r, d.KVEvict)
	}
	gd = Decision{Draft: DraftLeave}
	if err := DecodeDecision(dfull, &gd); err != nil || gd.Draft != DraftDetach {
		t.Errorf("1.6 decision: draft %d, %v", gd.Draft, err)
	}
}

// olderSensors is s as a peer of minor 1.minor writes it: the prefix of
// size bytes, with that minor and size in the header (and whatever presence
// bits s has, later minors' included).
func olderSensors(t *testing.T, s *Sensors, minor uint16, size int) []byte {
	t.Helper()
	full := make([]byte, SensorsSize)
	if err := EncodeSensors(full, s); err != nil {
		t.Fatal(err)
	}
	buf := append([]byte(nil), full[:size]...)
	le.PutUint16(buf[2:], minor)
	le.PutUint32(buf[4:], uint32(size))
	return buf
}

// TestMinor16Writer: Sensors written by a 1.6 peer decode with kv_evict
// zero and PresentEvict clear even if the writer set it; a 1.6 Decision
// (its 4 reserved bytes zero) reads as kv_evict 0, leave as is.
func TestMinor16Writer(t *testing.T) {
	s := fullSensors()
	s.Present |= PresentDraft | PresentEvict
	buf := olderSensors(t, &s, 6, SensorsSize16)
	got := Sensors{KVEvict: 2} // must be cleared
	if err := DecodeSensors(buf, &got); err != nil {
		t.Fatal(err)
	}
	if got.KVEvict != 0 || got.Has(PresentEvict) || !got.Has(PresentDraft) || got.DraftMB != s.DraftMB {
		t.Errorf("1.6 sensors: kv_evict %d, present %#x, draft_mb %v", got.KVEvict, got.Present, got.DraftMB)
	}
	d := fullDecision()
	dbuf := make([]byte, DecisionSize)
	if err := EncodeDecision(dbuf, &d); err != nil {
		t.Fatal(err)
	}
	le.PutUint16(dbuf[2:], 6)
	clear(dbuf[DecisionSize16-4:]) // reserved in 1.6
	gd := Decision{KVEvict: EvictMerge}
	if err := DecodeDecision(dbuf, &gd); err != nil || gd.KVEvict != EvictLeave || gd.Draft != d.Draft {
		t.Errorf("1.6 decision: kv_evict %d, draft %d, %v", gd.KVEvict, gd.Draft, err)
	}
	// A 1.7 writer's kv_evict round-trips.
	_ = EncodeDecision(dbuf, &d)
	if err := DecodeDecision(dbuf, &gd); err != nil || gd.KVEvict != d.KVEvict {
		t.Errorf("1.7 decision: kv_evict %d, want %d", gd.KVEvict, d.KVEvict)
	}
}
