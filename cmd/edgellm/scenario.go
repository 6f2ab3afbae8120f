//go:build linux

package main

import (
	"fmt"
	"path/filepath"

	"github.com/edgellm/edgellm/cmd/edgellm/internal/scenario"
	"github.com/spf13/pflag"
)

func init() {
	register(&command{
		Name:    "scenario run",
		Summary: "run the engine under real memory/CPU pressure (cgroups) and compare policies side by side",
		Usage:   "FILE.yaml -o DIR",
		Flags: func(fs *pflag.FlagSet) {
			addJSONFlag(fs)
			fs.StringP("output", "o", "", "output directory: report.json, report.html, charts, engine logs (required)")
			fs.Bool("simulate", false, "do not touch cgroups: trace-only pressure, labelled SIMULATED")
			fs.String("policy-dir", "", "prebuilt builtin policies: DIR/<name>.wasm (default: the source tree's policies/<name>/<name>.wasm from `make policies`)")
			fs.Bool("build-policies", false, "build builtin policies from the source tree with the Go toolchain")
		},
		Run: runScenario,
	})
}

type scenarioOptions struct {
	JSON          bool   `koanf:"json"`
	Output        string `koanf:"output"`
	Simulate      bool   `koanf:"simulate"`
	PolicyDir     string `koanf:"policy-dir"`
	BuildPolicies bool   `koanf:"build-policies"`
}

func runScenario(c *cmdEnv, args []string) error {
	var o scenarioOptions
	if err := c.Decode(&o); err != nil {
		return err
	}
	if len(args) != 1 {
		return usagef("want one scenario file, got %d arguments", len(args))
	}
	if o.Output == "" {
		return usagef("--output (-o) is required")
	}
	spec, err := scenario.ReadFile(args[0])
	if err != nil {
		return err
	}
	rep, err := scenario.Run(c.Ctx, spec, scenario.Options{OutDir: o.Output, Simulate: o.Simulate, Env: scenarioChildEnv, Logf: c.Logf,
		PolicyDir: o.PolicyDir, BuildPolicies: o.BuildPolicies})
	if err != nil {
		return err
	}
	files, err := scenario.WriteReport(rep, o.Output)
	if err != nil {
		return err
	}
	if o.JSON {
		return scenario.EncodeJSON(c.Stdout, rep)
	}
	if rep.Simulated {
		fmt.Fprintf(c.Stdout, "scenario %s — pressure SIMULATED: %s\n", rep.Scenario, rep.Pressure)
	} else {
		fmt.Fprintf(c.Stdout, "scenario %s — pressure %s\n", rep.Scenario, rep.Pressure)
	}
	scenario.WriteTable(c.Stdout, rep)
	for _, f := range files {
		rel, err := filepath.Rel(".", f)
		if err != nil {
			rel = f
		}
		c.Logf("wrote %s", rel)
	}
	return nil
}

// scenarioChildEnv is added to the environment of the engine processes
// (tests set it so the test binary acts as edgellm).
var scenarioChildEnv []string
