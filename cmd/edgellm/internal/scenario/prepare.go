package scenario

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/synth"
	"github.com/edgellm/edgellm/internal/wasmbuild"
)

// Tier is one rung of the ladder as the report describes it.
type Tier struct {
	Path          string  `json:"path"`
	Type          string  `json:"type"` // dominant weight type
	SizeMB        float64 `json:"size_mb"`
	BitsPerWeight float64 `json:"bits_per_weight"` // tensor data bits / parameters
	Synthetic     bool    `json:"synthetic"`
}

// prepareTiers returns the ladder, synthesizing it into dir/model when the
// spec asks for a synthetic model.
func prepareTiers(ctx context.Context, s *Spec, dir string, logf func(string, ...any)) ([]Tier, error) {
	var paths []string
	synthetic := s.Model.Synth != nil
	if !synthetic {
		for _, p := range s.Model.Tiers {
			paths = append(paths, s.path(p))
		}
	} else {
		sy := s.Model.Synth
		shape := synth.Shapes[sy.Shape]
		set := func(dst *int, v int) {
			if v > 0 {
				*dst = v
				shape.Name = sy.Shape + "-custom"
			}
		}
		set(&shape.NEmbd, sy.NEmbd)
		set(&shape.NLayer, sy.NLayer)
		set(&shape.NHead, sy.NHead)
		set(&shape.NHeadKV, sy.NHeadKV)
		set(&shape.NFF, sy.NFF)
		if shape.NCtx < s.Ctx {
			shape.NCtx = s.Ctx
		}
		vocab := s.path(sy.Vocab)
		if vocab == "" {
			v, err := synth.DefaultVocabPath()
			if err != nil {
				return nil, fmt.Errorf("model.synth: %w", err)
			}
			vocab = v
		}
		mdir := filepath.Join(dir, "model")
		if err := os.MkdirAll(mdir, 0o755); err != nil {
			return nil, err
		}
		for _, ts := range sy.Types {
			typ, _ := gguf.ParseType(ts)
			out := filepath.Join(mdir, fmt.Sprintf("%s-%s-seed%d.gguf", shape.Name, strings.ToLower(typ.String()), sy.Seed))
			o := synth.Options{Shape: shape, Type: typ, VocabPath: vocab, Seed: sy.Seed, Out: out, Workers: 2}
			if err := o.Validate(); err != nil {
				return nil, fmt.Errorf("model.synth: %w", err)
			}
			logf("scenario: synthesizing SYNTHETIC tier %s (%s, seed %d) -> %s", typ, shape.Name, sy.Seed, out)
			if err := synth.Write(ctx, o, nil); err != nil {
				return nil, fmt.Errorf("model.synth: %w", err)
			}
			paths = append(paths, out)
		}
	}
	tiers := make([]Tier, 0, len(paths))
	for _, p := range paths {
		f, err := gguf.Open(p)
		if err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
		t := Tier{Path: p, SizeMB: float64(f.FileSize) / (1 << 20), Synthetic: synthetic}
		if n := f.ParamCount(); n > 0 {
			t.BitsPerWeight = float64(f.DataSize()) * 8 / float64(n)
		}
		// The dominant type: the one holding the most bytes.
		bytesBy := map[gguf.Type]int64{}
		var best gguf.Type
		for i := range f.Tensors {
			ti := &f.Tensors[i]
			bytesBy[ti.Type] += ti.Size
			if bytesBy[ti.Type] > bytesBy[best] {
				best = ti.Type
			}
		}
		t.Type = best.String()
		tiers = append(tiers, t)
	}
	return tiers, nil
}

