package abi

import (
	"bytes"
	"flag"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated tables in ABI.md")

// TestABIDoc checks that the offset tables in ABI.md are exactly those
// rendered from SensorsLayout and DecisionLayout (no drift); -update rewrites them.
func TestABIDoc(t *testing.T) {
	doc, err := os.ReadFile("ABI.md")
	if err != nil {
		t.Fatal(err)
	}
	got := string(doc)
	want := got
	for _, sec := range []struct {
		name   string
		fields []Field
	}{{"SENSORS", SensorsLayout()}, {"DECISION", DecisionLayout()}} {
		begin := "<!-- BEGIN " + sec.name + " LAYOUT"
		end := "<!-- END " + sec.name + " LAYOUT -->"
		i := strings.Index(want, begin)
		j := strings.Index(want, end)
		if i < 0 || j < i {
			t.Fatalf("ABI.md: markers for %s layout missing", sec.name)
		}
		i += strings.Index(want[i:], "\n") + 1
		want = want[:i] + LayoutMarkdown(sec.fields) + want[j:]
	}
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile("ABI.md", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("ABI.md updated")
		return
	}
	t.Fatal("ABI.md layout tables differ from layout.go; run: go test ./abi -run TestABIDoc -update")
}

// TestLayoutContiguous checks that each table covers [0, size) without gaps
// or overlaps and that every Go field appears exactly once.
func TestLayoutContiguous(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fields []Field
		size   int
		typ    reflect.Type
	}{
		{"Sensors", SensorsLayout(), SensorsSize, reflect.TypeFor[Sensors]()},
		{"Decision", DecisionLayout(), DecisionSize, reflect.TypeFor[Decision]()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			off := 0
			seen := map[string]bool{}
			for _, f := range tc.fields {
				if f.Offset != off {
					t.Errorf("%s at offset %d, want %d (gap or overlap)", f.Name, f.Offset, off)
				}
				off = f.Offset + f.Size
				if f.GoName != "" {
					if seen[f.GoName] {
						t.Errorf("Go field %s listed twice", f.GoName)
					}
					seen[f.GoName] = true
					sf, ok := tc.typ.FieldByName(f.GoName)
					if !ok {
						t.Errorf("%s: no Go field %s", f.Name, f.GoName)
						continue
					}
					if sf.Type.Size() != uintptr(f.Size) {
						t.Errorf("%s: Go field %s is %d bytes, table says %d", f.Name, f.GoName, sf.Type.Size(), f.Size)
					}
					if tag := sf.Tag.Get("json"); tag != "-" && tag != f.Name {
						t.Errorf("%s: json tag %q differs from wire name", f.GoName, tag)
					}
				}
			}
			if off != tc.size {
				t.Errorf("table ends at %d, size const is %d", off, tc.size)
			}
			for i := 0; i < tc.typ.NumField(); i++ {
				if n := tc.typ.Field(i).Name; !seen[n] {
					t.Errorf("Go field %s missing from the layout table", n)
				}
			}
		})
	}
}

// mark sets v (a field) to a value whose encoding has no zero byte.
func mark(v reflect.Value) {
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(0x7172737475767778 & (1<<(8*v.Type().Size()) - 1))
	case reflect.Int32, reflect.Int64:
		v.SetInt(0x7172737475767778 & (1<<(8*v.Type().Size()) - 1))
	case reflect.Float32:
		v.SetFloat(float64(math.Float32frombits(0x41424344)))
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			mark(v.Index(i))
		}
	default:
		panic("mark: unhandled kind " + v.Kind().String())
	}
}

// TestLayoutOffsets sets one Go field at a time and checks that the encoder
// changes exactly the bytes the table assigns to it, and the decoder reads
// them back into that field.
func TestLayoutOffsets(t *testing.T) {
	t.Run("Sensors", func(t *testing.T) {
		base := make([]byte, SensorsSize)
		if err := EncodeSensors(base, &Sensors{}); err != nil {
			t.Fatal(err)
		}
		for _, f := range SensorsLayout() {
			if f.GoName == "" {
				continue
			}
			var s Sensors
			mark(reflect.ValueOf(&s).Elem().FieldByName(f.GoName))
			buf := make([]byte, SensorsSize)
			if err := EncodeSensors(buf, &s); err != nil {
				t.Fatal(err)
			}
			checkOnly(t, f, base, buf)
			var back Sensors
			if err := DecodeSensors(buf, &back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, s) {
				t.Errorf("%s: decode did not restore the field", f.GoName)
			}
		}
	})
	t.Run("Decision", func(t *testing.T) {
		base := make([]byte, DecisionSize)
		if err := EncodeDecision(base, &Decision{}); err != nil {
			t.Fatal(err)
		}
		for _, f := range DecisionLayout() {
			if f.GoName == "" {
				continue
			}
			var d Decision
			mark(reflect.ValueOf(&d).Elem().FieldByName(f.GoName))
			if f.GoName == "ReasonText" {
				d.ReasonLen = ReasonTextSize // text bytes are written only up to ReasonLen
				base[offDReasonLen] = ReasonTextSize
			} else {
				base[offDReasonLen] = 0
			}
			buf := make([]byte, DecisionSize)
			if err := EncodeDecision(buf, &d); err != nil {
				t.Fatal(err)
			}
			checkOnly(t, f, base, buf)
			var back Decision
			if err := DecodeDecision(buf, &back); err != nil {
				t.Fatal(err)
			}
			if f.GoName == "ReasonLen" {
				d.ReasonLen = ReasonTextSize // clamped on encode
			}
			if !reflect.DeepEqual(back, d) {
				t.Errorf("%s: decode did not restore the field", f.GoName)
			}
		}
	})
}

func checkOnly(t *testing.T, f Field, base, buf []byte) {
	t.Helper()
	for i := range buf {
		in := i >= f.Offset && i < f.Offset+f.Size
		if !in && buf[i] != base[i] {
			t.Errorf("%s: encoder wrote byte %d, outside the table's [%d,%d)", f.GoName, i, f.Offset, f.Offset+f.Size)
			return
		}
	}
	if bytes.Equal(buf[f.Offset:f.Offset+f.Size], base[f.Offset:f.Offset+f.Size]) {
		t.Errorf("%s: encoder wrote nothing at the table's [%d,%d)", f.GoName, f.Offset, f.Offset+f.Size)
	}
}

func TestPresenceOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		want Presence
		ok   bool
	}{
		{"mem_available_mb", PresentMemAvailable, true},
		{"thermal_status", PresentThermalStatus, true},
		{"accept_rate", PresentAcceptRate, true},
		{"ctx_len", PresentCtxLen, true},
		{"cur_tier", PresentCurrent, true},
		{"repack_layers", PresentRepack, true},
		{"repack_mb_max", PresentRepack, true},
		{"t_ms", 0, false},
		{"step", 0, false},
		{"bogus", 0, false},
	} {
		got, ok := PresenceOf(tc.name)
		if got != tc.want || ok != tc.ok {
			t.Errorf("PresenceOf(%q) = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	// Every trace JSON name of the brief maps to a bit.
	for _, n := range strings.Fields("mem_available_mb mem_threshold_mb mem_total_mb low_memory trim_level psi_some_avg10 psi_full_avg10 cgroup_limit_mb cgroup_usage_mb rss_mb pss_mb thermal_status temp_c battery_pct charging tok_per_sec tok_per_sec_smoothed accept_rate ctx_len") {
		if _, ok := PresenceOf(n); !ok {
			t.Errorf("trace field %s has no presence bit", n)
		}
	}
}
