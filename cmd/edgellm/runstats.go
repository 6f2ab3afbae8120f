package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/edgellm/edgellm/host"
	"github.com/spf13/pflag"
)

// Machine-readable statistics of `edgellm run` (--stats-json FILE), read by
// `edgellm scenario run` while the child runs. The file is JSONL, written
// line by line without buffering so a reader can follow it:
//
//	{"event":"start","unix_us":…,"prompt_tokens":5,"n_tiers":2,"tier":0,"pid":123}
//	{"event":"token","i":0,"unix_us":…,"tier":0,"k":0,"window":512,"threads":1}
//	…
//	{"event":"end","unix_us":…,"generated":200,"decode_tps":48.1,"prefill_ms":35.6,
//	 "policy_calls":13,"policy_changes":1,"tier_swaps":1,"policy_failures":0,"error":""}
//
// i counts generated tokens from 0; tier is the tier that produced token i.
// k, window and threads are the policy decision in force (absent without
// --policy).

func addRunStatsFlags(fs *pflag.FlagSet) {
	fs.Bool("no-mmap", false, "read weights into anonymous memory instead of mapping the file (memory pressure then cannot be relieved by dropping page cache)")
	fs.String("stats-json", "", "write per-token timestamps, tier and decisions as JSONL to this file (for edgellm scenario)")
	fs.String("logits-out", "", "write the prompt, each generated token and the raw logits it was sampled from to this binary file (internal/logitlog; edgellm scenario measures KL against the highest tier from it)")
}

type runStatsOptions struct {
	NoMmap    bool   `koanf:"no-mmap"`
	StatsJSON string `koanf:"stats-json"`
	LogitsOut string `koanf:"logits-out"`
}

// runStats writes the --stats-json file. A nil *runStats does nothing, so
// the run loop calls it unconditionally.
type runStats struct {
	f       *os.File
	buf     []byte
	tiers   interface{ Tiers() (n, cur int) }
	adapter *host.Adapter
	err     error // first write error
}

// openRunStats creates path ("" = no statistics: returns nil).
func openRunStats(path string, eng host.Engine) (*runStats, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--stats-json: %w", err)
	}
	r := &runStats{f: f, buf: make([]byte, 0, 256)}
	r.tiers, _ = eng.(interface{ Tiers() (n, cur int) })
	return r, nil
}

func (r *runStats) head(event string) {
	r.buf = append(r.buf[:0], `{"event":"`...)
	r.buf = append(r.buf, event...)
	r.buf = append(r.buf, `","unix_us":`...)
	r.buf = strconv.AppendInt(r.buf, time.Now().UnixMicro(), 10)
}

func (r *runStats) int(key string, v int64) {
	r.buf = append(r.buf, ',', '"')
	r.buf = append(r.buf, key...)
	r.buf = append(r.buf, '"', ':')
	r.buf = strconv.AppendInt(r.buf, v, 10)
}

func (r *runStats) float(key string, v float64) {
	r.buf = append(r.buf, ',', '"')
	r.buf = append(r.buf, key...)
	r.buf = append(r.buf, '"', ':')
	r.buf = strconv.AppendFloat(r.buf, v, 'f', 3, 64)
}

func (r *runStats) tier() int64 {
	if r.tiers == nil {
		return 0
	}
	_, cur := r.tiers.Tiers()
	return int64(cur)
}

func (r *runStats) flush() {
	r.buf = append(r.buf, '}', '\n')
	if _, err := r.f.Write(r.buf); err != nil && r.err == nil {
		r.err = err
	}
}

// begin records the start of generation.
func (r *runStats) begin(promptTokens int, adapter *host.Adapter) {
	if r == nil {
		return
	}
	r.adapter = adapter
	r.head("start")
	r.int("prompt_tokens", int64(promptTokens))
	n := int64(1)
	if r.tiers != nil {
		nt, _ := r.tiers.Tiers()
		n = int64(nt)
	}
	r.int("n_tiers", n)
	r.int("tier", r.tier())
	r.int("pid", int64(os.Getpid()))
	r.flush()
}

// token records generated token i. It does not allocate.
func (r *runStats) token(i int) {
	if r == nil {
		return
	}
	r.head("token")
	r.int("i", int64(i))
	r.int("tier", r.tier())
	if r.adapter != nil {
		d := r.adapter.Current()
		r.int("k", int64(d.SpecK))
		r.int("window", int64(d.Window))
		r.int("threads", int64(d.Threads))
	}
	r.flush()
}

// end records the outcome of generation.
func (r *runStats) end(st host.Stats, genErr error) {
	if r == nil {
		return
	}
	r.head("end")
	r.int("generated", int64(st.GeneratedTokens))
	r.float("decode_tps", st.DecodeTPS())
	r.float("prefill_ms", float64(st.Prefill.Microseconds())/1000)
	if a := r.adapter; a != nil {
		r.int("policy_calls", int64(a.Calls))
		r.int("policy_changes", int64(a.Changes))
		r.int("tier_swaps", int64(a.Swaps))
		r.int("policy_failures", int64(a.Failures))
	}
	r.buf = append(r.buf, `,"error":`...)
	msg := ""
	if genErr != nil {
		msg = genErr.Error()
	}
	q, _ := json.Marshal(msg)
	r.buf = append(r.buf, q...)
	r.flush()
}

// Remove closes and deletes the file (a run that failed before it began).
func (r *runStats) Remove() {
	if r == nil {
		return
	}
	r.f.Close()
	os.Remove(r.f.Name())
}

// Close closes the file and reports the first write error.
func (r *runStats) Close() error {
	if r == nil {
		return nil
	}
	err := r.f.Close()
	if r.err != nil {
		err = r.err
	}
	if err != nil {
		return fmt.Errorf("--stats-json: %w", err)
	}
	return nil
}
