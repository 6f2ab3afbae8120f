package rules

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/edgellm/edgellm"

// edge allows the non-test files of package From (a module-relative path)
// to import the packages To. With Files set, only those files of From may.
type edge struct {
	From  string
	To    []string
	Files []string
	Why   string
}

// edges is every import allowed from one package of this module to another
// in non-test code. Test files may import what they need (as deps_test.go,
// the rules are about what ships). Keep one entry per reason.
var edges = []edge{
	// The contract and the ABI: the bottom.
	{"host/engine", []string{"abi"}, nil, "the engine contract's draft statistics are sized by the ABI's MaxSpecK; KVType converts to the wire enum"},
	{"kernels", []string{"host/engine"}, nil, "the KV cache element type is the contract's one KVType (kernels.KVGGMLType converts it to ggml's)"},
	{"kernels", []string{"kernels/matvec"}, []string{"ggml_edgellm.go", "ggml_edgellm_q4x4.go", "ggml_edgellm_attn.go"}, "the ggml custom ops MulMatEdgellm, MulMatEdgellmQ4x4 and AttnEdgellm run edgellm's own kernels inside ggml graphs (#31)"},

	// Below host: formats, kernels and the two engines (internal/).
	{"internal/precision", []string{"internal/gguf"}, nil, "a precision manifest is read from GGUF metadata"},
	{"internal/sample", []string{"host/engine"}, nil, "the sampler takes the contract's SamplingParams"},
	{"internal/tokenizer", []string{"host/engine", "kernels"}, nil, "implements engine.Vocab over llama.cpp's vocabulary"},
	{"internal/synth", []string{"internal/gguf", "internal/shareddir", "kernels"}, nil,
		"writes synthetic GGUF models, quantizing with ggml, with the shared directory's vocabulary"},
	{"internal/sharedtest", []string{"internal/shareddir"}, nil, "test models come from the one shared-directory rule"},
	{"internal/synthtest", []string{"internal/gguf", "internal/sharedtest", "internal/synth"}, nil, "tests' SYNTHETIC models are written by synth, once per test binary"},
	{"internal/llamacpp", []string{"host/engine", "internal/gguf", "internal/memfd", "internal/tokenizer", "kernels"}, nil,
		"the llama.cpp engine: implements the contract over kernels' llama.h bindings"},
	{"internal/native", []string{"host/engine", "internal/gguf", "internal/memfd", "internal/sample", "internal/tokenizer", "kernels"}, nil,
		"the native engine: implements the contract over its own ggml graphs (not over the other engine)"},
	{"internal/native", []string{"abi", "abi/specmodel"}, nil,
		"the draft bound is the ABI's MaxSpecK; auto K chooses with the speculation model the default policy uses"},
	{"internal/parity", []string{"host/engine", "internal/llamacpp", "internal/native", "internal/sample", "kernels"}, nil,
		"parity compares the two engines, so it sits above both"},
	{"internal/calib", []string{"host/engine", "internal/gguf", "internal/native", "internal/precision", "internal/sample", "kernels"}, nil,
		"calibration measures per-layer sensitivity by running the native engine on model files"},

	// host's siblings: the policy runtime, sensors, traces.
	{"host/policy", []string{"abi", "host/policy/internal/instrument", "internal/buildinfo"}, nil, "the policy runtime speaks the ABI"},
	{"host/sensors", []string{"abi", "internal/cputime"}, nil, "sensors fill the ABI's Sensors struct"},
	{"host/trace", []string{"abi"}, nil, "traces replay ABI sensor readings"},
	{"host/policy/update", []string{"abi", "host/policy", "internal/buildinfo"}, nil,
		"the TUF update channel validates modules with the policy runtime's loader and checks ABI and engine version"},

	// host: the public API over both engines.
	{"host", []string{"abi", "host/engine", "host/policy", "host/policy/update", "host/sensors", "host/trace", "internal/buildinfo", "internal/cputime",
		"internal/gguf", "internal/llamacpp", "internal/native", "internal/precision", "internal/sample", "kernels"}, nil,
		"host is the API: it loads both engines and runs the policy loop"},

	// The policy SDK and reference policies (guest side).
	{"policy-sdk", []string{"abi"}, nil, "guests encode and decode ABI structs"},
	{"policy-sdk/policytest", []string{"abi", "host/policy", "host/trace", "policy-sdk", "internal/wasmbuild"}, nil,
		"runs a policy natively and as .wasm through the real host runtime"},
	{"policies/...", []string{"abi", "policy-sdk"}, nil, "a policy is a guest: the ABI and the SDK only"},
	{"policies/default", []string{"abi/specmodel"}, nil, "the speculation controller chooses K with the engine's own model"},

	// Above host: the CLI, its internals, the C library.
	{"cmd/libedgellm", []string{"cmd/libedgellm/internal/capi"}, nil, "main is a shell over the C API"},
	{"cmd/libedgellm/internal/capi", []string{"abi", "host", "host/policy", "host/policy/update", "host/sensors"}, nil, "the C API is an app of host (policies from the TUF channel too); the draft bound is abi.MaxSpecK"},
	{"cmd/libedgellm/internal/capi", []string{"kernels"}, []string{"api11.go", "slog.go"},
		"DEBT: the C log callback takes llama.cpp's messages with their levels through kernels.SetLogFunc; host.SetLog takes only a writer"},
	{"cmd/edgellm/internal/pressure", []string{"host/sensors", "internal/cputime"}, nil, "memory/CPU pressure reads the sensors and CPU time"},
	{"cmd/edgellm/internal/bench", []string{"host", "host/sensors", "internal/cputime", "kernels"}, nil,
		"benchmarks drive host and measure CPU time; kernels for barrier-spin and repack measurements"},
	{"cmd/edgellm/internal/serve", []string{"abi", "host"}, nil, "serve is an app of host"},
	{"cmd/edgellm/internal/scenario", []string{"abi", "cmd/edgellm/internal/pressure", "cmd/edgellm/internal/runargs",
		"cmd/edgellm/internal/runstats", "host", "host/engine", "host/sensors", "host/trace", "internal/cputime", "internal/gguf",
		"internal/logitlog", "internal/sample", "internal/synth"}, nil,
		"scenarios run host under pressure on synthetic models and score logits"},
	{"cmd/edgellm", []string{"abi", "cmd/edgellm/internal/bench", "cmd/edgellm/internal/pressure", "cmd/edgellm/internal/runstats",
		"cmd/edgellm/internal/scenario", "cmd/edgellm/internal/serve", "host", "host/policy", "host/policy/update", "host/sensors", "host/trace"}, nil,
		"the CLI is an app of host"},

	// Tools on model files reach internal/ from named files only.
	{"cmd/edgellm", []string{"internal/calib", "internal/native", "internal/precision"}, []string{"calibrate.go"},
		"calibrate measures layer sensitivity on the native engine and writes a precision manifest"},
	{"cmd/edgellm", []string{"internal/calib", "internal/gguf", "internal/precision"}, []string{"quantize_clamp.go"},
		"quantize clamps types to a precision manifest"},
	{"cmd/edgellm", []string{"kernels"}, []string{"quantize.go"}, "quantize is llama_model_quantize"},
	{"cmd/edgellm", []string{"internal/gguf"}, []string{"quantize.go"}, "quantize names the tensor whose rows llama.cpp refused"},
	{"cmd/edgellm", []string{"internal/precision"}, []string{"manifestdigest.go"}, "manifest-digest checks and re-records a precision manifest's content digest"},
	{"cmd/edgellm", []string{"internal/gguf"}, []string{"modeldefaults.go"}, "defaults fit the training context read from the GGUF header before loading"},
	{"cmd/cgoenv", []string{"kernels/cflags"}, nil, "cgoenv prints the one definition of the cgo flags for an app's shell"},
	{"cmd/edgellm", []string{"internal/gguf"}, []string{"inspect.go", "synth.go", "synthdefault.go"}, "inspect and synth read and write GGUF"},
	{"cmd/edgellm", []string{"internal/synth"}, []string{"synth.go", "synthdefault.go", "benchspecmodel.go"}, "synth writes synthetic models (and bench --synth-from its SYNTHETIC pair)"},
	{"cmd/edgellm", []string{"internal/logitlog"}, []string{"runsteps.go"}, "run --logits writes the logit log format"},
	{"cmd/edgellm", []string{"internal/shareddir"}, []string{"model.go"}, "default model paths come from the shared-directory rule"},
	{"cmd/edgellm", []string{"internal/cputime"}, []string{"benchspecsweep.go", "benchrepack.go", "benchspin.go", "benchkernels.go"},
		"the speculation, repack and spin sweeps measure thread and process CPU time"},
	{"cmd/edgellm", []string{"internal/native"}, []string{"benchspecmodel.go"}, "the speculation cost model is fitted on native engine runs"},
	{"cmd/edgellm", []string{"internal/parity"}, []string{"parity.go"}, "parity compares the engines on a model file"},
	{"cmd/edgellm", []string{"internal/wasmbuild"}, []string{"policy_testcmd.go"}, "policy test builds the author's Go policy with the one Wasm build"},
	{"cmd/edgellm/internal/scenario", []string{"internal/wasmbuild"}, nil, "a scenario builds its built-in policies with the one Wasm build"},
	{"host/policy/internal/guestbuild", []string{"internal/wasmbuild"}, nil, "host/policy's tests build their Go guests with the one Wasm build"},
}

