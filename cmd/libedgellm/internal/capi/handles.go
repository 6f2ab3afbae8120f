package capi

// #include <stdlib.h>
import "C"

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
	strs     engineStrings
}

// devicePlatform holds the readings the app pushes: memory, thermal and
// battery belong to the device, so every session's policy sees the same.
var devicePlatform = sensors.NewPlatform(sensors.DefaultStaleness)

// engineObj info strings: C copies made once, freed with the engine.
type engineStrings struct {
	arch, name, fileType, engine, chatTemplate *C.char
}

// sessionObj is one sequence and the policy attached to it.
type sessionObj struct {
	eng  *engineObj
	sess host.Session
	cfg  host.SessionConfig

	// busy is set while a generation runs, closed once edgellm_session_free
	// has succeeded; both change only under mu, so a generation and a free
	// exclude each other: a free during a generation is refused, a
	// generation after a free finds closed.
	busy     atomic.Bool
	cancel   atomic.Pointer[context.CancelFunc] // of the running generation
	used     atomic.Int32                       // n_ctx_used during a generation
	pbuf     []byte                             // token text scratch (Go side)
	cbuf     *cbuffer                           // token text handed to C
	utf8     utf8Joiner                         // EDGELLM_GENERATE_UTF8_COMPLETE
	toks     []int32                            // every token fed or generated, in order (edgellm_session_save)
	decodes  atomic.Int64                       // the engine's forward passes, as of the last read outside a generation
	toksLost bool                               // toks has gaps: save refuses until a reset or restore

	mu     sync.Mutex // guards busy/closed transitions, policy, last, live
	closed bool
	policy *policyObj
	last   host.Stats
	draft  host.DraftStats // of the last generation with a draft
	live   policySnapshot  // the policy's state after its last step
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
