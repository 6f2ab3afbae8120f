package trace

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/abi"
)

// TestFieldsMatchABI pins the field table to abi.Sensors: every name is a
// JSON tag of the struct, and bits are distinct and make up FieldMask.
func TestFieldsMatchABI(t *testing.T) {
	tags := map[string]bool{}
	st := reflect.TypeOf(abi.Sensors{})
	for i := 0; i < st.NumField(); i++ {
		tags[strings.Split(st.Field(i).Tag.Get("json"), ",")[0]] = true
	}
	var all abi.Presence
	for _, f := range fields {
		if !tags[f.name] {
			t.Errorf("field %q is not a JSON name of abi.Sensors", f.name)
		}
		if all&f.bit != 0 {
			t.Errorf("bit of %q used twice", f.name)
		}
		all |= f.bit
	}
	if all != FieldMask {
		t.Errorf("bits %b, FieldMask %b", all, FieldMask)
	}
}

const sample = `{"t_ms":0,"mem_available_mb":3000,"mem_threshold_mb":512,"mem_total_mb":8192,"low_memory":false,"thermal_status":0,"temp_c":35.5}

{"t_ms":100,"thermal_status":3,"temp_c":47.25,"trim_level":15}
{"t_ms":100,"battery_pct":42,"charging":true,"psi_some_avg10":1.5,"psi_full_avg10":0.25}
{"t_ms":250,"mem_available_mb":400,"low_memory":true,"cgroup_limit_mb":1024,"cgroup_usage_mb":900,"rss_mb":300,"pss_mb":250,"tok_per_sec":20.5,"tok_per_sec_smoothed":19,"accept_rate":0.75,"ctx_len":128,"tok_per_sec_target":12,"cpu_psi_some_avg10":5.5,"step_time_ratio":1.25}
`

func TestReadReplay(t *testing.T) {
	recs, err := Read(strings.NewReader(sample), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 || recs[1].Line != 3 || recs[3].TMs != 250 {
		t.Fatalf("records: %d, line of second %d", len(recs), recs[1].Line)
	}
	if recs[1].Present != abi.PresentThermalStatus|abi.PresentTemp|abi.PresentTrimLevel {
		t.Errorf("presence of line 3: %b", recs[1].Present)
	}
	rp := NewReplayer(recs)
	tests := []struct {
		tMs   int64
		check func(s *abi.Sensors) bool
	}{
		{0, func(s *abi.Sensors) bool {
			return s.MemAvailableMB == 3000 && s.TempC == 35.5 && !s.Has(abi.PresentBattery) && s.TimeNS == 0
		}},
		{50, func(s *abi.Sensors) bool { return s.ThermalStatus == 0 && s.TimeNS == 50e6 }},
		{100, func(s *abi.Sensors) bool {
			// both t=100 records applied; memory carried forward from t=0
			return s.ThermalStatus == abi.ThermalSevere && s.BatteryPct == 42 && s.Charging && s.MemAvailableMB == 3000 &&
				s.TrimLevel == abi.TrimRunningCritical && s.PSIFullAvg10 == 0.25
		}},
		{1000, func(s *abi.Sensors) bool {
			return s.MemAvailableMB == 400 && s.LowMemory && s.MemThresholdMB == 512 && s.CtxLen == 128 &&
				s.AcceptRate == 0.75 && s.ThermalStatus == abi.ThermalSevere && s.Present == FieldMask
		}},
	}
	for _, tc := range tests {
		if s := rp.At(tc.tMs); !tc.check(s) {
			t.Errorf("at %d ms: %+v", tc.tMs, *s)
		}
	}
	// Fill keeps engine state and replaces the trace's fields.
	var dst abi.Sensors
	dst.CurTier, dst.Step = 2, 7
	rp.Fill(1000, &dst)
	if dst.CurTier != 2 || dst.Step != 7 || dst.MemAvailableMB != 400 || dst.TimeNS != 1000e6 {
		t.Errorf("Fill: %+v", dst)
	}
	if n := testing.AllocsPerRun(100, func() { rp.Fill(1000, &dst) }); n != 0 {
		t.Errorf("Fill allocates %v", n)
	}
	rp.Reset()
	if s, ok := rp.Next(); !ok || s.MemAvailableMB != 3000 || s.ThermalStatus != 0 {
		t.Errorf("Next after Reset: %+v", *s)
	}
}

func TestWriteRoundTrip(t *testing.T) {
	recs, err := Read(strings.NewReader(sample), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for i := range recs {
		if err := w.Write(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	out := buf.String()
	back, err := Read(&buf, ReadOptions{})
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for i := range recs {
		a, b := recs[i], back[i]
		a.Line, b.Line = 0, 0
		if a != b {
			t.Errorf("record %d: %+v != %+v", i, a, b)
		}
	}
	if !strings.HasPrefix(out, `{"t_ms":0,"mem_available_mb":3000,`) {
		t.Errorf("output order: %.60s", out)
	}
}

func TestReadErrors(t *testing.T) {
	tests := []struct {
		name, in string
		line     int
		field    string
		is       error
	}{
		{"unknown field", `{"t_ms":0,"mem_available_mb":1,"bogus":2,"zzz":1}`, 1, "bogus", ErrUnknownField},
		{"missing t_ms", "{\"t_ms\":0}\n{\"temp_c\":3}", 2, "t_ms", ErrMissingTime},
		{"negative t_ms", `{"t_ms":-1}`, 1, "t_ms", ErrBadValue},
		{"fractional t_ms", `{"t_ms":1.5}`, 1, "t_ms", ErrBadValue},
		{"backwards", "{\"t_ms\":10}\n{\"t_ms\":5}", 2, "t_ms", ErrTimeBackward},
		{"string for int", `{"t_ms":0,"ctx_len":"12"}`, 1, "ctx_len", ErrBadValue},
		{"int out of range", `{"t_ms":0,"rss_mb":3000000000}`, 1, "rss_mb", ErrBadValue},
		{"thermal 7", `{"t_ms":0,"thermal_status":7}`, 1, "thermal_status", ErrBadValue},
		{"trim 256", `{"t_ms":0,"trim_level":256}`, 1, "trim_level", ErrBadValue},
		{"bool as number", `{"t_ms":0,"charging":1}`, 1, "charging", ErrBadValue},
		{"null value", `{"t_ms":0,"charging":null}`, 1, "charging", ErrBadValue},
		{"float overflow", `{"t_ms":0,"temp_c":1e300}`, 1, "temp_c", ErrBadValue},
		{"not json", "{\"t_ms\":0}\n{\"t_ms\":1}\nnope", 3, "", nil},
		{"array", `[1,2]`, 1, "", nil},
		{"null", `null`, 1, "", nil},
		{"two objects", `{"t_ms":0} {"t_ms":1}`, 1, "", nil},
		{"line too long", `{"t_ms":0,"temp_c":` + strings.Repeat("1", 70000) + `}`, 1, "", ErrLineTooLong},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tc.in), ReadOptions{})
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("err = %v, want *LineError", err)
			}
			if le.Line != tc.line || le.Field != tc.field || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Errorf("err = %v (line %d field %q), want line %d field %q %v", err, le.Line, le.Field, tc.line, tc.field, tc.is)
			}
		})
	}
}

