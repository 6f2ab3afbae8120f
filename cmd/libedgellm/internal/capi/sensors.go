package capi

/*
#cgo CFLAGS: -I${SRCDIR}/../../../../include
#define EDGELLM_NO_PROTOTYPES 1
#include <stdlib.h>
#include <string.h>
#include "edgellm.h"
#include "capi.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"
	"unsafe"

	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/host/policy"
	"github.com/edgellm/edgellm/host/policy/update"
)

//export edgellm_sensors_init_sized
func edgellm_sensors_init_sized(r *C.struct_edgellm_sensors, size C.uint32_t) C.int {
	d := C.struct_edgellm_sensors{size: C.sizeof_struct_edgellm_sensors}
	return initSized("edgellm_sensors", unsafe.Pointer(r), size, unsafe.Pointer(&d), C.sizeof_struct_edgellm_sensors)
}

//export edgellm_sensors_push
func edgellm_sensors_push(h C.edgellm_session, r *C.struct_edgellm_sensors) C.int {
	if _, err := get[*sessionObj](uint64(h), kindSession); err != nil {
		return done(err, 0)
	}
	return pushSensors("edgellm_sensors_push", r)
}

//export edgellm_device_sensors_push
func edgellm_device_sensors_push(r *C.struct_edgellm_sensors) C.int {
	return pushSensors("edgellm_device_sensors_push", r)
}

// pushSensors records the app's readings in devicePlatform, which every
// session's policy reads.
func pushSensors(fn string, r *C.struct_edgellm_sensors) C.int {
	err := func() error {
		pl := devicePlatform
		if r == nil {
			return errorf(statusInvalidArgument, "%s: readings must not be NULL", fn)
		}
		if err := checkSize("edgellm_sensors", r.size, C.sizeof_struct_edgellm_sensors); err != nil {
			return err
		}
		const known = C.EDGELLM_SENSORS_MEMORY | C.EDGELLM_SENSORS_TRIM | C.EDGELLM_SENSORS_THERMAL | C.EDGELLM_SENSORS_BATTERY
		if r.set&^known != 0 {
			return errorf(statusInvalidArgument, "%s: unknown bits %#x in set", fn, r.set&^known)
		}
		// The same rules as sensors.Platform's Go API: each push is checked
		// there and refused whole if out of range.
		var errs []error
		if r.set&C.EDGELLM_SENSORS_MEMORY != 0 {
			errs = append(errs, pl.PushMemoryInfo(int64(r.avail_mem_bytes), int64(r.threshold_bytes), int64(r.total_mem_bytes), r.low_memory != 0))
		}
		if r.set&C.EDGELLM_SENSORS_TRIM != 0 {
			errs = append(errs, pl.PushTrimLevel(int(r.trim_level)))
		}
		if r.set&C.EDGELLM_SENSORS_THERMAL != 0 {
			errs = append(errs, pl.PushThermalStatus(int(r.thermal_status)))
		}
		if r.set&C.EDGELLM_SENSORS_BATTERY != 0 {
			errs = append(errs, pl.PushBattery(float64(r.battery_pct), r.charging != 0))
		}
		if err := errors.Join(errs...); err != nil {
			return errorf(statusInvalidArgument, "%s: %v", fn, err)
		}
		return nil
	}()
	return done(err, statusInternal)
}

// ---- policy ----

// edgellm_policy_params_init is API 1.0's: it writes the 1.0 struct.
//
//export edgellm_policy_params_init
func edgellm_policy_params_init(p *C.struct_edgellm_policy_params) {
	edgellm_policy_params_init_sized(p, C.size_policy_params_v1_0)
}

//export edgellm_policy_params_init_sized
func edgellm_policy_params_init_sized(p *C.struct_edgellm_policy_params, size C.uint32_t) C.int {
	d := C.struct_edgellm_policy_params{size: C.sizeof_struct_edgellm_policy_params}
	return initSized("edgellm_policy_params", unsafe.Pointer(p), size, unsafe.Pointer(&d), C.size_policy_params_v1_0, C.size_policy_params_v1_1, C.size_policy_params_v1_2, C.sizeof_struct_edgellm_policy_params)
}

//export edgellm_policy_attach
func edgellm_policy_attach(h C.edgellm_session, p *C.struct_edgellm_policy_params, out *C.edgellm_policy) C.int {
	err := func() error {
		s, err := get[*sessionObj](uint64(h), kindSession)
		if err != nil {
			return err
		}
		if p == nil || out == nil {
			return errorf(statusInvalidArgument, "edgellm_policy_attach: params and out must not be NULL")
		}
		if err := checkSize("edgellm_policy_params", p.size, C.size_policy_params_v1_0, C.size_policy_params_v1_1, C.size_policy_params_v1_2, C.sizeof_struct_edgellm_policy_params); err != nil {
			return err
		}
		pp := C.struct_edgellm_policy_params{size: C.sizeof_struct_edgellm_policy_params}
		readIn(unsafe.Pointer(&pp), unsafe.Pointer(p), p.size)
		p = &pp
		if err := notInCallback("edgellm_policy_attach"); err != nil {
			return err
		}
		repo, err := repoOptions(p)
		if err != nil {
			return err
		}
		if p.bundle_path == nil && p.inbox_dir == nil && repo == nil {
			return errorf(statusInvalidArgument, "edgellm_policy_attach: none of bundle_path, inbox_dir and repo is set")
		}
		cfg := policy.NewConfig().WithInsecure(p.insecure != 0).WithStateDir(goString(p.state_dir)).WithLogger(policyLog).WithCacheDir(goString(p.cache_dir))
		switch {
		case p.deadline_us < 0:
			return errorf(statusInvalidArgument, "edgellm_policy_attach: deadline_us %d is negative (0: the default, %d)", int64(p.deadline_us), policy.DefaultDeadline.Microseconds())
		case p.deadline_us > 0:
			cfg = cfg.WithDeadline(time.Duration(p.deadline_us) * time.Microsecond)
		}
		if p.trusted_key != nil {
			td, err := policy.ReadTrust(C.GoString(p.trusted_key))
			if err != nil {
				return errorf(classify(err, statusPolicy), "edgellm_policy_attach: trusted key: %v", err)
			}
			cfg = cfg.WithTrustDir(td)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.policy != nil {
			return errorf(statusBusy, "edgellm_policy_attach: the session already has a policy; free it first")
		}
		if s.closed {
			return errorf(statusBadHandle, "edgellm_policy_attach: the session was freed")
		}
		if s.busy.Load() {
			return errorf(statusBusy, "edgellm_policy_attach: a generation is running")
		}
		s.eng.mu.Lock()
		ad, err := host.AttachPolicy(context.Background(), s.sess, host.PolicyOptions{
			Path: goString(p.bundle_path), Inbox: goString(p.inbox_dir), Config: &cfg, Sensors: goString(p.sensors),
			Repo: repo, RepoPoll: time.Duration(p.repo_poll_ms) * time.Millisecond, DecisionLog: goString(p.decision_log),
			SensorOptions: host.SensorOptions{Platform: devicePlatform},
		})
		s.eng.mu.Unlock()
		if err != nil {
			return fmt.Errorf("edgellm_policy_attach: %w", err)
		}
		s.policy = &policyObj{sess: s, ad: ad}
		d := ad.Current()
		s.live = policySnapshot{tier: d.Tier, specK: d.SpecK, window: d.Window}
		*out = C.edgellm_policy(handles.add(kindPolicy, s.policy))
		return nil
	}()
	return done(err, statusPolicy)
}

//export edgellm_policy_load
func edgellm_policy_load(h C.edgellm_policy, path *C.char) C.int {
	err := func() error {
		pol, err := get[*policyObj](uint64(h), kindPolicy)
		if err != nil {
			return err
		}
		if path == nil {
			return errorf(statusInvalidArgument, "edgellm_policy_load: bundle_path is NULL")
		}
		// The runtime swaps a verified module in between decide calls: safe
		// while another thread generates.
		if err := pol.ad.Load(context.Background(), C.GoString(path)); err != nil {
			// The app's log callback hears of a refused reload too (the
			// runtime leaves reporting to the caller).
			policyLog.Warn("policy: load refused, current policy kept", "path", C.GoString(path), "err", err)
			return fmt.Errorf("edgellm_policy_load: %w", err)
		}
		return nil
	}()
	return done(err, statusPolicy)
}

//export edgellm_policy_free
func edgellm_policy_free(h C.edgellm_policy) C.int {
	pol, err := remove(uint64(h), kindPolicy, func(p *policyObj) error {
		if p.sess.busy.Load() {
			return errorf(statusBusy, "edgellm_policy_free: its session is generating")
		}
		return nil
	})
	if err == nil {
		pol.sess.mu.Lock()
		pol.sess.policy = nil
		pol.sess.mu.Unlock()
		err = pol.ad.Close()
	}
	return done(err, statusInternal)
}

// ---- stats ----

func defaultStats() C.struct_edgellm_stats {
	return C.struct_edgellm_stats{size: C.sizeof_struct_edgellm_stats}
}

// edgellm_stats_init is API 1.0's: it writes the 1.0 struct.
//
//export edgellm_stats_init
func edgellm_stats_init(st *C.struct_edgellm_stats) {
	edgellm_stats_init_sized(st, C.size_stats_v1_0)
}

//export edgellm_stats_init_sized
func edgellm_stats_init_sized(st *C.struct_edgellm_stats, size C.uint32_t) C.int {
	d := defaultStats()
	return initSized("edgellm_stats", unsafe.Pointer(st), size, unsafe.Pointer(&d), C.size_stats_v1_0, C.sizeof_struct_edgellm_stats)
}

//export edgellm_session_stats
func edgellm_session_stats(h C.edgellm_session, out *C.struct_edgellm_stats) C.int {
	err := func() error {
		s, err := get[*sessionObj](uint64(h), kindSession)
		if err != nil {
			return err
		}
		if out == nil {
			return errorf(statusInvalidArgument, "edgellm_session_stats: out must not be NULL")
		}
		if err := checkSize("edgellm_stats", out.size, C.size_stats_v1_0, C.sizeof_struct_edgellm_stats); err != nil {
			return err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return errorf(statusBadHandle, "edgellm_session_stats: the session was freed")
		}
		st := C.struct_edgellm_stats{
			size: out.size, n_prompt: C.int32_t(s.last.PromptTokens), n_generated: C.int32_t(s.last.GeneratedTokens),
			prefill_tok_per_sec: C.double(s.last.PrefillTPS()), decode_tok_per_sec: C.double(s.last.DecodeTPS()),
			n_ctx: C.int32_t(s.cfg.NCtx), draft_proposed: C.int64_t(s.draft.Drafted), draft_accepted: C.int64_t(s.draft.Accepted),
		}
		if !s.busy.Load() {
			st.n_ctx_used = C.int32_t(s.sess.Len()) // Len is not safe during a generation
			s.decodes.Store(decodeCount(s.sess))
		} else {
			st.n_ctx_used = C.int32_t(s.used.Load())
			st.generating = 1
		}
		st.n_decodes = C.int64_t(s.decodes.Load())
		if s.policy != nil {
			l := s.live
			st.tier, st.spec_k, st.window = C.int32_t(l.tier), C.int32_t(l.specK), C.int32_t(l.window)
			st.policy_calls, st.policy_failures = C.int64_t(l.calls), C.int64_t(l.failures)
			st.policy_revision = C.int64_t(s.policy.ad.Revision()) // the runtime's: safe from any thread
		}
		// Only the caller's size: an old caller's struct is shorter.
		C.memcpy(unsafe.Pointer(out), unsafe.Pointer(&st), C.size_t(out.size))
		return nil
	}()
	return done(err, statusInternal)
}

// repoOptions is the TUF update channel of API 1.2's policy params (nil
// when repo is not set), checked as `run --policy-repo` checks its flags.
func repoOptions(p *C.struct_edgellm_policy_params) (*update.Options, error) {
	if p.repo == nil {
		if p.repo_root != nil || p.repo_name != nil {
			return nil, errorf(statusInvalidArgument, "edgellm_policy_attach: repo_root and repo_name go with repo")
		}
		return nil, nil
	}
	switch {
	case p.bundle_path != nil || p.inbox_dir != nil:
		return nil, errorf(statusInvalidArgument, "edgellm_policy_attach: repo replaces bundle_path and inbox_dir: set one")
	case p.repo_root == nil || p.repo_name == nil:
		return nil, errorf(statusInvalidArgument, "edgellm_policy_attach: repo needs repo_root (the root.json the app ships) and repo_name")
	case p.state_dir == nil:
		return nil, errorf(statusInvalidArgument, "edgellm_policy_attach: repo needs state_dir (the last-good module and the trusted metadata live there)")
	case p.repo_poll_ms < 0:
		return nil, errorf(statusInvalidArgument, "edgellm_policy_attach: repo_poll_ms %d is negative", p.repo_poll_ms)
	}
	name := C.GoString(p.repo_name)
	if err := update.ValidName(name); err != nil {
		return nil, errorf(statusInvalidArgument, "edgellm_policy_attach: repo_name: %v", err)
	}
	root, err := update.ReadRegularFile(C.GoString(p.repo_root), update.DefaultLimits().Root)
	if err != nil {
		return nil, errorf(statusIO, "edgellm_policy_attach: repo_root: %v", err)
	}
	return &update.Options{Repo: C.GoString(p.repo), TrustedRoot: root,
		StateDir: filepath.Join(C.GoString(p.state_dir), "repo-"+name), Name: name}, nil
}
