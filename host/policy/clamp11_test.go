package policy

import (
	"math"
	"testing"

	"github.com/edgellm/edgellm/abi"
)

// The ABI 1.1 decision fields: garbage is invalid, out-of-range values are
// clamped and reported, masks stay within the CPUs the process may use.
func TestClampSpecFields(t *testing.T) {
	l := Limits{NTiers: 1, NLayers: 4, MaxK: 4, MaxWindow: 64, MaxThreads: 2, MaxCadence: 8, CPUs: 0b0011}
	cur := abi.Decision{DraftCPUMask: 0b0001, VerifyCPUMask: 0b0010}
	for _, tc := range []struct {
		name    string
		in      abi.Decision
		want    abi.Decision
		clamps  ClampSet
		invalid bool
	}{
		{name: "in range", in: abi.Decision{SpecK: 4, SpecPMin: 0.5, DraftThreads: 1, DraftCPUMask: 0b01, VerifyCPUMask: 0b11},
			want: abi.Decision{SpecK: 4, SpecPMin: 0.5, DraftThreads: 1, DraftCPUMask: 0b01, VerifyCPUMask: 0b11}},
		{name: "leave as is", in: abi.Decision{}, want: abi.Decision{}},
		{name: "K above max", in: abi.Decision{SpecK: 8}, want: abi.Decision{SpecK: 4}, clamps: ClampSpecK},
		{name: "p_min above 1", in: abi.Decision{SpecPMin: 3}, want: abi.Decision{SpecPMin: 1}, clamps: ClampSpecPMin},
		{name: "draft threads", in: abi.Decision{DraftThreads: 9}, want: abi.Decision{DraftThreads: 2}, clamps: ClampDraftThreads},
		{name: "mask partly outside", in: abi.Decision{DraftCPUMask: 0b0110}, want: abi.Decision{DraftCPUMask: 0b0010}, clamps: ClampCPUMask},
		{name: "mask wholly outside", in: abi.Decision{VerifyCPUMask: 0b1100}, want: abi.Decision{VerifyCPUMask: 0b0010}, clamps: ClampCPUMask},
		{name: "NaN p_min", in: abi.Decision{SpecPMin: float32(math.NaN())}, invalid: true},
		{name: "negative p_min", in: abi.Decision{SpecPMin: -0.1}, invalid: true},
		{name: "negative draft threads", in: abi.Decision{DraftThreads: -1}, invalid: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.in
			if why := invalidReason(&d); (why != "") != tc.invalid {
				t.Fatalf("invalidReason = %q, want invalid %v", why, tc.invalid)
			}
			if tc.invalid {
				return
			}
			if c := l.clamp(&d, &cur, 0); c != tc.clamps || d != tc.want {
				t.Errorf("clamp: %+v (clamps %v), want %+v (clamps %v)", d, c, tc.want, tc.clamps)
			}
		})
	}
	// Any CPU allowed (CPUs = 0): masks pass unchanged.
	any := l
	any.CPUs = 0
	d := abi.Decision{DraftCPUMask: 0xf0, VerifyCPUMask: 0x0f}
	if c := any.clamp(&d, &cur, 0); c != 0 || d.DraftCPUMask != 0xf0 || d.VerifyCPUMask != 0x0f {
		t.Errorf("CPUs = 0: %+v, clamps %v", d, c)
	}
}

// An engine that cannot switch its KV type (kvMask 0): keeping the type in
// force is not a clamp (it was reported at every step, and every report
// woke the logger goroutine); asking for another one is clamped back to it.
func TestClampKVTypeFixed(t *testing.T) {
	l := Limits{NTiers: 1, NLayers: 4, MaxWindow: 64, MaxThreads: 2, MaxCadence: 8}
	cur := abi.Decision{KVType: abi.KVF16}
	for _, tc := range []struct {
		name   string
		in     abi.KVType
		want   abi.KVType
		clamps ClampSet
	}{
		{"keep", abi.KVF16, abi.KVF16, 0},
		{"leave as is", abi.KVUnknown, abi.KVUnknown, 0},
		{"switch", abi.KVQ8_0, abi.KVF16, ClampKVType},
	} {
		d := abi.Decision{KVType: tc.in}
		if c := l.clamp(&d, &cur, 0); c != tc.clamps || d.KVType != tc.want {
			t.Errorf("%s: kv %v clamps %v, want %v %v", tc.name, d.KVType, c.Names(), tc.want, tc.clamps.Names())
		}
	}
}

// The ABI 1.4 decision field: a negative repack_layers leaves the count as
// is (valid, unchanged); above every layer and the head it is clamped.
func TestClampRepackLayers(t *testing.T) {
	l := Limits{NTiers: 1, NLayers: 16, MaxWindow: 64, MaxThreads: 2, MaxCadence: 8}
	cur := abi.Decision{RepackLayers: 17}
	for _, tc := range []struct {
		in, want int32
		clamps   ClampSet
	}{
		{-1, -1, 0},
		{-1 << 31, -1 << 31, 0},
		{0, 0, 0},
		{16, 16, 0},
		{17, 17, 0}, // every layer and the output head
		{18, 17, ClampRepackLayers},
		{abi.MaxLayers + 2, 17, ClampRepackLayers},
	} {
		d := abi.Decision{RepackLayers: tc.in}
		if why := invalidReason(&d); why != "" {
			t.Errorf("repack %d: invalid (%s)", tc.in, why)
		}
		if c := l.clamp(&d, &cur, 0); c != tc.clamps || d.RepackLayers != tc.want {
			t.Errorf("repack %d: %d clamps %v, want %d %v", tc.in, d.RepackLayers, c.Names(), tc.want, tc.clamps.Names())
		}
	}
	if n := ClampRepackLayers.Names(); len(n) != 1 || n[0] != "repack_layers" {
		t.Errorf("ClampRepackLayers.Names() = %v", n)
	}
}

// The ABI 1.6 decision field: draft 0, 1, 2 pass; anything else is clamped
// to 0 (leave the draft as it is), never invalid.
func TestClampDraft(t *testing.T) {
	l := Limits{NTiers: 1, NLayers: 16, MaxWindow: 64, MaxThreads: 2, MaxCadence: 8}
	cur := abi.Decision{}
	for _, tc := range []struct {
		in, want int32
		clamps   ClampSet
	}{
		{abi.DraftLeave, abi.DraftLeave, 0},
		{abi.DraftAttach, abi.DraftAttach, 0},
		{abi.DraftDetach, abi.DraftDetach, 0},
		{3, abi.DraftLeave, ClampDraft},
		{-1, abi.DraftLeave, ClampDraft},
		{-1 << 31, abi.DraftLeave, ClampDraft},
	} {
		d := abi.Decision{Draft: tc.in}
		if why := invalidReason(&d); why != "" {
			t.Errorf("draft %d: invalid (%s)", tc.in, why)
		}
		if c := l.clamp(&d, &cur, 0); c != tc.clamps || d.Draft != tc.want {
			t.Errorf("draft %d: %d clamps %v, want %d %v", tc.in, d.Draft, c.Names(), tc.want, tc.clamps.Names())
		}
	}
	if n := ClampDraft.Names(); len(n) != 1 || n[0] != "draft" {
		t.Errorf("ClampDraft.Names() = %v", n)
	}
}
