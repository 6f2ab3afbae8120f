package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/edgellm/edgellm/internal/wasmbuild"
	"github.com/spf13/pflag"
)

// `edgellm policy test DIR`, in the spirit of `opa test`: build the policy
// in DIR to Wasm, then run its Go tests with EDGELLM_POLICY_WASM pointing at
// the module, so the same table runs natively and (through policytest)
// against the .wasm in the real host runtime. Fails when no test ran.

func init() {
	register(&command{
		Name:    "policy test",
		Summary: "run a policy's tests natively and against its built .wasm; fail when no test ran",
		Usage:   "DIR [--run REGEXP] [-v]",
		Flags: func(fs *pflag.FlagSet) {
			fs.String("run", "", "only tests matching this regexp (go test -run)")
			fs.BoolP("verbose", "v", false, "print every test's output")
		},
		Run: runPolicyTest,
	})
}

type policyTestOptions struct {
	Run     string `koanf:"run"`
	Verbose bool   `koanf:"verbose"`
}

// goTestEvent is one line of `go test -json`.
type goTestEvent struct {
	Action  string
	Package string
	Test    string
	Output  string
}

func runPolicyTest(c *cmdEnv, args []string) error {
	var o policyTestOptions
	if err := c.Decode(&o); err != nil {
		return err
	}
	if len(args) != 1 {
		return usagef("policy test needs one policy DIR")
	}
	// Absolute: the build commands run with Dir set to it, and a relative
	// compiler path under it (node_modules/.bin/asc) would be resolved
	// from there a second time.
	dir, err := filepath.Abs(args[0])
	if err != nil {
		return err
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s: not a directory", args[0])
	}
	tmp, err := os.MkdirTemp("", "edgellm-policy-test")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	wasm := filepath.Join(tmp, "policy.wasm")
	gobin := wasmbuild.GoTool()

	c.Logf("building %s to %s", dir, wasm)
	if isAssemblyScriptPolicy(dir) {
		if err := buildAssemblyScript(c, dir, wasm); err != nil {
			return err
		}
	} else {
		if err := wasmbuild.BuildFile(c.Ctx, dir, wasm); err != nil {
			return err
		}
	}

	testArgs := []string{"test", "-json", "-count=1"}
	if o.Run != "" {
		testArgs = append(testArgs, "-run", o.Run)
	}
	testArgs = append(testArgs, "./...")
	cmd := exec.CommandContext(c.Ctx, gobin, testArgs...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "EDGELLM_POLICY_WASM="+wasm)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	sum := summarizeGoTest(stdout, c.Stderr, o.Verbose)
	runErr := cmd.Wait()
	for _, f := range sum.failed {
		fmt.Fprintf(c.Stdout, "FAIL %s\n", f)
	}
	fmt.Fprintf(c.Stdout, "%d passed, %d failed, %d skipped\n", sum.passed, len(sum.failed), sum.skipped)
	switch {
	case len(sum.failed) > 0:
		return fmt.Errorf("%d test(s) failed", len(sum.failed))
	case runErr != nil:
		return fmt.Errorf("go test: %v: %s", runErr, strings.TrimSpace(stderr.String()))
	case sum.passed == 0:
		return fmt.Errorf("no test ran in %s", dir)
	}
	return nil
}

type goTestSummary struct {
	passed, skipped int
	failed          []string
}

// summarizeGoTest reads `go test -json` and counts test (not package)
// results; failing tests' output goes to log.
func summarizeGoTest(r io.Reader, log io.Writer, verbose bool) goTestSummary {
	var s goTestSummary
	output := map[string]*strings.Builder{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var ev goTestEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		if ev.Test == "" {
			if ev.Action == "output" && (verbose || strings.Contains(ev.Output, "FAIL") || strings.Contains(ev.Output, "build failed")) {
				fmt.Fprint(log, ev.Output)
			}
			if ev.Action == "fail" {
				s.failed = append(s.failed, ev.Package+" (package)")
			}
			continue
		}
		key := ev.Package + " " + ev.Test
		switch ev.Action {
		case "output":
			if verbose {
				fmt.Fprint(log, ev.Output)
			}
			b := output[key]
			if b == nil {
				b = &strings.Builder{}
				output[key] = b
			}
			b.WriteString(ev.Output)
		case "pass":
			s.passed++
		case "skip":
			s.skipped++
		case "fail":
			s.failed = append(s.failed, key)
			if b := output[key]; b != nil && !verbose {
				fmt.Fprint(log, b.String())
			}
		}
	}
	sort.Strings(s.failed)
	return s
}
