package policy

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/tetratelabs/wazero/sys"

	"github.com/edgellm/edgellm/abi"
)

// Outcome says how a Decide call went.
type Outcome uint8

// Outcomes. OutcomeOK is the only one where the module decided; the others
// answer with a fallback (Result.Fallback).
const (
	OutcomeOK         Outcome = iota // the module decided (possibly clamped)
	OutcomeNoModule                  // no module in service: none loaded, or quarantined with none to restore
	OutcomeRecovering                // the instance is being re-instantiated after a failure
	OutcomeCanceled                  // the caller's context was already done; the module was not called
	OutcomeTrap                      // the guest trapped (unreachable, out-of-bounds access, ...)
	OutcomeDeadline                  // the call overran the deadline and was aborted
	OutcomeBadStatus                 // decide returned a status other than StatusOK
	OutcomeInvalid                   // the decision could not be decoded or is garbage (NaN, negative, ...)
	OutcomeMemory                    // the in/out buffers are no longer inside the guest memory
)

var outcomeNames = [...]string{"ok", "no_module", "recovering", "canceled", "trap", "deadline", "bad_status", "invalid", "memory"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// Failed reports whether a call into the module failed (and was counted
// towards quarantine).
func (o Outcome) Failed() bool { return o >= OutcomeTrap }

// Fallback says which decision a non-OK step answered with.
type Fallback uint8

// Fallbacks.
const (
	FallbackNone     Fallback = iota // the module's own decision
	FallbackLastGood                 // the last good decision of any module
	FallbackDefault                  // the built-in default: the caller's pre-filled decision, unchanged
)

func (f Fallback) String() string {
	return [...]string{"", "last_good", "default"}[min(int(f), 2)]
}

// Result reports one Decide call. It is returned by value and never
// allocates.
type Result struct {
	Step       uint64        // 0-based index of this Decide call
	Outcome    Outcome       // what happened
	Fallback   Fallback      // which decision d holds when Outcome != OutcomeOK
	Clamps     ClampSet      // fields clamped to the engine's limits
	Status     abi.Status    // the guest's status when Outcome == OutcomeBadStatus
	Latency    time.Duration // wall time of the Decide call
	Revision   int64         // bundle revision of the module that was asked (0: loose or none)
	Generation uint64        // generation of that module (see Runtime.Generation)
	// Detail is a constant description of an invalid decision or memory fault.
	Detail string
	// Err is the guest error of a trap or deadline (from wazero), else nil.
	Err error
}

// Decide asks the policy for the next decision. d must be pre-filled with
// the engine's current state; on return it holds the decision to apply,
// validated and clamped to the configured Limits. When the call fails (trap,
// deadline, bad status, invalid decision) or no instance is ready, d is the
// last good decision or, if there is none, left as pre-filled, and the Result
// says why; failures never surface as an error. Decide returns an error only
// when the runtime is closed or Decide is called concurrently.
//
// Decide must be called from one goroutine at a time. It never waits for a
// load, reload or re-instantiation, and allocates nothing (except for a
// module that could not be instrumented, where wazero allocates inside each
// call; see RATIONALE.md).
func (r *Runtime) Decide(ctx context.Context, s *abi.Sensors, d *abi.Decision) (Result, error) {
	if !r.calling.CompareAndSwap(false, true) {
		return Result{}, ErrConcurrentDecide
	}
	defer r.calling.Store(false)
	if r.closed.Load() {
		return Result{}, ErrClosed
	}
	start := time.Now()
	h := &r.hot
	res := Result{Step: h.step}
	h.step++
	h.pre = *d

	// 1. Take the instance in service and publish it as in use (hazard),
	//    re-checking that it is still in service afterwards.
	inst := r.active.Load()
	for {
		r.hazard.Store(inst)
		again := r.active.Load()
		if again == inst {
			break
		}
		inst = again
	}

	switch {
	case inst == nil:
		res.Outcome = OutcomeRecovering
		if !r.inService.Load() {
			res.Outcome = OutcomeNoModule
		}
	case ctx.Err() != nil:
		res.Outcome = OutcomeCanceled
	default:
		res.Revision, res.Generation = inst.mod.revision, inst.mod.gen
		r.call(inst, s, d, &res)
	}
	r.hazard.Store(nil)

	// 2. Success: remember the decision. Failure: hand the instance to the
	//    worker and answer with the fallback.
	if res.Outcome == OutcomeOK {
		h.lastGood, h.haveGood = *d, true
		if inst.mod.consecutive.Load() != 0 {
			inst.mod.consecutive.Store(0)
		}
		r.c.ok.Add(1)
		if res.Clamps != 0 {
			r.c.clamped.Add(1)
		}
	} else {
		if res.Outcome.Failed() {
			r.fail(inst, &res)
		}
		if h.haveGood {
			*d, res.Fallback = h.lastGood, FallbackLastGood
		} else {
			*d, res.Fallback = h.pre, FallbackDefault
		}
		r.c.fallbacks.Add(1)
	}
	r.c.steps.Add(1)
	res.Latency = time.Since(start)
	r.emit(s, d, &res)
	h.prev = *d
	return res, nil
}

// call runs decide on inst and fills d and res. Step by step:
func (r *Runtime) call(inst *instance, s *abi.Sensors, d *abi.Decision, res *Result) {
	h := &r.hot
	// a. Encode the sensors and the pre-filled decision into the guest's
	//    buffers (preallocated host buffer, one copy each).
	//    Each guest gets the prefix its ABI minor knows (inst.sSize, dSize).
	if err := abi.EncodeSensorsSize(h.sensBuf[:], s, inst.sSize); err != nil {
		res.Outcome, res.Detail = OutcomeInvalid, "sensors do not encode"
		return
	}
	if !inst.mem.Write(inst.inPtr, h.sensBuf[:inst.sSize]) {
		res.Outcome, res.Detail = OutcomeMemory, "in_ptr outside memory"
		return
	}
	out, ok := inst.mem.Read(inst.outPtr, uint32(inst.dSize)) // a view, no copy
	if !ok {
		res.Outcome, res.Detail = OutcomeMemory, "out_ptr outside memory"
		return
	}
	_ = abi.EncodeDecisionSize(out, d, inst.dSize) // cannot fail: len(out) == dSize, a known size

	// b. Call decide under the deadline, with the reused stack. An
	//    instrumented module is stopped by its stop flag (a timer sets it;
	//    the guest traps at its next check); one on the fallback runtime by
	//    wazero watching the reusable context.
	var err error
	var overran bool
	switch {
	case r.cfg.deadline == 0:
		err = inst.decide.CallWithStack(context.Background(), inst.stack)
	case inst.stop != nil:
		runtime.LockOSThread() // the deadline reads this thread's CPU clock
		h.stop.arm(inst.stop, startThreadClock())
		err = inst.decide.CallWithStack(context.Background(), inst.stack)
		overran = h.stop.disarm()
		runtime.UnlockOSThread()
	default:
		runtime.LockOSThread()
		err = inst.decide.CallWithStack(h.dctx.arm(startThreadClock()), inst.stack)
		overran = h.dctx.disarm()
		runtime.UnlockOSThread()
	}
	if err != nil {
		res.Err = err
		var ee *sys.ExitError
		if overran || (errors.As(err, &ee) && ee.ExitCode() == sys.ExitCodeDeadlineExceeded) {
			// The stop is a trap the instrumentation placed (or wazero's
			// close): say what it was, not "wasm error: unreachable".
			res.Outcome = OutcomeDeadline
			res.Err = fmt.Errorf("stopped at the %v deadline", r.cfg.deadline)
		} else {
			res.Outcome = OutcomeTrap
		}
		return
	}
	// Returned, but the deadline fired: the stop flag is set (the instance
	// would trap at once) or wazero may have closed the module under it.
	if overran {
		res.Outcome = OutcomeDeadline
		return
	}
	if st := abi.Status(int32(inst.stack[0])); st != abi.StatusOK {
		res.Outcome, res.Status = OutcomeBadStatus, st
		return
	}

	// c. Read the decision back (the guest may have grown memory: re-read
	//    the view), reject garbage, clamp the rest.
	if out, ok = inst.mem.Read(inst.outPtr, uint32(inst.dSize)); !ok {
		res.Outcome, res.Detail = OutcomeMemory, "out_ptr outside memory"
		return
	}
	if err := abi.DecodeDecision(out, d); err != nil {
		res.Outcome, res.Detail = OutcomeInvalid, "decision header: wrong version or size"
		return
	}
	if why := invalidReason(d); why != "" {
		res.Outcome, res.Detail = OutcomeInvalid, why
		return
	}
	res.Clamps = r.cfg.limits.clamp(d, &h.pre, r.kvMask)
	res.Outcome = OutcomeOK
}

// fail counts a failed call and hands the instance to the worker, which
// re-instantiates it or, after K consecutive failures, quarantines the
// module. Until then Decide falls back.
func (r *Runtime) fail(inst *instance, res *Result) {
	r.c.failures.Add(1)
	switch res.Outcome {
	case OutcomeTrap:
		r.c.traps.Add(1)
	case OutcomeDeadline:
		r.c.deadlines.Add(1)
	case OutcomeBadStatus:
		r.c.badStatus.Add(1)
	case OutcomeInvalid:
		r.c.invalid.Add(1)
	case OutcomeMemory:
		r.c.memFaults.Add(1)
	}
	n := inst.mod.consecutive.Add(1)
	r.active.CompareAndSwap(inst, nil)
	select {
	case r.failures <- failure{inst: inst, quarantine: int(n) >= r.cfg.maxFailures}:
	default: // cannot happen: one failure per instance, and instances are few
	}
}
