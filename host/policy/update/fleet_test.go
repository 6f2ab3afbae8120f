package update

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/policy"
	"github.com/theupdateframework/go-tuf/v2/metadata"
)

// Fleet simulation (SIMULATED devices: update clients in one process, no
// model; the "generating" devices run policy.Runtime.Decide as their
// decode steps): N devices, each with its own state directory, poll one
// loopback repository while the operator publishes revisions, rotates
// the timestamp key and revokes one of the two targets keys.

type fleetResult struct {
	devices, revisions int
	converge           time.Duration // last publish -> every device committed the last revision
	bytesPerUpdate     float64       // bytes served / updates committed
	updates            int64
	checks             int64
	decideSteps        int64
	decideFailures     int64
}

func runFleet(t testing.TB, devices, revisions, generating int, poll time.Duration) fleetResult {
	r := newRepo(t, InitOptions{TargetsKeys: 2, TargetsThreshold: 1})
	if _, err := policy.ValidateModule(context.Background(), testPolicyConfig(), variant(t, 1)); err != nil {
		t.Fatal(err)
	}
	add := func(rev int) {
		if _, err := r.Add(variant(t, rev), AddOptions{Name: "fleet", ABIMajor: 1}); err != nil {
			t.Fatal(err)
		}
		if err := r.Publish(Expiries{}); err != nil {
			t.Fatal(err)
		}
	}
	add(1)
	srv := newServer(t, r.PublishedDir())
	root := r.rootBytes(t)
	revokedKey := r.root.Signed.Roles[RoleTargets].KeyIDs[0]
	var revokedAtRoot atomic.Int64 // root version that revoked it (0: not yet)

	var (
		stop                        = make(chan struct{})
		wg                          sync.WaitGroup
		mu                          sync.Mutex
		failures                    []string
		updates, steps, stepFailure atomic.Int64
		lastRev                     = make([]atomic.Int64, devices)
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	clients := make([]*Client, devices)
	for i := range devices {
		clients[i] = device(t, srv.URL, root, t.TempDir(), "fleet", r.clk, func(o *Options) { o.Timeout = 30 * time.Second })
	}
	for i := range devices {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := clients[i]
			var rt *policy.Runtime
			if i < generating {
				rt = newPolicyRuntime(t)
			}
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			for {
				select {
				case <-stop:
					return
				case <-time.After(poll/2 + time.Duration(rng.Int64N(int64(poll)))):
				}
				u, err := c.Check(context.Background())
				if err != nil {
					continue // a check during a publish may see a half-written file; the next one will not
				}
				if u.Revision < lastRev[i].Load() {
					fail("device %d: revision %d after %d", i, u.Revision, lastRev[i].Load())
				}
				if rv := revokedAtRoot.Load(); rv > 0 && u.RootVersion >= rv {
					// Under a root that revoked the key, the targets
					// must verify without any signature of it.
					tg, _ := metadata.Targets().FromBytes(u.targets)
					rootMD, _ := metadata.Root().FromBytes(u.root)
					kept := tg.Signatures[:0]
					for _, s := range tg.Signatures {
						if s.KeyID != revokedKey {
							kept = append(kept, s)
						}
					}
					tg.Signatures = kept
					if err := rootMD.VerifyDelegate(RoleTargets, tg); err != nil {
						fail("device %d: revision %d accepted under root %d only by the revoked key: %v", i, u.Revision, u.RootVersion, err)
					}
				}
				if rt != nil && u.Changed {
					if err := rt.LoadTrusted(context.Background(), policy.TrustedModule{Source: u.Source, Name: u.Name, Revision: u.Revision, Wasm: u.Wasm}, false); err != nil {
						fail("device %d: load revision %d: %v", i, u.Revision, err)
						continue
					}
				}
				if err := c.Commit(u); err != nil {
					fail("device %d: commit: %v", i, err)
					continue
				}
				if u.Changed {
					updates.Add(1)
				}
				lastRev[i].Store(u.Revision)
				if rt != nil {
					// Decode steps between checks.
					for range 50 {
						s := abi.Sensors{Present: abi.PresentMemAvailable, MemAvailableMB: 4000, CtxLen: 10, TiersAvailable: 4, LayerCount: 8}
						d := abi.Decision{KVType: abi.KVF16}
						res, err := rt.Decide(context.Background(), &s, &d)
						steps.Add(1)
						if err != nil || res.Outcome != policy.OutcomeOK {
							stepFailure.Add(1)
						}
					}
				}
			}
		}(i)
	}
	for rev := 2; rev <= revisions; rev++ {
		time.Sleep(poll / 4)
		add(rev)
		switch rev {
		case revisions / 3:
			if _, err := r.RotateKey(RoleTimestamp, "", Expiries{}); err != nil {
				t.Fatal(err)
			}
		case 2 * revisions / 3:
			if err := r.Revoke(revokedKey, Expiries{}); err != nil {
				t.Fatal(err)
			}
			revokedAtRoot.Store(r.root.Signed.Version)
		}
	}
	published := time.Now()
	deadline := published.Add(60 * time.Second)
	for {
		done := 0
		for i := range devices {
			if lastRev[i].Load() == int64(revisions) {
				done++
			}
		}
		if done == devices {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fleet did not converge: %d of %d devices at revision %d after 60 s", done, devices, revisions)
		}
		time.Sleep(time.Millisecond)
	}
	res := fleetResult{devices: devices, revisions: revisions, converge: time.Since(published)}
	close(stop)
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	for _, c := range clients {
		res.checks += c.Stats().Checks
	}
	res.updates = updates.Load()
	res.bytesPerUpdate = float64(srv.bytes.Load()) / float64(res.updates)
	res.decideSteps, res.decideFailures = steps.Load(), stepFailure.Load()
	if res.decideFailures != 0 {
		t.Errorf("%d of %d decide steps failed on generating devices", res.decideFailures, res.decideSteps)
	}
	if generating > 0 && res.decideSteps == 0 {
		t.Error("generating devices ran no decide steps")
	}
	return res
}

func (f fleetResult) String() string {
	return fmt.Sprintf("SIMULATED fleet: %d devices, %d revisions, timestamp key rotated, 1 targets key revoked: converged %v after the last publish; %d updates, %d checks, %.0f bytes served per device per update; decide steps %d, failed %d",
		f.devices, f.revisions, f.converge.Round(time.Millisecond), f.updates, f.checks, f.bytesPerUpdate, f.decideSteps, f.decideFailures)
}

// TestFleetShort is the short fleet run of `make test`: 20 devices, 50
// revisions.
func TestFleetShort(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	res := runFleet(t, 20, 50, 2, 20*time.Millisecond)
	t.Log(res)
}

// BenchmarkFleet200 is the fleet of issue #27 (`make bench`): 200
// devices, 50 revisions.
func BenchmarkFleet200(b *testing.B) {
	for range b.N {
		res := runFleet(b, 200, 50, 4, 100*time.Millisecond)
		b.ReportMetric(res.converge.Seconds(), "converge-s")
		b.ReportMetric(res.bytesPerUpdate, "bytes/update")
		b.Log(res)
	}
}
