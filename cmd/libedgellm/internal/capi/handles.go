package capi

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/host/sensors"
)

// Handles are numbers from one table: the kind in the top byte, then a
// sequence number that is never reused, so a freed handle stays invalid
// forever and a forged one is found nowhere. No pointer is ever handed to C.
type kind uint64

const (
	kindEngine kind = iota + 1
	kindSession
	kindPolicy
)

var kindNames = [...]string{kindEngine: "engine", kindSession: "session", kindPolicy: "policy"}

type table struct {
	mu   sync.Mutex
	next uint64
	m    map[uint64]any
}

var handles = table{m: map[uint64]any{}}

func (t *table) add(k kind, v any) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next++
	h := uint64(k)<<56 | t.next
	t.m[h] = v
	return h
}

// get returns the object of handle h, which must be of kind k.
func get[T any](h uint64, k kind) (T, error) {
	var zero T
	handles.mu.Lock()
	v, ok := handles.m[h]
	handles.mu.Unlock()
	if !ok || kind(h>>56) != k {
		return zero, errorf(statusBadHandle, "%s handle %#x: not a live %s (freed, never issued, or another kind)", kindNames[k], h, kindNames[k])
	}
	return v.(T), nil
}

// remove deletes h if it is a live handle of kind k and ok(v) agrees.
func remove[T any](h uint64, k kind, ok func(T) error) (T, error) {
	handles.mu.Lock()
	defer handles.mu.Unlock()
	var zero T
	v, live := handles.m[h]
	if !live || kind(h>>56) != k {
		return zero, errorf(statusBadHandle, "%s handle %#x: not a live %s (freed, never issued, or another kind)", kindNames[k], h, kindNames[k])
	}
	if err := ok(v.(T)); err != nil {
		return zero, err
	}
	delete(handles.m, h)
	return v.(T), nil
}

// engineObj is a loaded model. mu serialises every use of the engine and
// its sessions (an Engine is for one goroutine at a time).
type engineObj struct {
	mu       sync.Mutex
	eng      host.Engine
	sessions atomic.Int32 // live sessions: the engine cannot be freed before them
}

// sessionObj is one sequence, the readings its app pushes, and the policy
// attached to it.
type sessionObj struct {
	eng      *engineObj
	sess     host.Session
	cfg      host.SessionConfig
	platform *sensors.Platform

	busy   atomic.Bool                        // a generation runs
	cancel atomic.Pointer[context.CancelFunc] // of the running generation
	pbuf   []byte                             // token text scratch (Go side)
	cbuf   *cbuffer                           // token text handed to C

	mu     sync.Mutex // guards policy, last and live
	policy *policyObj
	last   host.Stats
	live   policySnapshot // the policy's state after its last step
}

// policySnapshot is what the stats report of a policy, copied after each of
// its steps by the generating thread, so that edgellm_session_stats from
// another thread never touches the Adapter while it runs.
type policySnapshot struct {
	tier, specK, window int32
	calls, failures     int64
}

// snapshot copies the adapter's state; s.mu must not be held.
func (s *sessionObj) snapshot(ad *host.Adapter) {
	d, st := ad.Current(), ad.Stats()
	s.mu.Lock()
	s.live = policySnapshot{tier: d.Tier, specK: d.SpecK, window: d.Window, calls: int64(st.Calls), failures: int64(st.Failures)}
	s.mu.Unlock()
}

// policyObj is a policy attached to a session.
type policyObj struct {
	sess *sessionObj
	ad   *host.Adapter
}
