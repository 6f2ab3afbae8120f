package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/sensors"
	"github.com/edgellm/edgellm/host/trace"
	"github.com/spf13/pflag"
)

func init() {
	register(&command{
		Name:    "trace record",
		Summary: "record this device's live sensor readings as a JSONL trace",
		Usage:   "",
		Flags: func(fs *pflag.FlagSet) {
			fs.StringP("output", "o", "", "output file (default: stdout)")
			fs.Duration("interval", 100*time.Millisecond, "time between readings")
			fs.Duration("duration", 10*time.Second, "how long to record (0: until Ctrl-C)")
		},
		Run: runTraceRecord,
	})
	register(&command{
		Name:    "trace gen",
		Summary: "generate a simulated sensor trace for a named scenario: " + strings.Join(trace.ScenarioNames(), ", "),
		Usage:   "NAME",
		Flags: func(fs *pflag.FlagSet) {
			fs.StringP("output", "o", "", "output file (default: stdout)")
			fs.Int("steps", 100, "number of records")
			fs.Int("interval-ms", 100, "milliseconds between records")
			addSeedFlag(fs)
			fs.StringSlice("param", nil, "scenario parameter k=v (repeatable). Scenarios and parameters (defaults):\n"+scenarioHelp())
		},
		Run: runTraceGen,
	})
}

func scenarioHelp() string {
	var b strings.Builder
	for _, sc := range trace.Scenarios() {
		fmt.Fprintf(&b, "  %s: %s\n", sc.Name, sc.Summary)
		for _, p := range sc.Params {
			fmt.Fprintf(&b, "      %s=%g  %s\n", p.Name, p.Default, p.Help)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

type traceRecordOptions struct {
	Output   string        `koanf:"output"`
	Interval time.Duration `koanf:"interval"`
	Duration time.Duration `koanf:"duration"`
}

func runTraceRecord(c *cmdEnv, args []string) error {
	var o traceRecordOptions
	if err := c.Decode(&o); err != nil {
		return err
	}
	if len(args) > 0 {
		return usagef("trace record takes no arguments (got %q)", args[0])
	}
	if o.Interval < time.Millisecond {
		return usagef("--interval %v: must be at least 1ms", o.Interval)
	}
	if o.Duration < 0 {
		return usagef("--duration %v: must be ≥ 0", o.Duration)
	}
	r, err := sensors.NewReader(sensors.WithSmapsInterval(max(o.Interval, sensors.DefaultSmapsInterval)))
	if err != nil {
		return err
	}
	defer r.Close()
	for _, l := range r.Describe() {
		c.Logf("sensors: %s", l)
	}
	out, closeOut, err := openOutput(c, o.Output)
	if err != nil {
		return err
	}
	w := trace.NewWriter(out)
	n, err := recordTrace(c, r, w, o.Interval, o.Duration)
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if cerr := closeOut(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	c.Logf("recorded %d records", n)
	return nil
}

// recordTrace writes one record per interval until duration (0: none) has
// passed or the context is cancelled (Ctrl-C: a normal end, not an error).
func recordTrace(c *cmdEnv, r *sensors.Reader, w *trace.Writer, interval, duration time.Duration) (int, error) {
	start := time.Now()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var snap sensors.Snapshot
	n := 0
	for {
		r.Read(&snap)
		var s abi.Sensors
		snap.Fill(&s)
		rec := trace.FromSensors(snap.Time.Sub(start).Milliseconds(), &s, trace.FieldMask)
		if err := w.Write(&rec); err != nil {
			return n, err
		}
		if err := w.Flush(); err != nil { // a complete line survives Ctrl-C or kill
			return n, err
		}
		n++
		if duration > 0 && time.Since(start)+interval > duration {
			return n, nil
		}
		select {
		case <-c.Ctx.Done():
			return n, nil
		case <-tick.C:
		}
	}
}

type traceGenOptions struct {
	Output     string   `koanf:"output"`
	Steps      int      `koanf:"steps"`
	IntervalMs int      `koanf:"interval-ms"`
	Seed       int64    `koanf:"seed"`
	Param      []string `koanf:"param"`
}

func runTraceGen(c *cmdEnv, args []string) error {
	var o traceGenOptions
	if err := c.Decode(&o); err != nil {
		return err
	}
	if len(args) != 1 {
		return usagef("trace gen takes one scenario NAME: %s", strings.Join(trace.ScenarioNames(), ", "))
	}
	params := map[string]string{}
	for _, kv := range o.Param {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usagef("--param %q: want k=v", kv)
		}
		params[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	known := false
	for _, n := range trace.ScenarioNames() {
		known = known || n == args[0]
	}
	if !known {
		return usagef("unknown scenario %q (one of %s)", args[0], strings.Join(trace.ScenarioNames(), ", "))
	}
	recs, err := trace.Generate(args[0], trace.GenOptions{Steps: o.Steps, IntervalMs: int64(o.IntervalMs), Seed: uint64(o.Seed), Params: params})
	if err != nil {
		return usagef("%v", err)
	}
	if o.Output == "" {
		w := trace.NewWriter(c.Stdout)
		for i := range recs {
			if err := w.Write(&recs[i]); err != nil {
				return err
			}
		}
		return w.Flush()
	}
	// Write next to the target and rename, so a failure leaves no partial file.
	tmp, err := os.CreateTemp(filepath.Dir(o.Output), "."+filepath.Base(o.Output)+".*")
	if err != nil {
		return fmt.Errorf("--output %s: %v", o.Output, err)
	}
	defer os.Remove(tmp.Name())
	w := trace.NewWriter(tmp)
	for i := range recs {
		if err := w.Write(&recs[i]); err != nil {
			tmp.Close()
			return fmt.Errorf("--output %s: %v", o.Output, err)
		}
	}
	if err := w.Flush(); err != nil {
		tmp.Close()
		return fmt.Errorf("--output %s: %v", o.Output, err)
	}
	if err := tmp.Chmod(0o644); err != nil { // CreateTemp makes it 0600
		tmp.Close()
		return fmt.Errorf("--output %s: %v", o.Output, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("--output %s: %v", o.Output, err)
	}
	if err := os.Rename(tmp.Name(), o.Output); err != nil {
		return fmt.Errorf("--output %s: %v", o.Output, err)
	}
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	c.Logf("%s: %d records over %d ms (simulated, seed %d, params %v) -> %s", args[0], len(recs), recs[len(recs)-1].TMs, o.Seed, keys, o.Output)
	return nil
}

// openOutput opens the output file ("" = stdout). The close function closes
// the file (and does nothing for stdout).
func openOutput(c *cmdEnv, path string) (io.Writer, func() error, error) {
	if path == "" {
		return c.Stdout, func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--output %s: %v", path, err)
	}
	return f, f.Close, nil
}
