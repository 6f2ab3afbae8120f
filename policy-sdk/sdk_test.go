package sdk

import (
	"errors"
	"testing"

	"github.com/edgellm/edgellm/abi"
)

func bump(s *abi.Sensors, d *abi.Decision) {
	d.Tier = s.CurTier + 1
	d.SetReason(abi.ReasonPolicy, "bump")
}

func encode(t testing.TB, s *abi.Sensors, d *abi.Decision) (in, out []byte) {
	in, out = make([]byte, abi.SensorsSize), make([]byte, abi.DecisionSize)
	if err := abi.EncodeSensors(in, s); err != nil {
		t.Fatal(err)
	}
	if err := abi.EncodeDecision(out, d); err != nil {
		t.Fatal(err)
	}
	return in, out
}

func TestCall(t *testing.T) {
	for _, tc := range []struct {
		name       string
		f          DecideFunc
		breakIn    bool
		breakOut   bool
		wantStatus abi.Status
		wantTier   int32
		wantReason string
	}{
		{name: "ok", f: bump, wantStatus: abi.StatusOK, wantTier: 3, wantReason: "bump"},
		{name: "keeps prefill", f: func(*abi.Sensors, *abi.Decision) {}, wantStatus: abi.StatusOK, wantTier: 5, wantReason: "prefill"},
		{name: "panic string", f: func(*abi.Sensors, *abi.Decision) { panic("boom") }, wantStatus: abi.StatusPanic, wantReason: "panic: boom"},
		{name: "panic error", f: func(*abi.Sensors, *abi.Decision) { panic(errors.New("bad")) }, wantStatus: abi.StatusPanic, wantReason: "panic: bad"},
		{name: "runtime error", f: func(s *abi.Sensors, d *abi.Decision) {
			var p *abi.Decision
			d.Tier = p.Tier
		}, wantStatus: abi.StatusPanic, wantReason: "panic: runtime error: invalid memory address or nil pointer derefer"},
		{name: "nil policy", f: nil, wantStatus: abi.StatusPanic, wantReason: "panic: edgellm policy-sdk: no policy registered "},
		{name: "bad sensors", f: bump, breakIn: true, wantStatus: abi.StatusBadSensors},
		{name: "bad decision", f: bump, breakOut: true, wantStatus: abi.StatusBadDecision},
	} {
		for _, wire := range []bool{false, true} {
			t.Run(tc.name+codecName(wire), func(t *testing.T) {
				s := abi.Sensors{CurTier: 2}
				pre := abi.Decision{Tier: 5}
				pre.SetReason(abi.ReasonNone, "prefill")
				in, out := encode(t, &s, &pre)
				if tc.breakIn {
					in[0] = 9 // major 9
				}
				if tc.breakOut {
					out = out[:10]
				}
				var x Exchange
				st := call(tc.f, &x, in, out, wire)
				if st != tc.wantStatus {
					t.Fatalf("status %v, want %v", st, tc.wantStatus)
				}
				if st == abi.StatusBadSensors || st == abi.StatusBadDecision {
					return
				}
				var d abi.Decision
				if err := abi.DecodeDecision(out, &d); err != nil {
					t.Fatal(err)
				}
				if st == abi.StatusPanic {
					if d.ReasonCode != abi.ReasonGuestPanic || d.Reason() != tc.wantReason[:min(len(tc.wantReason), abi.ReasonTextSize)] {
						t.Fatalf("panic reason %d %q, want %q", d.ReasonCode, d.Reason(), tc.wantReason)
					}
					return
				}
				if d.Tier != tc.wantTier || d.Reason() != tc.wantReason {
					t.Fatalf("decision tier %d reason %q, want %d %q", d.Tier, d.Reason(), tc.wantTier, tc.wantReason)
				}
			})
		}
	}
}

func codecName(wire bool) string {
	if wire {
		return "/wire"
	}
	return "/abi"
}

// TestCallNoAlloc: the guest's per-call path does not allocate, with either
// codec.
func TestCallNoAlloc(t *testing.T) {
	s := abi.Sensors{CurTier: 1}
	pre := abi.Decision{}
	in, out := encode(t, &s, &pre)
	var x Exchange
	for _, wire := range []bool{false, true} {
		n := testing.AllocsPerRun(1000, func() {
			if call(bump, &x, in, out, wire) != abi.StatusOK {
				t.Fatal("status")
			}
		})
		if n != 0 {
			t.Fatalf("%s: %v allocations per call, want 0", codecName(wire), n)
		}
	}
}

func TestRegister(t *testing.T) {
	defer Register(nil)
	Register(bump)
	if Registered() == nil {
		t.Fatal("Registered() = nil after Register")
	}
}
