package policy

import (
	"testing"

	"github.com/edgellm/edgellm/abi"
)

// TestApply: fields the engine cannot change and "leave as is" values keep
// the decision in force; the rest is taken.
func TestApply(t *testing.T) {
	cur := abi.Decision{Tier: 1, SpecK: 2, Window: 512, Anchors: 4, Threads: 4, CadenceSteps: 16, KVType: abi.KVF16}
	cur.LayerBits[0], cur.LayerBits[1] = 8, 8
	cur.LayerWindowScale[0] = 0.5
	d := abi.Decision{Tier: 2, SpecK: 3, Window: 256, Anchors: 2, Threads: 0, CadenceSteps: 8, KVType: abi.KVUnknown}
	d.LayerBits[1] = 4
	d.SetReason(abi.ReasonThermal, "hot")

	got := Apply(cur, d, AllAbilities)
	want := cur
	want.Tier, want.SpecK, want.Window, want.Anchors, want.CadenceSteps = 2, 3, 256, 2, 8
	want.LayerBits[1] = 4
	want.LayerWindowScale[0] = 0 // taken whole: back to the full window
	want.ReasonCode, want.ReasonLen, want.ReasonText = d.ReasonCode, d.ReasonLen, d.ReasonText
	if got != want {
		t.Fatalf("every ability:\n got %+v\nwant %+v", got, want)
	}

	got = Apply(cur, d, Abilities{})
	want = cur
	want.CadenceSteps = 8
	want.ReasonCode, want.ReasonLen, want.ReasonText = d.ReasonCode, d.ReasonLen, d.ReasonText
	if got != want {
		t.Fatalf("no ability:\n got %+v\nwant %+v", got, want)
	}

	d.Threads, d.KVType = 2, abi.KVQ8_0
	if got := Apply(cur, d, Abilities{Threads: true}); got.Threads != 2 || got.KVType != abi.KVF16 {
		t.Fatalf("threads only: threads %d kv %v", got.Threads, got.KVType)
	}

	// 1.1: the draft fields go with speculation, 0 leaving them as is.
	cur.SpecPMin, cur.DraftThreads, cur.DraftCPUMask, cur.VerifyCPUMask = 0.5, 1, 0b01, 0b10
	d.SpecPMin, d.DraftThreads, d.DraftCPUMask, d.VerifyCPUMask = 0.25, 0, 0b11, 0b11
	got = Apply(cur, d, Abilities{SpecK: true})
	if got.SpecPMin != 0.25 || got.DraftThreads != 1 || got.DraftCPUMask != 0b11 || got.VerifyCPUMask != 0b10 {
		t.Fatalf("speculation only: %+v", got)
	}
	if got = Apply(cur, d, Abilities{CPUMask: true}); got.SpecPMin != 0.5 || got.VerifyCPUMask != 0b11 {
		t.Fatalf("CPU mask only: %+v", got)
	}

	// 1.4: repacked layers, a negative count leaving them as they are.
	cur.RepackLayers = 17
	for _, tc := range []struct {
		can       Abilities
		ask, want int32
	}{
		{Abilities{Repack: true}, 4, 4},
		{Abilities{Repack: true}, 0, 0},
		{Abilities{Repack: true}, -1, 17},
		{AllAbilities, 9, 9},
		{Abilities{Threads: true}, 4, 17},
	} {
		d.RepackLayers = tc.ask
		if got := Apply(cur, d, tc.can); got.RepackLayers != tc.want {
			t.Errorf("repack %d with %+v: %d, want %d", tc.ask, tc.can, got.RepackLayers, tc.want)
		}
	}

	// 1.6: the draft request passes only to an engine that has the ability,
	// and is a request: the result never keeps cur's.
	cur.Draft = abi.DraftDetach
	for _, tc := range []struct {
		can       Abilities
		ask, want int32
	}{
		{Abilities{Draft: true}, abi.DraftDetach, abi.DraftDetach},
		{Abilities{Draft: true}, abi.DraftAttach, abi.DraftAttach},
		{Abilities{Draft: true}, abi.DraftLeave, abi.DraftLeave},
		{Abilities{Draft: true}, 7, abi.DraftLeave},
		{AllAbilities, abi.DraftDetach, abi.DraftDetach},
		{Abilities{SpecK: true}, abi.DraftDetach, abi.DraftLeave},
	} {
		d.Draft = tc.ask
		if got := Apply(cur, d, tc.can); got.Draft != tc.want {
			t.Errorf("draft %d with %+v: %d, want %d", tc.ask, tc.can, got.Draft, tc.want)
		}
	}
}
