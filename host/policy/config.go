package policy

import (
	"crypto/ed25519"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// Defaults of a Config made by NewConfig.
const (
	DefaultDeadline         = 5 * time.Millisecond
	DefaultInitTimeout      = 2 * time.Second
	DefaultMemoryLimitPages = 256 // 16 MiB of guest memory
	DefaultMaxFailures      = 3
	DefaultMaxBundleBytes   = 16 << 20
	DefaultMaxBundleEntries = 8
	DefaultReloadDebounce   = 50 * time.Millisecond
	DefaultLogQueue         = 1024
)

// Config is the immutable configuration of a Runtime. Make one with NewConfig
// and derive variants with the With methods, each of which returns a copy.
// Values are validated once, by NewRuntime.
type Config struct {
	deadline      time.Duration
	initTimeout   time.Duration
	memPages      uint32
	cacheDir      string // "" = default under os.UserCacheDir(); "-" = in-memory only
	maxFailures   int
	trusted       []ed25519.PublicKey
	revoked       []string // key IDs
	clockSkew     time.Duration
	now           func() time.Time // nil = time.Now
	stateDir      string           // "" = rollback index in memory only
	insecure      bool
	logger        *slog.Logger
	limits        Limits
	bundle        BundleLimits
	engineVersion string
	debounce      time.Duration
	declog        DecisionLogConfig
	queue         int
	// noInstrument (tests and benchmarks only) loads every module on the
	// fallback runtime, as if instrument had refused it.
	noInstrument bool
}

// NewConfig returns the default configuration: a 5 ms per-call deadline,
// 256 pages (16 MiB) of guest memory, quarantine after 3 consecutive
// failures, the on-disk compilation cache under os.UserCacheDir(), bundles
// only (no trusted key yet: add one with WithTrustedKey), and engine limits
// DefaultLimits().
func NewConfig() Config {
	return Config{
		deadline:    DefaultDeadline,
		initTimeout: DefaultInitTimeout,
		memPages:    DefaultMemoryLimitPages,
		maxFailures: DefaultMaxFailures,
		logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		limits:      DefaultLimits(),
		bundle:      BundleLimits{MaxFileBytes: DefaultMaxBundleBytes, MaxTotalBytes: DefaultMaxBundleBytes, MaxEntries: DefaultMaxBundleEntries},
		debounce:    DefaultReloadDebounce,
		queue:       DefaultLogQueue,
		clockSkew:   DefaultClockSkew,
	}
}

// WithDeadline sets the wall-clock budget of one decide call. A call that
// overruns it while running is stopped at its next termination check and
// counted as a failure. On Linux (with cgo) a call that overran it because
// its thread was waiting for a CPU, not running, is kept going, up to 100
// deadlines of wall time (deadline.go). Zero turns the deadline off: modules run without termination
// checks, a runaway guest (and a start function that never returns) can
// never be stopped; use it only for trusted modules and measurements.
func (c Config) WithDeadline(d time.Duration) Config { c.deadline = d; return c }

// WithInitTimeout bounds instantiation (start function, _initialize).
func (c Config) WithInitTimeout(d time.Duration) Config { c.initTimeout = d; return c }

// WithMemoryLimitPages caps the guest's linear memory in 64 KiB pages.
func (c Config) WithMemoryLimitPages(n uint32) Config { c.memPages = n; return c }

// WithCacheDir sets the directory of wazero's on-disk compilation cache.
// "" means the default, os.UserCacheDir()/edgellm/wazero; "-" disables the
// on-disk cache (compiled code is then cached in memory only).
func (c Config) WithCacheDir(dir string) Config { c.cacheDir = dir; return c }

// WithMaxFailures sets K: after K consecutive failed calls a module is
// quarantined and the previous good module (or the built-in default) restored.
func (c Config) WithMaxFailures(k int) Config { c.maxFailures = k; return c }

// WithTrustedKey adds a public key whose bundle signatures are accepted.
func (c Config) WithTrustedKey(pub ed25519.PublicKey) Config {
	c.trusted = append(append([]ed25519.PublicKey(nil), c.trusted...), pub)
	return c
}

// WithRevokedKey refuses bundles signed by the key with this KeyID, even
// when it is also trusted.
func (c Config) WithRevokedKey(keyID string) Config {
	c.revoked = append(append([]string(nil), c.revoked...), keyID)
	return c
}

// WithTrustDir trusts td's keys and revokes its revoked IDs (ReadTrustDir).
func (c Config) WithTrustDir(td TrustDir) Config {
	for _, k := range td.Keys {
		c = c.WithTrustedKey(k)
	}
	for _, id := range td.Revoked {
		c = c.WithRevokedKey(id)
	}
	return c
}

// WithClockSkew sets how long after its expires time a bundle is still
// accepted (default DefaultClockSkew).
func (c Config) WithClockSkew(d time.Duration) Config { c.clockSkew = d; return c }

// WithClock replaces time.Now for expiry checks (tests).
func (c Config) WithClock(now func() time.Time) Config { c.now = now; return c }

// WithStateDir keeps the rollback index (the highest accepted revision of
// each policy name) in dir/rollback.json, so that it survives restarts; see
// RollbackIndex. "" (the default) keeps it in memory only.
func (c Config) WithStateDir(dir string) Config { c.stateDir = dir; return c }

// WithInsecure allows loose .wasm files and unsigned bundles. Signed bundles
// are still verified when a trusted key is configured.
func (c Config) WithInsecure(insecure bool) Config { c.insecure = insecure; return c }

// WithLogger sets the slog logger for failures, clamps, reloads and
// quarantines. Logging happens off the hot path.
func (c Config) WithLogger(l *slog.Logger) Config { c.logger = l; return c }

// WithLimits sets what the engine can do; decisions are clamped to it.
func (c Config) WithLimits(l Limits) Config { c.limits = l; return c }

// WithBundleLimits sets the decompression-bomb limits for bundles.
func (c Config) WithBundleLimits(b BundleLimits) Config { c.bundle = b; return c }

// WithEngineVersion overrides the engine version bundles are checked against
// (default buildinfo.Version).
func (c Config) WithEngineVersion(v string) Config { c.engineVersion = v; return c }

// WithReloadDebounce sets how long Watch waits for a burst of file events to
// settle before it reloads.
func (c Config) WithReloadDebounce(d time.Duration) Config { c.debounce = d; return c }

// WithDecisionLog enables the JSONL decision log.
func (c Config) WithDecisionLog(l DecisionLogConfig) Config { c.declog = l; return c }

// DecisionLog returns the decision log's configuration.
func (c Config) DecisionLog() DecisionLogConfig { return c.declog }

// WithEventQueue sets the capacity of the queue between Decide and the
// goroutine that logs; events beyond it are dropped and counted.
func (c Config) WithEventQueue(n int) Config { c.queue = n; return c }

// Deadline returns the per-call deadline.
func (c Config) Deadline() time.Duration { return c.deadline }

// Limits returns the engine limits decisions are clamped to.
func (c Config) Limits() Limits { return c.limits }

func (c Config) validate() error {
	switch {
	case c.deadline < 0:
		return configErrorf("deadline %v is negative", c.deadline)
	case c.initTimeout <= 0:
		return configErrorf("init timeout %v must be positive", c.initTimeout)
	case c.memPages == 0 || c.memPages > 65536:
		return configErrorf("memory limit %d pages is out of range [1, 65536]", c.memPages)
	case c.maxFailures < 1:
		return configErrorf("max failures %d must be at least 1", c.maxFailures)
	case c.bundle.MaxFileBytes <= 0 || c.bundle.MaxTotalBytes <= 0 || c.bundle.MaxEntries < 3:
		return configErrorf("bundle limits %+v: sizes must be positive and entries at least 3", c.bundle)
	case c.queue < 1:
		return configErrorf("event queue %d must be at least 1", c.queue)
	case c.debounce < 0:
		return configErrorf("reload debounce %v is negative", c.debounce)
	case c.clockSkew < 0:
		return configErrorf("clock skew %v is negative", c.clockSkew)
	}
	for _, id := range c.revoked {
		if !validKeyID(id) {
			return configErrorf("revoked key ID %q is not %d lowercase hex digits", id, KeyIDLen)
		}
	}
	for i, k := range c.trusted {
		if len(k) != ed25519.PublicKeySize {
			return configErrorf("trusted key %d has %d bytes, want %d", i, len(k), ed25519.PublicKeySize)
		}
	}
	if err := c.limits.validate(); err != nil {
		return err
	}
	return c.declog.validate()
}

// resolvedCacheDir returns the compilation cache directory, "" for none.
func (c Config) resolvedCacheDir() string {
	switch c.cacheDir {
	case "-":
		return ""
	case "":
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		return filepath.Join(base, "edgellm", "wazero")
	}
	return c.cacheDir
}

func (c Config) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// BundleLimits returns the decompression-bomb limits for bundles.
func (c Config) BundleLimits() BundleLimits { return c.bundle }
