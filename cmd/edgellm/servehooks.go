package main

import (
	"github.com/edgellm/edgellm/host"
	"github.com/spf13/pflag"
)

// serve's --stats-json and --gate-at: what `edgellm scenario run` needs to
// run a server as it runs `edgellm run` (a scenario with a serve: section).
// Token i of the statistics and the gate positions count the tokens the
// server generated since it started, across requests.

func addServeHookFlags(fs *pflag.FlagSet) {
	fs.String("stats-json", "", "write per-token timestamps, tier and decisions as JSONL to this file, tokens counted across requests (for edgellm scenario)")
	addGateFlags(fs)
}

// serveHooks are the open --stats-json file and token gate (each may be nil).
type serveHooks struct {
	stats *runStats
	gate  *tokenGate
}

// openServeHooks opens what o asks for; nil when it asks for nothing.
func openServeHooks(o runOptions, eng host.Engine) (*serveHooks, error) {
	gate, err := openGate(o.gateOptions)
	if err != nil {
		return nil, err
	}
	stats, err := openRunStats(o.StatsJSON, eng)
	if err != nil {
		gate.Close()
		return nil, err
	}
	if gate == nil && stats == nil {
		return nil, nil
	}
	return &serveHooks{stats: stats, gate: gate}, nil
}

// begin records the server's start; the gate re-reads live sensors after
// it opens, as run's does.
func (h *serveHooks) begin(a *host.Adapter) {
	if h.gate != nil && a != nil {
		h.gate.refresh = a.RefreshSensors
	}
	h.stats.begin(0, a)
}

// onToken is serve.Config.OnToken: token n (1-based, across requests) is
// recorded, then the gate holds the engine if n is a gate position.
func (h *serveHooks) onToken(n int, _ int32) error {
	h.stats.token(n - 1)
	return h.gate.pass(n)
}

// end records the server's totals (st.GeneratedTokens: all requests') and
// closes the files.
func (h *serveHooks) end(generated int, err error) error {
	h.stats.end(host.Stats{GeneratedTokens: generated}, err)
	h.gate.Close()
	return h.stats.Close()
}
