package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/synth"
	"go.yaml.in/yaml/v3"
)

// Spec is a scenario file. Relative paths in it are relative to the file.
type Spec struct {
	Name    string `yaml:"name"`
	Model   Model  `yaml:"model"`
	Prompt  string `yaml:"prompt"`
	N       int    `yaml:"n"`       // tokens to generate
	Threads int    `yaml:"threads"` // default 1
	Ctx     int    `yaml:"ctx"`     // default 512
	// Engine is the engine the runs use: "auto" (the default: native for
	// llama ladders, which maps the tiers as weight sets and swaps by
	// pointer), "native" or "llamacpp" (reads the weights into memory,
	// --no-mmap, and swaps by reloading: the reference).
	Engine string `yaml:"engine"`
	// Repack runs every contender with --repack (native engine): the
	// weights' repacked copy is anonymous memory the cgroup charges, which
	// a policy can release (ABI 1.4).
	Repack   bool     `yaml:"repack"`
	Policies []Policy `yaml:"policies"`
	Memory   *Memory  `yaml:"memory"`
	Thermal  *Thermal `yaml:"thermal"`
	Serve    *Serve   `yaml:"serve"` // run the policies under `edgellm serve` (spec_serve.go)
	CPU      *CPU     `yaml:"cpu"`
	// Repeats runs every contender this many times (cpu scenarios only;
	// default 1), in alternating order, and reports each CPU phase from
	// the repeat with the median tok/s there: the same configuration run
	// twice differs by 10–40% on a shared machine, more than the 10% a
	// contender comparison wants to resolve.
	Repeats int `yaml:"repeats"`

	// Dir is the directory relative paths are resolved against.
	Dir string `yaml:"-"`
	// File is where the spec was read from ("" when parsed from memory).
	File string `yaml:"-"`
}

// Model is the tier ladder: GGUF files (high to low precision) or a
// synthetic model made at each type with the same seed.
type Model struct {
	Tiers []string `yaml:"tiers"`
	Synth *Synth   `yaml:"synth"`
}

// Synth describes a SYNTHETIC tier ladder (random weights, real tokenizer).
type Synth struct {
	Shape   string   `yaml:"shape"` // a named shape of `edgellm synth`
	NEmbd   int      `yaml:"n_embd"`
	NLayer  int      `yaml:"n_layer"`
	NHead   int      `yaml:"n_head"`
	NHeadKV int      `yaml:"n_head_kv"`
	NFF     int      `yaml:"n_ff"`
	Types   []string `yaml:"types"` // one tier per type, high to low precision
	Seed    uint64   `yaml:"seed"`
	Vocab   string   `yaml:"vocab"` // "" = the shared llama-spm vocabulary
}

// Policy is one contender: a .wasm file or a reference policy built from
// policies/<builtin>.
type Policy struct {
	Name    string `yaml:"name"`
	Wasm    string `yaml:"wasm"`
	Builtin string `yaml:"builtin"`
	// Threads is this contender's starting decode thread count (0: the
	// scenario's threads), so static -t 1 and static -t 2 can both run.
	Threads int `yaml:"threads"`
	// PerLayer runs this contender on tier 0 with the lower tiers mapped as
	// per-layer weight sets and a precision manifest (spec_perlayer.go).
	PerLayer *PerLayer `yaml:"per_layer"`
}

// Memory is the memory pressure: a cgroup limit on the engine and
// background apps (hogs) that take memory inside the same limit.
type Memory struct {
	LimitMB int   `yaml:"limit_mb"`
	Hog     *Hog  `yaml:"hog"`  // one hog (shorthand for hogs: [hog])
	Hogs    []Hog `yaml:"hogs"` // several, in any order
}

// Hog is a background app that takes MB MiB at a time: AtMs after the
// engine process started, or once it has generated AtToken tokens.
type Hog struct {
	AtMs    *int64 `yaml:"at_ms"`
	AtToken *int   `yaml:"at_token"`
	MB      int    `yaml:"mb"`
}

// Thermal is emulated throttling: the CPU quota of the engine's cgroup is
// lowered at given tokens while the trace the policy reads reports the
// matching thermal status.
type Thermal struct {
	Schedule []ThermalStep `yaml:"schedule"`
}

