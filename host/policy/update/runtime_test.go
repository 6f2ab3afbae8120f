package update

import (
	"context"
	"errors"
	"testing"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/policy"
)

func newPolicyRuntime(t testing.TB) *policy.Runtime {
	t.Helper()
	rt, err := policy.NewRuntime(context.Background(), testPolicyConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	return rt
}

func decideRevision(t testing.TB, rt *policy.Runtime) int64 {
	t.Helper()
	s := abi.Sensors{Present: abi.PresentMemAvailable, MemAvailableMB: 4000, CtxLen: 10, TiersAvailable: 4, LayerCount: 8}
	d := abi.Decision{KVType: abi.KVF16}
	res, err := rt.Decide(context.Background(), &s, &d)
	if err != nil {
		t.Fatal(err)
	}
	return res.Revision
}

// The runtime side: a restart runs the last-good module before any
// network; a revoked key takes the module out of service at the next
// check, without a restart; the replacement comes in at the check after.
func TestRuntimeBootUpdateRevoke(t *testing.T) {
	r := newRepo(t, InitOptions{TargetsKeys: 2, TargetsThreshold: 1})
	r.publish(t, "fleet", variant(t, 1))
	srv := newServer(t, r.PublishedDir())
	state := t.TempDir()
	ctx := context.Background()

	rt := newPolicyRuntime(t)
	c := device(t, srv.URL, r.rootBytes(t), state, "fleet", r.clk, nil)
	if err := Start(ctx, rt, c, 0); err != nil {
		t.Fatal(err)
	}
	if got := decideRevision(t, rt); got != 1 {
		t.Fatalf("first boot: deciding with revision %d, want 1", got)
	}
	rt.Close(ctx)
	c.Close()

	// Reboot with the repository unreachable: the last-good module runs.
	rt = newPolicyRuntime(t)
	c = device(t, "http://127.0.0.1:1/", r.rootBytes(t), state, "fleet", r.clk, nil)
	Start(ctx, rt, c, 0)
	if got := decideRevision(t, rt); got != 1 {
		t.Fatalf("offline reboot: deciding with revision %d, want 1 (never the built-in default)", got)
	}
	rt.Close(ctx)
	c.Close()

	rt = newPolicyRuntime(t)
	c = device(t, srv.URL, r.rootBytes(t), state, "fleet", r.clk, nil)
	Start(ctx, rt, c, 0)
	r.publish(t, "fleet", variant(t, 2))
	if err := Apply(ctx, rt, c); err != nil {
		t.Fatal(err)
	}
	if got := decideRevision(t, rt); got != 2 {
		t.Fatalf("update: revision %d, want 2", got)
	}
	// Revision 2 was signed with both targets keys listed; the operator
	// revokes every key that signed it by rotating the targets role,
	// and removes the policy: the device drops it at the next check.
	if err := r.Remove("fleet"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.RotateKey(RoleTargets, "", Expiries{}); err != nil {
		t.Fatal(err)
	}
	if err := Apply(ctx, rt, c); !errors.Is(err, ErrRevoked) {
		t.Fatalf("revoked, no replacement: want ErrRevoked, got %v", err)
	}
	if got := decideRevision(t, rt); got != 0 {
		t.Fatalf("after revocation: deciding with revision %d, want the built-in default (0)", got)
	}
	if lg, _ := c.LastGood(); lg != nil {
		t.Fatalf("a revoked last-good module is still recorded: revision %d", lg.Revision)
	}
	// The replacement, signed by the new key.
	r.publish(t, "fleet", variant(t, 3))
	if err := Apply(ctx, rt, c); err != nil {
		t.Fatal(err)
	}
	if got := decideRevision(t, rt); got != 1 {
		t.Fatalf("replacement: revision %d, want 1 (the name's numbering restarted after removal)", got)
	}
}
