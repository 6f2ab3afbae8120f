package policy

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/edgellm/edgellm/abi"
)

// This file is the runtime's side of the TUF update channel
// (host/policy/update): modules whose trust was established by The Update
// Framework's metadata rather than by a bundle signature.

// TrustedModule is a module whose signature, digest, freshness and
// rollback protection were checked by the update channel.
type TrustedModule struct {
	Source   string // where it came from (for messages): "repo URL#name.wasm"
	Name     string
	Revision int64
	Wasm     []byte
}

// LoadTrusted compiles and instantiates m and puts it in service. It does
// not check a signature or the rollback index: the caller (the TUF
// updater) did; an equal revision is accepted (a restart re-loads the
// last-good module), a lower one only when allowLower is set (the updater
// recovered from a revoked key).
func (r *Runtime) LoadTrusted(ctx context.Context, m TrustedModule, allowLower bool) error {
	if r.closed.Load() {
		return ErrClosed
	}
	err := r.installTrusted(ctx, m, allowLower)
	if err != nil {
		r.c.loadErrors.Add(1)
		r.log.Warn("policy: load refused, current policy kept", "path", m.Source, "err", err)
	}
	return err
}

func (r *Runtime) installTrusted(ctx context.Context, m TrustedModule, allowLower bool) error {
	if m.Revision <= 0 {
		return loadErrorf(m.Source, ErrManifest, "revision %d: must be > 0", m.Revision)
	}
	if int64(len(m.Wasm)) > r.cfg.bundle.MaxFileBytes {
		return loadErrorf(m.Source, ErrBundleTooLarge, "module is %d bytes, limit %d", len(m.Wasm), r.cfg.bundle.MaxFileBytes)
	}
	mod, err := r.compile(ctx, m.Source, m.Wasm)
	if err != nil {
		return err
	}
	mod.name, mod.revision = m.Name, m.Revision
	inst, err := r.instantiate(ctx, mod)
	if err != nil {
		mod.close(ctx)
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if m.Revision < r.maxRevision && !allowLower {
		inst.close(ctx)
		mod.close(ctx)
		return loadErrorf(m.Source, ErrOldRevision, "revision %d is older than %d (in service)", m.Revision, r.maxRevision)
	}
	r.maxRevision = m.Revision
	old := r.cur
	if old != nil && !old.quarantined.Load() {
		if r.prevGood != nil && r.prevGood != old {
			r.prevGood.close(ctx)
		}
		r.prevGood = old
	}
	r.c.loads.Add(1)
	r.publish(ctx, mod, inst)
	r.log.Info("policy: loaded", "module", mod.String(), "path", m.Source, "generation", mod.gen)
	return nil
}

// Unload takes the module in service (and the previous good one) out of
// service: Decide answers with the built-in default from the next call.
// The update channel uses it when the key that signed the module in
// service was revoked and the repository offers no replacement.
func (r *Runtime) Unload(ctx context.Context) {
	if r.closed.Load() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.prevGood != nil && r.prevGood != r.cur {
		r.prevGood.close(ctx)
	}
	r.prevGood = nil
	r.maxRevision = 0
	r.publish(ctx, nil, nil)
}

// Go runs f on a goroutine that Close stops (done is closed) and waits
// for. It returns ErrClosed after Close.
func (r *Runtime) Go(f func(done <-chan struct{})) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Load() {
		return ErrClosed
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		f(r.stop)
	}()
	return nil
}

// Logger is the runtime's logger.
func (r *Runtime) Logger() *slog.Logger { return r.log }

// ValidateModule runs the host's loader on wasm without putting it in
// service: size limit, Wasm validation, the import and export checks,
// instantiation under the init timeout and the ABI major. It returns the
// ABI version the module speaks. `edgellm policy repo add` calls it before
// anything is signed.
func ValidateModule(ctx context.Context, cfg Config, wasm []byte) (abi.Version, error) {
	if int64(len(wasm)) > cfg.bundle.MaxFileBytes {
		return abi.Version{}, loadErrorf("module", ErrBundleTooLarge, "module is %d bytes, limit %d", len(wasm), cfg.bundle.MaxFileBytes)
	}
	r, err := NewRuntime(ctx, cfg)
	if err != nil {
		return abi.Version{}, err
	}
	defer r.Close(ctx)
	mod, err := r.compile(ctx, "module", wasm)
	if err != nil {
		return abi.Version{}, err
	}
	defer mod.close(ctx)
	inst, err := r.instantiate(ctx, mod)
	if err != nil {
		return abi.Version{}, err
	}
	v := inst.version
	inst.close(ctx)
	return v, nil
}

// CheckCompat checks an ABI version ("MAJOR.MINOR") and a minimum engine
// version against this host, as a bundle's manifest is checked.
func CheckCompat(source, abiVersion, minEngine, engineVersion string) error {
	if engineVersion == "" {
		return fmt.Errorf("CheckCompat: no engine version")
	}
	return checkCompat(source, &Manifest{ABIVersion: abiVersion, MinEngineVersion: minEngine}, engineVersion, nil)
}
