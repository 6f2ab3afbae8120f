package policy

import (
	"errors"
	"fmt"
)

// Kinds of load failure. A *LoadError wraps exactly one of them, so callers
// test with errors.Is(err, policy.ErrDigestMismatch).
var (
	ErrNotPolicy       = errors.New("not a Wasm module or policy bundle")
	ErrInsecure        = errors.New("loose or unsigned policy refused (no insecure flag)")
	ErrNoTrustedKey    = errors.New("no trusted key configured")
	ErrBadSignature    = errors.New("bad signature")
	ErrDigestMismatch  = errors.New("digest mismatch")
	ErrBundleTooLarge  = errors.New("bundle too large")
	ErrBundleTruncated = errors.New("bundle truncated")
	ErrBundleLayout    = errors.New("bad bundle layout")
	ErrManifest        = errors.New("bad manifest")
	ErrOldRevision     = errors.New("revision not newer than the current one")
	ErrEngineTooOld    = errors.New("engine older than the bundle's min_engine_version")
	ErrABIVersion      = errors.New("unsupported ABI version")
	ErrModule          = errors.New("invalid policy module")
	ErrUnknownImport   = errors.New("unknown import")
	ErrInstantiate     = errors.New("instantiation failed")
	ErrExpired         = errors.New("bundle expired")
	ErrKeyRevoked      = errors.New("signing key revoked")
	ErrRollbackState   = errors.New("rollback state unusable")
)

// Errors of Decide itself (not guest failures, which are reported in Result).
var (
	ErrClosed           = errors.New("policy runtime closed")
	ErrConcurrentDecide = errors.New("Decide called concurrently (one goroutine at a time)")
)

// LoadError is why a module or bundle was refused. The current policy keeps
// running whenever a load fails.
type LoadError struct {
	Path   string // the file or directory being loaded
	Kind   error  // one of the Err* kinds above
	Detail string // precise, human-readable
}

func (e *LoadError) Error() string {
	if e.Detail == "" {
		return e.Path + ": " + e.Kind.Error()
	}
	return e.Path + ": " + e.Detail
}

func (e *LoadError) Unwrap() error { return e.Kind }

func loadErrorf(path string, kind error, format string, args ...any) *LoadError {
	return &LoadError{Path: path, Kind: kind, Detail: fmt.Sprintf(format, args...)}
}

// ConfigError is an invalid Config, reported by NewRuntime.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return "policy config: " + e.Msg }

func configErrorf(format string, args ...any) error {
	return &ConfigError{Msg: fmt.Sprintf(format, args...)}
}