// below is the layer under host: nothing in it may import a package above.
func below(p string) bool {
	return p == "abi" || strings.HasPrefix(p, "abi/") || p == "kernels" || strings.HasPrefix(p, "kernels/") || p == "host/engine" || strings.HasPrefix(p, "internal/")
}

// engines must not import each other.
var engines = []string{"internal/native", "internal/llamacpp"}

// libraryExceptions are the library files (outside cmd/) allowed to read the
// environment or write to stderr, with the reason.
var libraryExceptions = map[string]string{
	"internal/sharedtest/cgroups.go":  "test support only (imported by _test.go files): a switch for machines without cgroups",
	"internal/shareddir/shareddir.go": "the one rule that finds ../shared (EDGELLM_SHARED) for the CLI's defaults and tests",
	"policy-sdk/policytest/wasm.go":   "a test harness for policy authors: which .wasm `go test` runs is an environment setting",
	"kernels/log.go":                  "DEBT: llama.cpp's log goes to stderr until an app sets a writer (host.SetLog; #25 asks for a log callback)",
	"host/policy/config.go":           "DEBT: the policy runtime's default logger writes warnings to stderr (Config.WithLogger replaces it)",
	"internal/wasmbuild/wasmbuild.go": "the one Go-to-Wasm build: the go tool's child gets this environment with GOOS/GOARCH replaced",
}

