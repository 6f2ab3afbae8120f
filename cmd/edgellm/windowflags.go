package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/edgellm/edgellm/host"
	"github.com/spf13/pflag"
)

// The KV window as a user setting: what a policy's decision can set
// (window, anchors, per-layer windows), for users who run without one.

func addWindowFlags(fs *pflag.FlagSet) {
	fs.Int("window", 0, "keep only the most recent N positions of the KV cache plus --anchors; generation may then run past --ctx (0 = the whole context; native engine)")
	fs.Int("anchors", 0, "with --window: keep the first A positions too (attention sinks)")
	fs.String("layer-windows", "", "with --window: one window per layer, comma-separated (each 1..--window)")
	addEvictFlag(fs)
}

// addEvictFlag is --evict, for the window of --window or of a policy
// (serve has only the policy's).
func addEvictFlag(fs *pflag.FlagSet) {
	fs.String("evict", "drop", "with --window or a policy's window: what happens to a position leaving the window: drop, or merge it into the next (F16/F32 KV; native engine)")
}

type windowOptions struct {
	Window       int    `koanf:"window"`
	Anchors      int    `koanf:"anchors"`
	LayerWindows string `koanf:"layer-windows"`
	Evict        string `koanf:"evict"`
}

func (o windowOptions) set() bool { return o.Window != 0 || o.Anchors != 0 || o.LayerWindows != "" }

// applyWindow validates the window flags as a policy's decision is
// validated (non-negative, within the context, an engine that can evict)
// and applies them to sess. withPolicy: a policy owns the window then.
func applyWindow(c *cmdEnv, o windowOptions, eng host.Engine, sess host.Session, nCtx int, withPolicy bool) error {
	if err := applyEvict(c, o, eng, sess, withPolicy); err != nil {
		return err
	}
	if !o.set() {
		return nil
	}
	switch {
	case withPolicy:
		return usagef("--window/--anchors/--layer-windows and --policy both choose the KV window: use one")
	case o.Window < 0:
		return usagef("--window %d: want ≥ 0", o.Window)
	case o.Anchors < 0:
		return usagef("--anchors %d: want ≥ 0", o.Anchors)
	case o.Window == 0:
		return usagef("--anchors and --layer-windows need --window")
	case o.Anchors+o.Window+1 > nCtx:
		return usagef("--anchors %d + --window %d + 1 exceed --ctx %d", o.Anchors, o.Window, nCtx)
	}
	ws, ok := sess.(host.WindowSetter)
	if !ok {
		return usagef("--window: engine %s has no sliding KV window (use --engine native)", eng.Name())
	}
	if o.LayerWindows == "" {
		if err := ws.SetWindow(o.Anchors, o.Window); err != nil {
			return fmt.Errorf("--window %d --anchors %d: %w", o.Window, o.Anchors, err)
		}
		c.Logf("KV window: %d recent positions + %d anchors", o.Window, o.Anchors)
		return nil
	}
	lws, ok := sess.(host.LayerWindowSetter)
	if !ok {
		return usagef("--layer-windows: engine %s has no per-layer windows", eng.Name())
	}
	parts := strings.Split(o.LayerWindows, ",")
	if n := eng.Info().NLayer; len(parts) != n {
		return usagef("--layer-windows %q: %d values, the model has %d layers", o.LayerWindows, len(parts), n)
	}
	lw := make([]int, len(parts))
	for i, p := range parts {
		w, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || w < 1 || w > o.Window {
			return usagef("--layer-windows: layer %d window %q: want 1..%d (--window)", i, p, o.Window)
		}
		lw[i] = w
	}
	if err := lws.SetLayerWindows(o.Anchors, lw); err != nil {
		return fmt.Errorf("--layer-windows: %w", err)
	}
	c.Logf("KV windows per layer: %v + %d anchors", lw, o.Anchors)
	return nil
}

// applyEvict sets --evict: for the window of the flags or of a policy.
func applyEvict(c *cmdEnv, o windowOptions, eng host.Engine, sess host.Session, withPolicy bool) error {
	if o.Evict == "" || o.Evict == "drop" {
		return nil
	}
	if !o.set() && !withPolicy {
		return usagef("--evict %s needs --window or --policy", o.Evict)
	}
	es, ok := sess.(host.EvictSetter)
	if !ok {
		return usagef("--evict %s: engine %s cannot merge evicted positions (use --engine native)", o.Evict, eng.Name())
	}
	if err := es.SetEvictMode(o.Evict); err != nil {
		return usagef("--evict %s: %v", o.Evict, err)
	}
	c.Logf("KV eviction: %s", o.Evict)
	return nil
}
