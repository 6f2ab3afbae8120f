package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/pflag"
)

// The token gate ties a scenario's pressure to token positions. `edgellm
// scenario run` starts the engine with --gate-at N1,N2,… and the read end of
// a pipe as file descriptor --gate-fd. Once the engine has emitted N
// tokens, for each N in the list, it blocks reading one byte from that
// descriptor before it calls the policy for step N and decodes token N. The
// runner writes the byte only after the pressure scheduled at token N is in
// place (the hog's pages are resident, the CPU quota is written), so the
// outcome of a scenario does not depend on how fast the machine decodes.
// The gate is for the scenario runner; users have no reason to set it.

func addGateFlags(fs *pflag.FlagSet) {
	fs.IntSlice("gate-at", nil, "after emitting each of these token counts, wait for one byte on --gate-fd before going on (edgellm scenario's pressure gate)")
	fs.Int("gate-fd", 3, "file descriptor --gate-at reads from")
	fs.MarkHidden("gate-at")
	fs.MarkHidden("gate-fd")
}

type gateOptions struct {
	GateAt []int `koanf:"gate-at"`
	GateFD int   `koanf:"gate-fd"`
}

// tokenGate blocks the decode loop at the gate positions. A nil *tokenGate
// never blocks.
type tokenGate struct {
	at      []int // ascending
	f       *os.File
	refresh func() // called after passing a gate (re-read live sensors)
}

// openGate returns nil when no gate was asked for.
func openGate(o gateOptions) (*tokenGate, error) {
	if len(o.GateAt) == 0 {
		return nil, nil
	}
	at := slices.Clone(o.GateAt)
	slices.Sort(at)
	if at[0] <= 0 {
		return nil, usagef("--gate-at %d: want token counts ≥ 1", at[0])
	}
	if o.GateFD < 3 {
		return nil, usagef("--gate-fd %d: want an inherited descriptor ≥ 3", o.GateFD)
	}
	f := os.NewFile(uintptr(o.GateFD), "gate")
	if f == nil {
		return nil, fmt.Errorf("--gate-fd %d: not an open file descriptor", o.GateFD)
	}
	return &tokenGate{at: slices.Compact(at), f: f}, nil
}

// pass is called after n tokens have been emitted. At a gate position it
// waits for the runner's byte. End of file (the runner is gone) lets the
// engine go on; it dies with its parent anyway (Pdeathsig).
func (g *tokenGate) pass(n int) error {
	if g == nil || len(g.at) == 0 || g.at[0] != n {
		return nil
	}
	g.at = g.at[1:]
	var b [1]byte
	if _, err := g.f.Read(b[:]); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("--gate-fd: %w", err)
	}
	if g.refresh != nil {
		g.refresh()
	}
	return nil
}

// Close closes the descriptor.
func (g *tokenGate) Close() error {
	if g == nil {
		return nil
	}
	return g.f.Close()
}