// maxLines bounds every non-test .go file.
const maxLines = 500

type goFile struct {
	rel  string // module-relative path, slash-separated
	pkg  string // module-relative package directory
	file *ast.File
	fset *token.FileSet
	src  []byte
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	d, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for ; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			t.Fatal("no go.mod above the test")
		}
	}
}

// sources parses every non-test .go file of the module (all build tags:
// wasip1 guests included), skipping testdata and templates.
func sources(t *testing.T) []goFile { return sourcesOf(t, false) }

// sourcesOf is sources, with the module's _test.go files too when tests.
func sourcesOf(t *testing.T, tests bool) []goFile {
	t.Helper()
	root := moduleRoot(t)
	var files []goFile
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || (!tests && strings.HasSuffix(name, "_test.go")) {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, p, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		files = append(files, goFile{rel: rel, pkg: path.Dir(rel), file: f, fset: fset, src: src})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("found only %d source files under %s", len(files), root)
	}
	return files
}

// moduleImports is each module-internal import of f, module-relative.
func moduleImports(f goFile) []string {
	var out []string
	for _, im := range f.file.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		if p == module {
			out = append(out, ".")
		} else if strings.HasPrefix(p, module+"/") {
			out = append(out, strings.TrimPrefix(p, module+"/"))
		}
	}
	return out
}

