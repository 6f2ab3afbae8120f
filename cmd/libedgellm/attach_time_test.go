package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/host/policy"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestPolicyAttachTime measures what edgellm_policy_attach costs (it runs
// host.AttachPolicy, which compiles the policy's WebAssembly with wazero):
// five attaches of the signed default policy without a compilation cache,
// and five with wazero's on-disk cache (a fresh directory: the first fills
// it), all in one process. A measurement, not an assertion (timings on a
// shared machine); opt in with EDGELLM_CAPI_ATTACH_TIMES=1. Numbers are in
// docs/STATUS.md "C API for apps".
func TestPolicyAttachTime(t *testing.T) {
	if os.Getenv("EDGELLM_CAPI_ATTACH_TIMES") == "" {
		t.Skip("a measurement: set EDGELLM_CAPI_ATTACH_TIMES=1")
	}
	model := sharedtest.Stories260K(t)
	bundles, key := signedBundles(t, t.TempDir())
	td, err := policy.ReadTrust(key)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := host.Load(model, host.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	cacheDir := filepath.Join(t.TempDir(), "wazero")
	measure := func(cache string) []time.Duration {
		var ds []time.Duration
		for range 5 {
			sess, err := eng.NewSession(host.SessionConfig{NCtx: 256})
			if err != nil {
				t.Fatal(err)
			}
			cfg := policy.NewConfig().WithTrustDir(td).WithCacheDir(cache)
			t0 := time.Now()
			ad, err := host.AttachPolicy(context.Background(), sess, host.PolicyOptions{Path: bundles[0], Config: &cfg})
			ds = append(ds, time.Since(t0))
			if err != nil {
				t.Fatal(err)
			}
			ad.Close()
			sess.Close()
		}
		return ds
	}
	none, disk := measure("-"), measure(cacheDir)
	med := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2]
	}
	t.Logf("attach without a cache: %v (median %v)", none, med(none))
	t.Logf("attach with the on-disk cache (first fills it): %v (median %v)", disk, med(disk))
}
