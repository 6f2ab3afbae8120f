package policy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/edgellm/edgellm/abi"
)

// DecisionLogConfig configures the JSONL decision log. A record is written
// for every Every-th step, every step whose decision differs from the
// previous step's, and every failed step. Records are produced off the hot
// path; when the queue is full they are dropped and counted
// (Stats.EventsDropped), never waited for.
type DecisionLogConfig struct {
	Path     string // "" disables the log
	Every    int    // sample period in steps (0: changes and failures only)
	MaxBytes int64  // byte cap of the file (0: 16 MiB)
	// Rotate: at the cap, rename the file to Path+".1" (replacing it) and
	// start a new one; otherwise stop writing (Stats.LogSkipped counts).
	Rotate bool
}

func (c DecisionLogConfig) validate() error {
	if c.Every < 0 || c.MaxBytes < 0 {
		return configErrorf("decision log: Every %d and MaxBytes %d must not be negative", c.Every, c.MaxBytes)
	}
	return nil
}

// LogRecord is one line of the decision log.
type LogRecord struct {
	Step       uint64   `json:"step"`
	Time       string   `json:"time"`
	Logged     string   `json:"logged"`  // why: "failure", "change" or "sample"
	Sensors    string   `json:"sensors"` // FNV-1a 64 of the encoded Sensors, hex
	MemAvailMB int32    `json:"mem_available_mb"`
	Thermal    uint8    `json:"thermal_status"`
	TokPerSec  float32  `json:"tok_per_sec"`
	CtxLen     int32    `json:"ctx_len"`
	Tier       int32    `json:"tier"`
	SpecK      int32    `json:"spec_k"`
	Window     int32    `json:"window"`
	Anchors    int32    `json:"anchors"`
	Threads    int32    `json:"threads"`
	Cadence    int32    `json:"cadence_steps"`
	KVType     string   `json:"kv_type"`
	LayerBits  []uint8  `json:"layer_bits,omitempty"` // up to the last non-zero layer
	ReasonCode uint16   `json:"reason_code"`
	Reason     string   `json:"reason,omitempty"`
	Outcome    string   `json:"outcome"`
	Fallback   string   `json:"fallback,omitempty"`
	Clamps     []string `json:"clamps,omitempty"`
	Detail     string   `json:"detail,omitempty"`
	Err        string   `json:"err,omitempty"`
	LatencyUS  float64  `json:"latency_us"`
	Revision   int64    `json:"revision"`
	Generation uint64   `json:"generation"`
}

// ReadLog parses a decision log.
func ReadLog(rd io.Reader) ([]LogRecord, error) {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var out []LogRecord
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var rec LogRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return out, fmt.Errorf("line %d: %v", line, err)
		}
		out = append(out, rec)
	}
	return out, sc.Err()
}

// event is what Decide hands to the logger goroutine: values only, copied
// through the channel.
type event struct {
	res     Result
	dec     abi.Decision
	digest  uint64
	mem     int32
	thermal uint8
	tokps   float32
	ctxLen  int32
	logged  string // "" when the event is for slog only
	at      time.Time
}

// emit decides whether this step is logged and queues it without blocking.
func (r *Runtime) emit(s *abi.Sensors, d *abi.Decision, res *Result) {
	h := &r.hot
	logged := ""
	if r.dlog != nil {
		switch every := uint64(r.cfg.declog.Every); {
		case res.Outcome.Failed():
			logged = "failure"
		case *d != h.prev:
			logged = "change"
		case every > 0 && res.Step%every == 0:
			logged = "sample"
		}
	}
	if logged == "" && !res.Outcome.Failed() && res.Clamps == 0 {
		return
	}
	var digest uint64
	if logged != "" {
		_ = abi.EncodeSensors(h.sensBuf[:], s)
		digest = fnv64a(h.sensBuf[:])
	}
	select {
	case r.events <- event{res: *res, dec: *d, digest: digest, mem: s.MemAvailableMB, thermal: uint8(s.ThermalStatus),
		tokps: s.TokPerSec, ctxLen: s.CtxLen, logged: logged, at: time.Now()}:
	default:
		r.c.eventsDropped.Add(1)
	}
}

