package main

import (
	"reflect"
	"testing"
	"time"

	"github.com/edgellm/edgellm/cmd/edgellm/internal/runargs"
)

// TestRunArgs: every argv cmd/edgellm/internal/runargs builds for a child `edgellm run`
// (cmd/edgellm/internal/scenario) parses with run's own flag set into the options it
// means, so the builder and run's flags cannot drift apart.
func TestRunArgs(t *testing.T) {
	r := runargs.Run{Tiers: []string{"a.gguf", "b.gguf"}, Engine: "llamacpp", NoMmap: true, Repack: true, StatsJSON: "s.jsonl", LogitsOut: "l.bin",
		Policy: "p.wasm", PolicyInsecure: true, N: 40, Temp: 0, Threads: 2, Ctx: 256, Prompt: "Once upon",
		Sensors: "live+trace:t.jsonl", SensorInterval: 20 * time.Millisecond, TraceStepMs: 1}
	argv := r.Argv()
	cmd, rest := lookup(argv)
	if cmd == nil || cmd.Name != "run" {
		t.Fatalf("%v: not the run command", argv)
	}
	fs := newFlagSet(cmd)
	if err := fs.Parse(rest); err != nil {
		t.Fatalf("%v: %v", argv, err)
	}
	if len(fs.Args()) != 0 {
		t.Fatalf("%v: arguments left over: %v", argv, fs.Args())
	}
	s, err := LoadSettings(fs, nil)
	if err != nil {
		t.Fatal(err)
	}
	var o runOptions
	if err := s.Decode(&o); err != nil {
		t.Fatal(err)
	}
	got := runargs.Run{Tiers: o.Tiers, Engine: o.Engine, NoMmap: o.NoMmap, Repack: o.Repack, StatsJSON: o.StatsJSON, LogitsOut: o.LogitsOut,
		Policy: o.Policy, PolicyInsecure: o.PolicyInsecure, N: o.NPredict, Temp: o.Temp, Threads: o.Threads, Ctx: o.Ctx,
		Prompt: o.Prompt, Sensors: o.Sensors, SensorInterval: o.SensorInterval, TraceStepMs: o.TraceStepMs}
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("%v parses as\n%+v\nwant\n%+v", argv, got, r)
	}
}

// TestRunArgsLayerSets: the per-layer form (-m, --layer-sets, --manifest,
// --tok-target) parses back the same way.
func TestRunArgsLayerSets(t *testing.T) {
	r := runargs.Run{Model: "a.gguf", LayerSets: []string{"b.gguf", "c.gguf"}, Manifest: "m.json", TokTarget: 2.5,
		Engine: "native", Policy: "p.wasm", N: 40, Temp: 0}
	argv := r.Argv()
	cmd, rest := lookup(argv)
	if cmd == nil || cmd.Name != "run" {
		t.Fatalf("%v: not the run command", argv)
	}
	fs := newFlagSet(cmd)
	if err := fs.Parse(rest); err != nil {
		t.Fatalf("%v: %v", argv, err)
	}
	s, err := LoadSettings(fs, nil)
	if err != nil {
		t.Fatal(err)
	}
	var o runOptions
	if err := s.Decode(&o); err != nil {
		t.Fatal(err)
	}
	got := runargs.Run{Model: o.Model, LayerSets: o.LayerSets, Manifest: o.Manifest, TokTarget: o.TokTarget,
		Engine: o.Engine, Policy: o.Policy, N: o.NPredict, Temp: o.Temp}
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("%v parses as\n%+v\nwant\n%+v", argv, got, r)
	}
}