func TestReadSkip(t *testing.T) {
	in := "{\"t_ms\":0,\"temp_c\":30}\n{\"t_ms\":1,\"nope\":1}\ngarbage\n{\"t_ms\":2,\"temp_c\":31}\n" + `{"t_ms":1}` + "\n{\"t_ms\":3,\"temp_c\":32}"
	var skipped []int
	recs, err := Read(strings.NewReader(in), ReadOptions{OnError: Skip, Skipped: func(e *LineError) { skipped = append(skipped, e.Line) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 || recs[2].Values.TempC != 32 || recs[2].Line != 6 {
		t.Errorf("records %+v", recs)
	}
	if !reflect.DeepEqual(skipped, []int{2, 3, 5}) {
		t.Errorf("skipped lines %v, want [2 3 5]", skipped)
	}
}

func TestReadFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.jsonl")
	os.WriteFile(p, []byte("{\"t_ms\":0}\n{\"t_ms\":0,\"x\":1}\n"), 0o644)
	_, err := ReadFile(p, ReadOptions{})
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), `line 2: field "x"`) {
		t.Errorf("err = %v", err)
	}
	if _, err := ReadFile(p+".missing", ReadOptions{}); err == nil || !strings.Contains(err.Error(), "x.jsonl.missing") {
		t.Errorf("missing file err = %v", err)
	}
}

func FuzzRead(f *testing.F) {
	for _, l := range strings.Split(sample, "\n") {
		f.Add(l)
	}
	f.Add(sample)
	f.Add(`{"t_ms":1e3,"temp_c":-0}`)
	f.Add("{\"t_ms\":0}\r\n{\"t_ms\":0,\"charging\":null}")
	f.Fuzz(func(t *testing.T, in string) {
		recs, err := Read(strings.NewReader(in), ReadOptions{OnError: Skip})
		if err != nil {
			t.Fatalf("Skip mode returned %v", err)
		}
		// What was read writes back and reads again to the same records.
		var buf bytes.Buffer
		w := NewWriter(&buf)
		last := int64(-1)
		for i := range recs {
			if recs[i].TMs < last || recs[i].Present&^FieldMask != 0 {
				t.Fatalf("record %d: %+v", i, recs[i])
			}
			last = recs[i].TMs
			w.Write(&recs[i])
		}
		w.Flush()
		back, err := Read(&buf, ReadOptions{})
		if err != nil || len(back) != len(recs) {
			t.Fatalf("round trip: %v (%d vs %d)\n%s", err, len(back), len(recs), buf.String())
		}
		for i := range recs {
			var a, b abi.Sensors
			recs[i].Apply(&a)
			back[i].Apply(&b)
			if a != b {
				t.Fatalf("record %d differs after round trip", i)
			}
		}
	})
}
