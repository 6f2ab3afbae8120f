package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
)

// command is one subcommand. Each lives in its own file and registers itself
// from init with register. Name may have two words ("policy sign").
type command struct {
	Name    string
	Summary string
	// Usage is the argument synopsis after the name, e.g. "IN OUT TYPE".
	Usage string
	// Flags declares the command's flags. Every flag name is also a settings
	// key, so it can come from the config file or EDGELLM_* as well.
	Flags func(fs *pflag.FlagSet)
	// Run does the work. Errors are printed as one line; usageError exits 2.
	Run func(c *cmdEnv, args []string) error
}

// cmdEnv is what a command runs with: injected output streams, the resolved
// settings and a context cancelled on SIGINT/SIGTERM.
type cmdEnv struct {
	Ctx      context.Context
	Stdout   io.Writer
	Stderr   io.Writer
	Settings *Settings
}

// Decode fills a command's typed options struct (fields tagged `koanf:"key"`)
// from the resolved settings.
func (c *cmdEnv) Decode(opts any) error { return c.Settings.Decode(opts) }

// Logf writes a progress or status line to stderr.
func (c *cmdEnv) Logf(format string, args ...any) {
	fmt.Fprintf(c.Stderr, format+"\n", args...)
}

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.Name]; dup {
		panic("edgellm: command registered twice: " + c.Name)
	}
	commands[c.Name] = c
}

// usageError marks a mistake in how the command was called (exit code 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// Main runs the CLI with args (without the program name) and returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, args, stdout, stderr)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			if cmd, _ := lookup(args[1:]); cmd != nil {
				printCommandHelp(stdout, cmd)
				return 0
			}
		}
		printHelp(stdout)
		return 0
	}
	cmd, rest := lookup(args)
	if cmd == nil {
		fmt.Fprintf(stderr, "edgellm: unknown command %q (see 'edgellm help')\n", strings.Join(args[:min(2, len(args))], " "))
		return 2
	}
	fs := newFlagSet(cmd)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			printCommandHelp(stdout, cmd)
			return 0
		}
		fmt.Fprintf(stderr, "edgellm %s: %v (see 'edgellm help %s')\n", cmd.Name, err, cmd.Name)
		return 2
	}
	settings, err := LoadSettings(fs, os.Environ())
	if err != nil {
		fmt.Fprintf(stderr, "edgellm %s: %v\n", cmd.Name, err)
		return 2
	}
	out := &stickyWriter{w: stdout}
	env := &cmdEnv{Ctx: ctx, Stdout: out, Stderr: stderr, Settings: settings}
	err = cmd.Run(env, fs.Args())
	if err == nil && out.err != nil {
		// A command's product that did not reach stdout (a full disk, a
		// closed pipe) is a failure even where the command did not check.
		err = fmt.Errorf("writing standard output: %w", out.err)
	}
	if err != nil {
		fmt.Fprintf(stderr, "edgellm %s: %v\n", cmd.Name, err)
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

// stickyWriter remembers the first write error of the writer it wraps.
type stickyWriter struct {
	w   io.Writer
	err error
}

func (s *stickyWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if err != nil && s.err == nil {
		s.err = err
	}
	return n, err
}

// lookup finds the longest registered command name at the start of args.
func lookup(args []string) (*command, []string) {
	if len(args) >= 2 {
		if c, ok := commands[args[0]+" "+args[1]]; ok {
			return c, args[2:]
		}
	}
	if c, ok := commands[args[0]]; ok {
		return c, args[1:]
	}
	return nil, nil
}

// newFlagSet builds the flag set of a command: its own flags plus --config.
func newFlagSet(cmd *command) *pflag.FlagSet {
	fs := pflag.NewFlagSet(cmd.Name, pflag.ContinueOnError)
	fs.SortFlags = false
	fs.String(configFlag, "", "configuration file (YAML); default ./edgellm.yaml if present")
	if cmd.Flags != nil {
		cmd.Flags(fs)
	}
	return fs
}

func printHelp(w io.Writer) {
	fmt.Fprintln(w, "edgellm — an adaptive on-device LLM runtime")
	fmt.Fprintln(w, "\nUsage: edgellm COMMAND [flags] [args]\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-16s %s\n", n, commands[n].Summary)
	}
	fmt.Fprintln(w, "\nSettings come from flags > environment EDGELLM_<KEY> > config file (--config FILE or ./edgellm.yaml) > defaults.")
	fmt.Fprintln(w, "'edgellm config' prints the effective settings and where each came from; 'edgellm help COMMAND' lists a command's flags.")
}

func printCommandHelp(w io.Writer, cmd *command) {
	fmt.Fprintf(w, "Usage: edgellm %s [flags] %s\n\n%s\n\nFlags (each also settable as EDGELLM_<FLAG> or in the config file):\n", cmd.Name, cmd.Usage, cmd.Summary)
	fs := newFlagSet(cmd)
	fmt.Fprint(w, fs.FlagUsages())
}
