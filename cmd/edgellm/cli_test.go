package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// runCLI runs the CLI in-process and returns stdout, stderr and the exit code.
func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

type configEntry struct {
	Key, Source string
	Value       any
}

func configJSON(t *testing.T, args ...string) map[string]configEntry {
	t.Helper()
	out, errs, code := runCLI(t, append([]string{"config", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("config: exit %d: %s", code, errs)
	}
	var doc struct {
		Settings []configEntry
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("config --json: %v\n%s", err, out)
	}
	m := map[string]configEntry{}
	for _, e := range doc.Settings {
		m[e.Key] = e
	}
	return m
}

func TestSettingsPrecedence(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, k := range []string{"EDGELLM_CTX", "EDGELLM_THREADS", "EDGELLM_KV_TYPE", "EDGELLM_MODEL", "EDGELLM_CONFIG"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	// defaults only
	m := configJSON(t)
	if e := m["ctx"]; e.Source != "default" || e.Value != float64(2048) {
		t.Fatalf("ctx default: %+v", e)
	}
	// ./edgellm.yaml overrides defaults
	os.WriteFile(filepath.Join(dir, "edgellm.yaml"), []byte("ctx: 512\nthreads: 1\nkv-type: q8_0\n"), 0o644)
	m = configJSON(t)
	if e := m["ctx"]; e.Source != "file edgellm.yaml" || e.Value != float64(512) {
		t.Fatalf("ctx from file: %+v", e)
	}
	// environment overrides the file
	t.Setenv("EDGELLM_CTX", "1024")
	m = configJSON(t)
	if e := m["ctx"]; e.Source != "env EDGELLM_CTX" || e.Value != "1024" && e.Value != float64(1024) {
		t.Fatalf("ctx from env: %+v", e)
	}
	// flags override the environment
	m = configJSON(t, "--ctx", "256")
	if e := m["ctx"]; e.Source != "flag" || e.Value != float64(256) {
		t.Fatalf("ctx from flag: %+v", e)
	}
	if e := m["threads"]; e.Source != "file edgellm.yaml" {
		t.Fatalf("threads: %+v", e)
	}
	// --config names another file
	other := filepath.Join(dir, "other.yaml")
	os.WriteFile(other, []byte("kv-type: q4_0\n"), 0o644)
	m = configJSON(t, "--config", other)
	if e := m["kv-type"]; e.Value != "q4_0" {
		t.Fatalf("kv-type from --config: %+v", e)
	}
}

func TestSettingsErrors(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	tests := []struct {
		name    string
		file    string
		env     [2]string
		args    []string
		wantErr string
	}{
		{"unknown key in file", "ctxx: 5\n", [2]string{}, nil, `unknown key "ctxx"`},
		{"bad value in file", "ctx: lots\n", [2]string{}, nil, "invalid value"},
		{"bad value in env", "", [2]string{"EDGELLM_CTX", "many"}, nil, "EDGELLM_CTX"},
		{"missing --config file", "", [2]string{}, []string{"--config", "nope.yaml"}, "nope.yaml"},
		{"unknown flag", "", [2]string{}, []string{"--no-such-flag"}, "unknown flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(filepath.Join(dir, "edgellm.yaml"))
			if tt.file != "" {
				os.WriteFile(filepath.Join(dir, "edgellm.yaml"), []byte(tt.file), 0o644)
			}
			if tt.env[0] != "" {
				t.Setenv(tt.env[0], tt.env[1])
			}
			_, errs, code := runCLI(t, append([]string{"config"}, tt.args...)...)
			if code != 2 || !strings.Contains(errs, tt.wantErr) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
				t.Fatalf("exit %d, stderr %q; want exit 2 and one line containing %q", code, errs, tt.wantErr)
			}
		})
	}
}

// TestEnvShorthandKey: EDGELLM_N (run's -n) was silently ignored; the key is
// the long name, and the short one is an error saying so.
func TestEnvShorthandKey(t *testing.T) {
	t.Setenv("EDGELLM_N", "500")
	_, errs, code := runCLI(t, "run", "-m", "no-such-model.gguf")
	if code != 2 || !strings.Contains(errs, "use EDGELLM_N_PREDICT") {
		t.Fatalf("exit %d, stderr %q; want exit 2 naming EDGELLM_N_PREDICT", code, errs)
	}
}

func TestUnknownCommand(t *testing.T) {
	_, errs, code := runCLI(t, "frobnicate")
	if code != 2 || !strings.Contains(errs, `unknown command "frobnicate"`) {
		t.Fatalf("exit %d, %q", code, errs)
	}
	out, _, code := runCLI(t, "help")
	if code != 0 || !strings.Contains(out, "version") {
		t.Fatalf("help: exit %d, %q", code, out)
	}
}

// A key shared by several commands must have the same type and default in
// each, since the config file and environment set it for all of them.
func TestSharedFlagsAgree(t *testing.T) {
	type def struct{ typ, val, cmd string }
	seen := map[string]def{}
	for name, c := range commands {
		if c.Flags == nil || name == "config" {
			continue
		}
		fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
		c.Flags(fs)
		fs.VisitAll(func(f *pflag.Flag) {
			d := def{f.Value.Type(), f.DefValue, name}
			if prev, ok := seen[f.Name]; ok && (prev.typ != d.typ || prev.val != d.val) {
				t.Errorf("flag --%s: %s has %s=%s, %s has %s=%s", f.Name, prev.cmd, prev.typ, prev.val, name, d.typ, d.val)
			}
			seen[f.Name] = d
		})
	}
}

func TestVersion(t *testing.T) {
	out, _, code := runCLI(t, "version")
	if code != 0 || !strings.Contains(out, "llama.cpp ") || !strings.Contains(out, "CPU") {
		t.Fatalf("exit %d: %q", code, out)
	}
}