// fnv64a is hash/fnv's FNV-1a 64 without the allocation of a hash.Hash.
func fnv64a(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// logger writes slog lines and decision log records, off the hot path.
func (r *Runtime) logger() {
	defer r.wg.Done()
	for {
		select {
		case ev := <-r.events:
			r.handle(&ev)
			if len(r.events) == 0 && r.dlog != nil {
				r.dlog.flush()
			}
		case <-r.stop:
			for {
				select {
				case ev := <-r.events:
					r.handle(&ev)
				default:
					return
				}
			}
		}
	}
}

func (r *Runtime) handle(ev *event) {
	res := &ev.res
	if res.Outcome.Failed() {
		r.log.Warn("policy: decide failed, fallback used", "step", res.Step, "outcome", res.Outcome.String(),
			"fallback", res.Fallback.String(), "status", res.Status.String(), "detail", res.Detail, "err", res.Err,
			"revision", res.Revision, "generation", res.Generation)
	}
	if res.Clamps != 0 {
		r.log.Info("policy: decision clamped", "step", res.Step, "fields", res.Clamps.String(), "revision", res.Revision)
	}
	if ev.logged == "" {
		return
	}
	d := &ev.dec
	rec := LogRecord{
		Step: res.Step, Time: ev.at.UTC().Format(time.RFC3339Nano), Logged: ev.logged,
		Sensors: fmt.Sprintf("%016x", ev.digest), MemAvailMB: ev.mem, Thermal: ev.thermal, TokPerSec: ev.tokps, CtxLen: ev.ctxLen,
		Tier: d.Tier, SpecK: d.SpecK, Window: d.Window, Anchors: d.Anchors, Threads: d.Threads, Cadence: d.CadenceSteps,
		KVType: d.KVType.String(), ReasonCode: uint16(d.ReasonCode), Reason: d.Reason(),
		Outcome: res.Outcome.String(), Fallback: res.Fallback.String(), Clamps: res.Clamps.Names(), Detail: res.Detail,
		LatencyUS: float64(res.Latency.Nanoseconds()) / 1e3, Revision: res.Revision, Generation: res.Generation,
	}
	if res.Outcome == OutcomeBadStatus {
		rec.Detail = "status " + res.Status.String()
	}
	if res.Err != nil {
		rec.Err = res.Err.Error()
	}
	last := -1
	for i, b := range d.LayerBits {
		if b != 0 {
			last = i
		}
	}
	if last >= 0 {
		rec.LayerBits = append([]uint8(nil), d.LayerBits[:last+1]...)
	}
	line, err := json.Marshal(rec)
	if err != nil {
		return
	}
	line = append(line, '\n')
	ok, err := r.dlog.write(line)
	switch {
	case err != nil:
		r.log.Warn("policy: decision log write failed", "path", r.cfg.declog.Path, "err", err)
	case ok:
		r.c.logRecords.Add(1)
		r.c.logBytes.Add(uint64(len(line)))
	default:
		r.c.logSkipped.Add(1)
	}
}

// decisionLog is the JSONL file with its byte cap.
type decisionLog struct {
	cfg  DecisionLogConfig
	f    *os.File
	w    *bufio.Writer
	size int64
}

func openDecisionLog(cfg DecisionLogConfig) (*decisionLog, error) {
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = 16 << 20
	}
	l := &decisionLog{cfg: cfg}
	return l, l.open()
}

func (l *decisionLog) open() error {
	f, err := os.OpenFile(l.cfg.Path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("decision log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("decision log: %w", err)
	}
	l.f, l.w, l.size = f, bufio.NewWriterSize(f, 64<<10), fi.Size()
	return nil
}

// write appends line unless the cap is reached (then rotates or skips).
func (l *decisionLog) write(line []byte) (bool, error) {
	if l.size+int64(len(line)) > l.cfg.MaxBytes {
		if !l.cfg.Rotate || int64(len(line)) > l.cfg.MaxBytes {
			return false, nil
		}
		if err := l.close(); err != nil {
			return false, err
		}
		if err := os.Rename(l.cfg.Path, l.cfg.Path+".1"); err != nil {
			return false, err
		}
		if err := l.open(); err != nil {
			return false, err
		}
	}
	n, err := l.w.Write(line)
	l.size += int64(n)
	return err == nil, err
}

func (l *decisionLog) flush() { _ = l.w.Flush() }

func (l *decisionLog) close() error {
	err := l.w.Flush()
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	return err
}
