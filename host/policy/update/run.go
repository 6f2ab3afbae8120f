package update

import (
	"context"
	"errors"
	"time"

	"github.com/edgellm/edgellm/host/policy"
)

// Start puts the device's policy in service in rt and keeps it updated:
// it loads the last-good module (no network), runs one update check
// (bounded by Options.Timeout; a failure is logged and the last-good
// module keeps running), then checks every interval on a goroutine that
// rt.Close stops. The client must stay open until rt is closed; Start
// does not close it.
func Start(ctx context.Context, rt *policy.Runtime, c *Client, interval time.Duration) error {
	log := rt.Logger()
	lg, err := c.LastGood()
	if err != nil {
		log.Warn("policy update: last-good module not run", "err", err)
	}
	if lg != nil {
		m := policy.TrustedModule{Source: lg.Source, Name: lg.Name, Revision: lg.Revision, Wasm: lg.Wasm}
		if err := rt.LoadTrusted(ctx, m, false); err != nil {
			log.Warn("policy update: last-good module refused", "err", err)
		}
	}
	Apply(ctx, rt, c)
	if interval <= 0 {
		return nil
	}
	return rt.Go(func(done <-chan struct{}) {
		t := time.NewTicker(interval)
		defer t.Stop()
		cctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			<-done
			cancel()
		}()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				Apply(cctx, rt, c)
			}
		}
	})
}

// Apply runs one update check and puts a changed module in service,
// recording it as last-good once it serves. A revoked last-good module
// with no replacement is taken out of service. It returns the check's
// error (also logged).
func Apply(ctx context.Context, rt *policy.Runtime, c *Client) error {
	log := rt.Logger()
	u, err := c.Check(ctx)
	if errors.Is(err, ErrRevoked) {
		log.Warn("policy update: the policy in service was signed by a revoked key; built-in default until a replacement is published", "err", err)
		rt.Unload(ctx)
		c.Forget()
		return err
	}
	if err != nil {
		log.Warn("policy update: check failed, current policy kept", "err", err)
		return err
	}
	if u.Changed || rt.Revision() != u.Revision {
		m := policy.TrustedModule{Source: u.Source, Name: u.Name, Revision: u.Revision, Wasm: u.Wasm}
		if err := rt.LoadTrusted(ctx, m, u.Lower); err != nil {
			return err
		}
	}
	return c.Commit(u)
}