func matchPkg(pattern, p string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}

func allowed(from, file, to string) bool {
	for _, e := range edges {
		if !matchPkg(e.From, from) {
			continue
		}
		if e.Files != nil && !contains(e.Files, path.Base(file)) {
			continue
		}
		for _, t := range e.To {
			if matchPkg(t, to) {
				return true
			}
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestImports: every module-internal import of non-test code is in edges;
// no engine imports another; nothing below host imports above it.
func TestImports(t *testing.T) {
	for _, f := range sources(t) {
		for _, to := range moduleImports(f) {
			if below(f.pkg) && !below(to) {
				t.Errorf("%s imports %s: below host, nothing imports above it", f.rel, to)
			}
			for _, a := range engines {
				for _, b := range engines {
					if a != b && matchPkg(a, f.pkg) && matchPkg(b, to) {
						t.Errorf("%s imports %s: no engine imports another", f.rel, to)
					}
				}
			}
			if !allowed(f.pkg, f.rel, to) {
				t.Errorf("%s imports %s: not an allowed edge (internal/rules edges)", f.rel, to)
			}
		}
	}
}

// TestEdgesUsed: every allowed edge is still made by some file, so the
// list does not keep permissions nobody needs.
func TestEdgesUsed(t *testing.T) {
	used := map[string]bool{}
	for _, f := range sources(t) {
		for _, to := range moduleImports(f) {
			for i, e := range edges {
				if !matchPkg(e.From, f.pkg) || (e.Files != nil && !contains(e.Files, path.Base(f.rel))) {
					continue
				}
				for _, x := range e.To {
					if matchPkg(x, to) {
						used[strconv.Itoa(i)+" "+x] = true
					}
				}
			}
		}
	}
	for i, e := range edges {
		for _, x := range e.To {
			if !used[strconv.Itoa(i)+" "+x] {
				t.Errorf("edge %s -> %s (%s) is not used: remove it", e.From, x, e.Why)
			}
		}
	}
}

// publicAPI are the packages whose exported declarations must not name a
// type of an internal/ package: an app cannot import it.
var publicAPI = []string{"host", "host/engine", "host/sensors", "host/trace"}

// TestPublicAPINamesNoInternal: no exported declaration of the public
// packages (a type, an alias, a struct field, an interface method, a
// function or method signature, a typed var, a constant's value) names a
// type or constant from an internal/ package. (An exported error variable
// may be an internal sentinel: errors.Is needs only the host name.)
func TestPublicAPINamesNoInternal(t *testing.T) {
	for _, f := range sources(t) {
		if !contains(publicAPI, f.pkg) {
			continue
		}
		internalName := map[string]string{} // local import name -> path
		for _, im := range f.file.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if !strings.Contains(p, "/internal/") {
				continue
			}
			name := path.Base(p)
			if im.Name != nil {
				name = im.Name.Name
			}
			internalName[name] = p
		}
		if len(internalName) == 0 {
			continue
		}
		check := func(what string, n ast.Node) {
			if n == nil {
				return
			}
			ast.Inspect(n, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok {
					if p, ok := internalName[id.Name]; ok {
						t.Errorf("%s: exported %s names %s.%s (%s): an app cannot import it",
							f.fset.Position(sel.Pos()), what, id.Name, sel.Sel.Name, p)
					}
				}
				return true
			})
		}
		for _, d := range f.file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv != nil && !exportedRecv(d.Recv) {
					continue
				}
				check(d.Name.Name, d.Type)
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						checkType(s.Name.Name, s.Type, check)
					case *ast.ValueSpec:
						for i, n := range s.Names {
							if n.IsExported() {
								check(n.Name, s.Type)
								if d.Tok == token.CONST && i < len(s.Values) {
									// go doc shows a constant's value: its
									// definition belongs in the API.
									check(n.Name, s.Values[i])
								}
							}
						}
					}
				}
			}
		}
	}
}