// ThermalStep applies from token AtToken on: CPUs CPUs' worth of CPU time
// (0 = no quota) and the thermal status Status (none … shutdown).
type ThermalStep struct {
	AtToken *int    `yaml:"at_token"`
	AtMs    *int64  `yaml:"at_ms"` // rejected with an explanation (see Validate)
	CPUs    float64 `yaml:"cpus"`
	Status  string  `yaml:"status"`

	status abi.ThermalStatus
}

// ReadFile reads and validates a scenario file.
func ReadFile(path string) (*Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	s, err := Parse(bytes.NewReader(b), filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", path, err)
	}
	s.File = path
	return s, nil
}

// Parse decodes a scenario (unknown keys are errors) and validates it; dir
// resolves relative paths.
func Parse(r io.Reader, dir string) (*Spec, error) {
	dec := yaml.NewDecoder(r)
	dec.KnownFields(true)
	var s Spec
	if err := dec.Decode(&s); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty scenario")
		}
		return nil, fmt.Errorf("%v", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	s.Dir = dir
	if err := s.validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.]*(-[A-Za-z0-9_.]+)*$`)

// validate checks every field and fills defaults.
func (s *Spec) validate() error {
	if !nameRE.MatchString(s.Name) || len(s.Name) > 40 {
		return fmt.Errorf("name %q: want 1–40 letters, digits, '.', '_' or single '-'", s.Name)
	}
	if err := s.Model.validate(); err != nil {
		return err
	}
	if s.N <= 0 || s.N > 100000 {
		return fmt.Errorf("n %d: want 1–100000 tokens", s.N)
	}
	if s.Threads == 0 {
		s.Threads = 1
	}
	if s.Threads < 0 || s.Threads > 256 {
		return fmt.Errorf("threads %d: want 1–256", s.Threads)
	}
	if s.Ctx == 0 {
		s.Ctx = 512
	}
	switch s.Engine {
	case "":
		s.Engine = "auto"
	case "auto", "native", "llamacpp":
	default:
		return fmt.Errorf("engine %q: want auto, native or llamacpp", s.Engine)
	}
	switch {
	case s.Repeats == 0:
		s.Repeats = 1
	case s.Repeats < 1 || s.Repeats > 9:
		return fmt.Errorf("repeats %d: want 1–9", s.Repeats)
	case s.Repeats > 1 && s.CPU == nil:
		return fmt.Errorf("repeats %d: only cpu scenarios repeat their contenders (a memory or thermal run's outcome is one run's)", s.Repeats)
	}
	if s.Repack && s.Engine == "llamacpp" {
		return fmt.Errorf("repack: true needs the native engine (engine: %s repacks all or nothing and runs with --no-mmap here)", s.Engine)
	}
	if s.Ctx < 16 || s.Ctx > 1<<20 {
		return fmt.Errorf("ctx %d: want 16–1048576", s.Ctx)
	}
	if s.N >= s.Ctx {
		return fmt.Errorf("n %d does not fit in ctx %d with the prompt", s.N, s.Ctx)
	}
	if len(s.Policies) == 0 {
		return errors.New("policies: at least one is needed")
	}
	seen := map[string]bool{}
	for i := range s.Policies {
		p := &s.Policies[i]
		if !nameRE.MatchString(p.Name) || len(p.Name) > 40 {
			return fmt.Errorf("policies[%d].name %q: want 1–40 letters, digits, '.', '_' or single '-'", i, p.Name)
		}
		if seen[p.Name] {
			return fmt.Errorf("policies[%d]: name %q used twice", i, p.Name)
		}
		seen[p.Name] = true
		switch {
		case (p.Wasm == "") == (p.Builtin == ""):
			return fmt.Errorf("policies[%d] (%s): give exactly one of wasm or builtin", i, p.Name)
		case p.Builtin != "" && !nameRE.MatchString(p.Builtin):
			return fmt.Errorf("policies[%d] (%s): builtin %q is not a policy name", i, p.Name, p.Builtin)
		case p.Threads < 0 || p.Threads > 256:
			return fmt.Errorf("policies[%d] (%s): threads %d: want 0 (the scenario's) to 256", i, p.Name, p.Threads)
		}
		if p.PerLayer != nil {
			if err := p.PerLayer.validate(s); err != nil {
				return fmt.Errorf("policies[%d] (%s).per_layer: %w", i, p.Name, err)
			}
		}
	}
	if s.Serve != nil {
		if err := s.Serve.validate(s); err != nil {
			return err
		}
	}
	if s.Memory == nil && s.Thermal == nil && s.CPU == nil {
		return errors.New("no pressure: give memory, thermal or cpu")
	}
	if s.CPU != nil {
		if s.Serve != nil {
			return errors.New("cpu: not supported in serve mode yet")
		}
		if s.Memory != nil || s.Thermal != nil {
			return errors.New("cpu: cannot be combined with memory or thermal pressure (the policy reads live CPU load; the others need their own sensors)")
		}
		if err := s.CPU.validate(s.N); err != nil {
			return err
		}
	}
	if m := s.Memory; m != nil {
		if m.LimitMB < 16 || m.LimitMB > 1<<20 {
			return fmt.Errorf("memory.limit_mb %d: want 16–1048576", m.LimitMB)
		}
		if m.Hog != nil {
			m.Hogs = append([]Hog{*m.Hog}, m.Hogs...)
			m.Hog = nil
		}
		for i, h := range m.Hogs {
			switch {
			case (h.AtMs == nil) == (h.AtToken == nil):
				return fmt.Errorf("memory.hogs[%d]: give exactly one of at_ms or at_token", i)
			case h.AtMs != nil && *h.AtMs < 0:
				return fmt.Errorf("memory.hogs[%d].at_ms %d: must be ≥ 0", i, *h.AtMs)
			case h.AtToken != nil && (*h.AtToken < 0 || *h.AtToken >= s.N):
				return fmt.Errorf("memory.hogs[%d].at_token %d: want 0–%d (n is %d)", i, *h.AtToken, s.N-1, s.N)
			case h.MB <= 0 || h.MB > 1<<20:
				return fmt.Errorf("memory.hogs[%d].mb %d: want 1–1048576", i, h.MB)
			}
		}
	}
	if t := s.Thermal; t != nil {
		if len(t.Schedule) == 0 {
			return errors.New("thermal.schedule: empty")
		}
		prev := -1
		for i := range t.Schedule {
			st := &t.Schedule[i]
			switch {
			case st.AtMs != nil:
				return fmt.Errorf("thermal.schedule[%d]: at_ms is not supported, use at_token (the policy's thermal trace is replayed per decode step, so only token positions line up with the CPU quota)", i)
			case st.AtToken == nil:
				return fmt.Errorf("thermal.schedule[%d]: at_token is required", i)
			case *st.AtToken <= prev || *st.AtToken >= s.N:
				return fmt.Errorf("thermal.schedule[%d].at_token %d: want increasing values below n (%d)", i, *st.AtToken, s.N)
			case st.CPUs < 0 || st.CPUs > 1024:
				return fmt.Errorf("thermal.schedule[%d].cpus %g: want 0 (no quota) or a positive CPU count", i, st.CPUs)
			}
			prev = *st.AtToken
			ok := false
			for v := abi.ThermalNone; v <= abi.ThermalShutdown; v++ {
				if strings.EqualFold(st.Status, v.String()) {
					st.status, ok = v, true
				}
			}
			if !ok {
				return fmt.Errorf("thermal.schedule[%d].status %q: want none, light, moderate, severe, critical, emergency or shutdown", i, st.Status)
			}
		}
	}
	return nil
}

func (m *Model) validate() error {
	switch {
	case (len(m.Tiers) == 0) == (m.Synth == nil):
		return errors.New("model: give exactly one of tiers or synth")
	case m.Synth != nil:
		sy := m.Synth
		if _, ok := synth.Shapes[sy.Shape]; !ok {
			return fmt.Errorf("model.synth.shape %q: unknown (want %s)", sy.Shape, strings.Join(synth.ShapeNames(), ", "))
		}
		for k, v := range map[string]int{"n_embd": sy.NEmbd, "n_layer": sy.NLayer, "n_head": sy.NHead, "n_head_kv": sy.NHeadKV, "n_ff": sy.NFF} {
			if v < 0 || v > 1<<16 {
				return fmt.Errorf("model.synth.%s %d: want 0 (shape default) to 65536", k, v)
			}
		}
		if len(sy.Types) < 2 {
			return fmt.Errorf("model.synth.types: a tier ladder needs at least 2 types, got %d", len(sy.Types))
		}
		for _, t := range sy.Types {
			if _, err := gguf.ParseType(t); err != nil {
				return fmt.Errorf("model.synth.types: %v", err)
			}
		}
	case len(m.Tiers) < 2:
		return fmt.Errorf("model.tiers: a tier ladder needs at least 2 files, got %d", len(m.Tiers))
	}
	return nil
}

// path resolves p against the spec's directory.
func (s *Spec) path(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(s.Dir, p)
}
