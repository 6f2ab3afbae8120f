package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/spf13/pflag"

	"github.com/edgellm/edgellm/host/policy"
	"github.com/edgellm/edgellm/host/policy/update"
)

func init() {
	register(&command{
		Name:    "policy state",
		Summary: "print the persisted rollback index (highest accepted revision per policy), or reset it",
		Usage:   "[--policy-state DIR] [--policy-name NAME] [--reset]",
		Flags: func(fs *pflag.FlagSet) {
			fs.String("policy-state", "", policyStateHelp)
			fs.String("policy-name", "", "the --policy-repo state of this policy name (DIR/repo-NAME: last-good module, TUF metadata versions); --reset moves it aside")
			fs.Bool("reset", false, "move the index aside (rollback.json.reset-TIME) so the next start is a first boot: the explicit reset a corrupt index needs; it also re-allows old revisions")
		},
		Run: runPolicyState,
	})
}

type policyStateOptions struct {
	PolicyState string `koanf:"policy-state"`
	Reset       bool   `koanf:"reset"`
	PolicyName  string `koanf:"policy-name"`
}

func runPolicyState(c *cmdEnv, args []string) error {
	var o policyStateOptions
	if err := c.Decode(&o); err != nil {
		return err
	}
	if len(args) != 0 {
		return usagef("policy state takes no arguments")
	}
	dir, err := resolvePolicyStateDir(o.PolicyState)
	if err != nil {
		return err
	}
	if dir == "" {
		return usagef("--policy-state -: an in-memory index has nothing to show")
	}
	if o.PolicyName != "" {
		if err := update.ValidName(o.PolicyName); err != nil {
			return usagef("--policy-name: %v", err)
		}
		sdir := filepath.Join(dir, "repo-"+o.PolicyName)
		if o.Reset {
			aside, err := update.ResetState(sdir)
			if err != nil {
				return err
			}
			if aside == "" {
				c.Logf("no state in %s: nothing to reset", sdir)
			} else {
				c.Logf("state moved to %s; the next start is a first boot (the shipped root.json is trusted again)", aside)
			}
			return nil
		}
		s, err := update.DescribeState(sdir)
		if errors.Is(err, os.ErrNotExist) {
			c.Logf("no state in %s", sdir)
			return nil
		}
		if err != nil {
			return err
		}
		fmt.Fprint(c.Stdout, s)
		return nil
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) && !o.Reset {
		c.Logf("no rollback index in %s", dir) // printing creates nothing
		return nil
	}
	if o.Reset {
		aside, err := policy.ResetRollbackIndex(dir)
		if err != nil {
			return err
		}
		if aside == "" {
			c.Logf("no rollback index in %s: nothing to reset", dir)
		} else {
			c.Logf("rollback index moved to %s; the next start is a first boot", aside)
		}
		return nil
	}
	x, err := policy.OpenRollbackIndex(dir)
	if err != nil {
		return err
	}
	if err := x.Err(); err != nil {
		return err
	}
	revs := x.Revisions()
	names := make([]string, 0, len(revs))
	for n := range revs {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(c.Stdout, "# %s\n", x.Path())
	for _, n := range names {
		fmt.Fprintf(c.Stdout, "%s\t%d\n", n, revs[n])
	}
	return nil
}