// checkType checks the exported surface of a type expression: the exported
// fields of a struct, the exported methods of an interface, all of anything
// else (an alias, a func type, a map).
func checkType(name string, typ ast.Expr, check func(string, ast.Node)) {
	switch tt := typ.(type) {
	case *ast.StructType:
		for _, fl := range tt.Fields.List {
			if len(fl.Names) == 0 { // embedded
				check(name, fl.Type)
			}
			for _, n := range fl.Names {
				if n.IsExported() {
					check(name+"."+n.Name, fl.Type)
				}
			}
		}
	case *ast.InterfaceType:
		for _, m := range tt.Methods.List {
			if len(m.Names) == 0 {
				check(name, m.Type)
			}
			for _, n := range m.Names {
				if n.IsExported() {
					check(name+"."+n.Name, m.Type)
				}
			}
		}
	default:
		check(name, typ)
	}
}

func exportedRecv(r *ast.FieldList) bool {
	if len(r.List) == 0 {
		return false
	}
	t := r.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.IsExported()
		default:
			return false
		}
	}
}

// TestFileSize: no non-test .go file is over maxLines lines: a file that
// large holds more than one concept (split it by concept, not by count).
func TestFileSize(t *testing.T) {
	var over []string
	for _, f := range sources(t) {
		n := bytes.Count(f.src, []byte("\n"))
		if len(f.src) > 0 && f.src[len(f.src)-1] != '\n' {
			n++
		}
		if n > maxLines {
			over = append(over, f.rel+": "+strconv.Itoa(n)+" lines")
		}
	}
	sort.Strings(over)
	for _, o := range over {
		t.Errorf("%s (max %d)", o, maxLines)
	}
}

// TestLibrarySilent: library code (outside cmd/) reads no environment
// variable and writes nothing to stderr: settings and messages are the
// app's (the CLI maps environment variables and flags onto Go fields).
func TestLibrarySilent(t *testing.T) {
	for _, f := range sources(t) {
		if strings.HasPrefix(f.rel, "cmd/") {
			continue
		}
		osName := ""
		for _, im := range f.file.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); p == "os" {
				osName = "os"
				if im.Name != nil {
					osName = im.Name.Name
				}
			}
		}
		if osName == "" {
			continue
		}
		_, excepted := libraryExceptions[f.rel]
		ast.Inspect(f.file, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok || id.Name != osName {
				return true
			}
			switch sel.Sel.Name {
			case "Getenv", "LookupEnv", "Environ", "Stderr":
				if !excepted {
					t.Errorf("%s: os.%s in library code (outside cmd/): take a Go setting or an io.Writer instead",
						f.fset.Position(sel.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
	}
	for rel := range libraryExceptions {
		if _, err := os.Stat(filepath.Join(moduleRoot(t), rel)); err != nil {
			t.Errorf("exception for %s: %v (remove it)", rel, err)
		}
	}
}

// flagLiteral is a CLI flag inside a string.
var flagLiteral = regexp.MustCompile(`(^|[^-\w])--[a-z][a-z0-9-]+`)

// flagExceptions are library strings allowed to name a CLI flag or command.
var flagExceptions = map[string]string{
	"host/policy/state.go": "DEBT: a corrupt rollback index names the CLI command that resets it",
}

// TestLibraryNamesNoFlags: errors and notices of library code (outside
// cmd/) name Go fields (LoadOptions.RepackLayers), not the CLI's flags
// (--repack-layers): an app has no flags; the CLI maps its flags to the
// fields and can say so.
func TestLibraryNamesNoFlags(t *testing.T) {
	for _, f := range sources(t) {
		if strings.HasPrefix(f.rel, "cmd/") || strings.HasPrefix(f.rel, "policies/") || flagExceptions[f.rel] != "" {
			continue
		}
		ast.Inspect(f.file, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if m := flagLiteral.FindString(lit.Value); m != "" {
				t.Errorf("%s: %s names a CLI flag (%s): name the Go field", f.fset.Position(lit.Pos()), lit.Value, strings.TrimLeft(m, " ("))
			}
			return true
		})
	}
}
