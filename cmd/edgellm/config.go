package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"text/tabwriter"

	"github.com/spf13/pflag"
)

func init() {
	register(&command{
		Name:    "config",
		Summary: "print the effective settings and where each value came from",
		Usage:   "[--json]",
		Flags: func(fs *pflag.FlagSet) {
			// Every key of every command, so all of them can be shown.
			seen := map[string]bool{"config": true, "json": true}
			fs.Bool("json", false, "print JSON")
			names := make([]string, 0, len(commands))
			for n := range commands {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				c := commands[n]
				if c.Name == "config" || c.Flags == nil {
					continue
				}
				sub := pflag.NewFlagSet(n, pflag.ContinueOnError)
				c.Flags(sub)
				sub.VisitAll(func(f *pflag.Flag) {
					if seen[f.Name] {
						return
					}
					seen[f.Name] = true
					if f.Shorthand != "" && fs.ShorthandLookup(f.Shorthand) != nil {
						// Commands reuse short letters (-n, -o) for different
						// keys; here every key is spelled out.
						cp := *f
						cp.Shorthand = ""
						f = &cp
					}
					fs.AddFlag(f)
				})
			}
		},
		Run: runConfig,
	})
}

func runConfig(c *cmdEnv, args []string) error {
	if len(args) > 0 {
		return usagef("config takes no arguments")
	}
	type entry struct {
		Key    string `json:"key"`
		Value  any    `json:"value"`
		Source string `json:"source"`
		Env    string `json:"env"`
	}
	var entries []entry
	for _, k := range c.Settings.Keys() {
		if k == "json" {
			continue
		}
		v, src := c.Settings.Get(k)
		entries = append(entries, entry{k, v, src, envName(k)})
	}
	if asJSON, _ := c.Settings.Get("json"); asJSON == true {
		enc := json.NewEncoder(c.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"config_file": c.Settings.File, "settings": entries})
	}
	file := c.Settings.File
	if file == "" {
		file = "(none)"
	}
	fmt.Fprintf(c.Stdout, "config file: %s\n", file)
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE\tENV")
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%v\t%s\t%s\n", e.Key, e.Value, e.Source, e.Env)
	}
	return tw.Flush()
}
