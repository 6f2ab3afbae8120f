package main

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"sort"
	"strings"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"
)

// Settings are resolved in one place, lowest precedence first:
//
//	defaults (the flag defaults) < config file < environment EDGELLM_<KEY> < flags
//
// Every key is a flag name ("kv-type"); its environment variable is the name
// upper-cased with '-' as '_' (EDGELLM_KV_TYPE), and the config file (YAML) uses
// the flag name as key. The config file is --config FILE, else EDGELLM_CONFIG,
// else ./edgellm.yaml when it exists.

const (
	configFlag    = "config"
	envPrefix     = "EDGELLM_"
	defaultConfig = "edgellm.yaml"
)

// Settings is the effective configuration of one command invocation.
type Settings struct {
	k      *koanf.Koanf
	source map[string]string // key -> "default", "file PATH", "env EDGELLM_X" or "flag"
	File   string            // the config file read, "" if none
}

// envName is the environment variable for a settings key.
func envName(key string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(key, "-", "_"))
}

// knownKeys is every flag name of every command: the keys a config file may use.
func knownKeys() map[string]bool {
	keys := map[string]bool{}
	for _, c := range commands {
		newFlagSet(c).VisitAll(func(f *pflag.Flag) { keys[f.Name] = true })
	}
	delete(keys, configFlag)
	return keys
}

// LoadSettings resolves the settings for the parsed flag set fs. environ is
// os.Environ() (injected for tests). Values from the file and environment are
// checked with the flag's own parser, so a bad value names its key and source.
func LoadSettings(fs *pflag.FlagSet, environ []string) (*Settings, error) {
	s := &Settings{k: koanf.New("."), source: map[string]string{}}
	check := func(key, val, src string) error {
		f := fs.Lookup(key)
		if f == nil {
			return nil
		}
		scratch := pflag.NewFlagSet("check", pflag.ContinueOnError)
		scratch.AddFlag(&pflag.Flag{Name: key, Value: cloneValue(f)})
		if err := scratch.Set(key, val); err != nil {
			return fmt.Errorf("%s: invalid value %q for %s: %v", src, val, key, err)
		}
		return nil
	}

	// 1. defaults: every flag's default.
	defaults := map[string]any{}
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name != configFlag {
			defaults[f.Name] = posflag.FlagVal(fs, f)
			s.source[f.Name] = "default"
		}
	})
	if err := s.k.Load(confmap.Provider(defaults, "."), nil); err != nil {
		return nil, err
	}

	// 2. the config file.
	path, explicit := "", false
	if f := fs.Lookup(configFlag); f != nil && f.Changed {
		path, explicit = f.Value.String(), true
	} else if v := lookupEnv(environ, envPrefix+"CONFIG"); v != "" {
		path, explicit = v, true
	} else if _, err := os.Stat(defaultConfig); err == nil {
		path = defaultConfig
	}
	if path != "" {
		fk := koanf.New(".")
		if err := fk.Load(file.Provider(path), yaml.Parser()); err != nil {
			if errors.Is(err, iofs.ErrNotExist) && !explicit {
				path = ""
			} else {
				return nil, fmt.Errorf("config file %s: %v", path, err)
			}
		}
		if path != "" {
			known := knownKeys()
			for _, key := range fk.Keys() {
				if !known[key] {
					return nil, fmt.Errorf("config file %s: unknown key %q", path, key)
				}
				if fs.Lookup(key) == nil {
					continue // a key for another command
				}
				val := fk.Get(key)
				str := valueString(val)
				if err := check(key, str, "config file "+path); err != nil {
					return nil, err
				}
				s.k.Set(key, val)
				s.source[key] = "file " + path
			}
			s.File = path
		}
	}

	// 3. the environment. Keys are long flag names: EDGELLM_N for -n would
	// be silently ignored, so it is an error naming the key to use.
	var shortErr error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Shorthand == "" || shortErr != nil || fs.Lookup(f.Shorthand) != nil {
			return
		}
		if _, ok := lookupEnvOK(environ, envName(f.Shorthand)); ok {
			shortErr = fmt.Errorf("environment %s: keys are long flag names: use %s (-%s is --%s)",
				envName(f.Shorthand), envName(f.Name), f.Shorthand, f.Name)
		}
	})
	if shortErr != nil {
		return nil, shortErr
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name == configFlag {
			return
		}
		if v, ok := lookupEnvOK(environ, envName(f.Name)); ok {
			s.k.Set(f.Name, v)
			s.source[f.Name] = "env " + envName(f.Name)
		}
	})
	for key, src := range s.source {
		if strings.HasPrefix(src, "env ") {
			if err := check(key, s.k.String(key), "environment "+strings.TrimPrefix(src, "env ")); err != nil {
				return nil, err
			}
		}
	}

	// 4. flags given on the command line.
	var err error
	fs.Visit(func(f *pflag.Flag) {
		if f.Name == configFlag || err != nil {
			return
		}
		s.k.Set(f.Name, posflag.FlagVal(fs, f))
		s.source[f.Name] = "flag"
	})
	return s, err
}

// Decode fills opts (a struct with `koanf:"key"` tags) from the settings.
func (s *Settings) Decode(opts any) error {
	return s.k.UnmarshalWithConf("", opts, koanf.UnmarshalConf{Tag: "koanf"})
}

// Keys lists the keys in sorted order.
func (s *Settings) Keys() []string {
	keys := make([]string, 0, len(s.source))
	for k := range s.source {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Get returns a key's effective value and where it came from.
func (s *Settings) Get(key string) (any, string) { return s.k.Get(key), s.source[key] }

// String returns a key's value as a string ("" if unset).
func (s *Settings) String(key string) string { return s.k.String(key) }

// Source says where a key's value came from.
func (s *Settings) Source(key string) string { return s.source[key] }

func lookupEnv(environ []string, name string) string {
	v, _ := lookupEnvOK(environ, name)
	return v
}

func lookupEnvOK(environ []string, name string) (string, bool) {
	for i := len(environ) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(environ[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

func valueString(v any) string {
	switch x := v.(type) {
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = fmt.Sprint(e)
		}
		return strings.Join(parts, ",")
	case []string:
		return strings.Join(x, ",")
	default:
		return fmt.Sprint(v)
	}
}

// cloneValue makes a fresh pflag.Value of the same type as f's, for checking a
// value without touching the real flag. Types it does not know are not checked.
func cloneValue(f *pflag.Flag) pflag.Value {
	sc := pflag.NewFlagSet("clone", pflag.ContinueOnError)
	switch f.Value.Type() {
	case "int":
		sc.Int("x", 0, "")
	case "int64":
		sc.Int64("x", 0, "")
	case "uint":
		sc.Uint("x", 0, "")
	case "uint64":
		sc.Uint64("x", 0, "")
	case "float64":
		sc.Float64("x", 0, "")
	case "float32":
		sc.Float32("x", 0, "")
	case "bool":
		sc.Bool("x", false, "")
	case "duration":
		sc.Duration("x", 0, "")
	case "stringSlice":
		sc.StringSlice("x", nil, "")
	case "intSlice":
		sc.IntSlice("x", nil, "")
	default:
		sc.String("x", "", "")
	}
	return sc.Lookup("x").Value
}
