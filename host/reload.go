package host

import "context"

// Load verifies the policy at path and swaps it in: the next decision comes
// from it. It is safe to call while another goroutine generates with the
// adapter; a refused bundle (bad signature, a revision not above the
// running one) leaves the running policy in place.
func (a *Adapter) Load(ctx context.Context, path string) error { return a.rt.LoadFile(ctx, path) }

// Revision is the manifest revision of the running policy (0 for an
// unsigned module or none).
func (a *Adapter) Revision() int64 { return a.rt.Revision() }

// DecisionRevision is the manifest revision of the module that made the
// last decision (0 for an unsigned module or none). Revision may already
// be newer: a bundle swapped in during or after that call serves the next
// one, so a decision is credited to the module that made it.
func (a *Adapter) DecisionRevision() int64 { return a.decRev }
