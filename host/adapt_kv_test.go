package host

import (
	"bytes"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestAdapterKVType: on the native engine the policy limits allow f16, q8_0
// and q4_0 and a Decision.KVType change requantizes the session's KV
// between steps (fewer bytes per token); a type the arena cannot hold is
// refused and the decision keeps the current type; llamacpp keeps the KV
// type fixed (no KV types in the limits).
func TestAdapterKVType(t *testing.T) {
	model := sharedtest.Stories260K(t)
	eng, err := Load(model, LoadOptions{Engine: "native"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if got := policyLimits(eng, 64).KVTypes; len(got) != 3 || got[0] != abi.KVF16 || got[1] != abi.KVQ8_0 || got[2] != abi.KVQ4_0 {
		t.Fatalf("native limits: KV types %v, want f16 q8_0 q4_0", got)
	}
	for _, tc := range []struct {
		start, to, want abi.KVType
		ctx             int
		log             string
	}{
		{abi.KVF16, abi.KVQ4_0, abi.KVQ4_0, 64, "KV f16→q4_0 (requantized"},
		// 256 slots: q8_0 rows take 3 pages a region, f16 rows 4.
		{abi.KVQ8_0, abi.KVF16, abi.KVQ8_0, 256, "KV type f16 not applied"},
	} {
		sess, err := eng.NewSession(SessionConfig{NCtx: tc.ctx, Threads: 1, KVType: KVType(tc.start.String())})
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		if err := sess.Decode([]int32{1, 403, 407, 261}, LogitsLast); err != nil {
			t.Fatal(err)
		}
		var log bytes.Buffer
		a := &Adapter{eng: eng, sess: sess, log: &log, ctx: tc.ctx,
			cur: abi.Decision{Window: int32(tc.ctx), Threads: 1, CadenceSteps: DefaultCadence, KVType: tc.start}}
		ns := sess.(interface{ KVBytesPerToken() int64 })
		before := ns.KVBytesPerToken()
		d := a.cur
		d.KVType = tc.to
		if err := a.apply(3, d); err != nil {
			t.Fatal(err)
		}
		if a.cur.KVType != tc.want || !strings.Contains(log.String(), tc.log) {
			t.Errorf("%s → %s: decision on %s, log %q", tc.start, tc.to, a.cur.KVType, log.String())
		}
		if after := ns.KVBytesPerToken(); (tc.want != tc.start) != (after < before) {
			t.Errorf("%s → %s: KV bytes per token %d → %d", tc.start, tc.to, before, after)
		}
		if err := sess.Decode([]int32{378}, LogitsLast); err != nil {
			t.Fatalf("decode after the KV type change: %v", err)
		}
	}
	ll, err := Load(model, LoadOptions{Engine: "llamacpp"})
	if err != nil {
		t.Fatal(err)
	}
	defer ll.Close()
	if got := policyLimits(ll, 64).KVTypes; got != nil {
		t.Errorf("llamacpp limits: KV types %v, want none (fixed per session)", got)
	}
}