// preparePolicy returns the module of p: its wasm: path (a .wasm or a
// signed bundle, as run --policy takes), or for a builtin one a prebuilt
// .wasm — o.PolicyDir/<builtin>.wasm, else the source tree's
// policies/<builtin>/<builtin>.wasm as `make policies` leaves it, refused
// when older than its sources — or, only with o.BuildPolicies, a fresh
// build from the source tree with the Go toolchain into dir. On a device
// there is neither a toolchain nor a source tree: --policy-dir.
func preparePolicy(ctx context.Context, s *Spec, p Policy, o Options, dir string) (string, error) {
	if p.Wasm != "" {
		w := s.path(p.Wasm)
		if _, err := os.Stat(w); err != nil {
			return "", fmt.Errorf("policy %s: %w", p.Name, err)
		}
		return w, nil
	}
	if o.PolicyDir != "" {
		w, err := filepath.Abs(filepath.Join(o.PolicyDir, p.Builtin+".wasm"))
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(w); err != nil {
			return "", fmt.Errorf("policy %s: builtin %q: no prebuilt module %s in --policy-dir", p.Name, p.Builtin, w)
		}
		return w, nil
	}
	root, err := sourceRoot(s.Dir)
	if err != nil {
		return "", fmt.Errorf("policy %s: builtin %q: %w", p.Name, p.Builtin, err)
	}
	src := filepath.Join(root, "policies", p.Builtin)
	if _, err := os.Stat(filepath.Join(src, "main.go")); err != nil {
		return "", fmt.Errorf("policy %s: builtin %q: no policy at %s", p.Name, p.Builtin, src)
	}
	if !o.BuildPolicies {
		w := filepath.Join(src, p.Builtin+".wasm")
		stale, err := staleModule(root, src, w)
		switch {
		case os.IsNotExist(err):
			return "", fmt.Errorf("policy %s: builtin %q: %s is not built: run `make policies`, or pass --build-policies (needs the Go toolchain) or --policy-dir DIR", p.Name, p.Builtin, w)
		case err != nil:
			return "", fmt.Errorf("policy %s: %w", p.Name, err)
		case stale != "":
			return "", fmt.Errorf("policy %s: builtin %q: %s is older than %s: run `make policies`, or pass --build-policies", p.Name, p.Builtin, w, stale)
		}
		o.Logf("scenario: policy %s: prebuilt %s", p.Name, w)
		return w, nil
	}
	out, err := filepath.Abs(filepath.Join(dir, "policies", p.Builtin+".wasm"))
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	if _, err := os.Stat(out); err == nil {
		return out, nil // built for an earlier contender of this run
	}
	o.Logf("scenario: building policy %s from %s", p.Builtin, src)
	if err := wasmbuild.BuildFile(ctx, src, out); err != nil {
		return "", fmt.Errorf("policy %s: %w", p.Name, err)
	}
	return out, nil
}

// staleModule returns the first source the prebuilt module w is older
// than ("" when none), over the dependencies policies/Makefile rebuilds
// on: the policy's own .go files, abi/*.go, policy-sdk/*.go and go.mod.
func staleModule(root, src, w string) (string, error) {
	st, err := os.Stat(w)
	if err != nil {
		return "", err
	}
	var deps []string
	for _, g := range []string{filepath.Join(src, "*.go"), filepath.Join(root, "abi", "*.go"), filepath.Join(root, "policy-sdk", "*.go")} {
		m, _ := filepath.Glob(g)
		deps = append(deps, m...)
	}
	deps = append(deps, filepath.Join(root, "go.mod"))
	for _, d := range deps {
		if strings.HasSuffix(d, "_test.go") {
			continue
		}
		if ds, err := os.Stat(d); err == nil && ds.ModTime().After(st.ModTime()) {
			return d, nil
		}
	}
	return "", nil
}

// sourceRoot finds the edgellm module root above dir or the working
// directory.
func sourceRoot(dir string) (string, error) {
	wd, _ := os.Getwd()
	for _, start := range []string{dir, wd} {
		d, err := filepath.Abs(start)
		if err != nil {
			continue
		}
		for {
			b, err := os.ReadFile(filepath.Join(d, "go.mod"))
			if err == nil && strings.Contains(string(b), "module github.com/edgellm/edgellm\n") {
				return d, nil
			}
			if filepath.Dir(d) == d {
				break
			}
			d = filepath.Dir(d)
		}
	}
	return "", fmt.Errorf("no edgellm source tree (go.mod) above %s or the working directory: pass --policy-dir DIR with prebuilt DIR/<name>.wasm, or give wasm: PATH in the scenario", dir)
}
