package main

import (
	"bufio"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"

	"github.com/spf13/pflag"
)

// `edgellm policy new DIR`: a policy that builds and passes `policy test`
// as it stands — the module, Decide, a test table over a bundled trace and
// the build line.

// scaffold holds common/ (files of every language) and one directory per
// language; *.tmpl files are templates with {% %} delimiters.
//
//go:embed scaffold
var scaffold embed.FS

// sdkModule is the module path of this repository, which policies import.
const sdkModule = "github.com/edgellm/edgellm"

func init() {
	register(&command{
		Name:    "policy new",
		Summary: "scaffold a policy in DIR that builds and passes 'policy test' as it stands",
		Usage:   "DIR [--lang go|assemblyscript] [--sdk EDGELLM_CHECKOUT]",
		Flags: func(fs *pflag.FlagSet) {
			fs.String("lang", "go", "guest language: go or assemblyscript (needs npm)")
			fs.String("sdk", "", "edgellm checkout the policy builds against, when DIR is outside one (default: found above DIR or the working directory)")
		},
		Run: runPolicyNew,
	})
}

type policyNewOptions struct {
	Lang string `koanf:"lang"`
	SDK  string `koanf:"sdk"`
}

var policyNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

func runPolicyNew(c *cmdEnv, args []string) error {
	var o policyNewOptions
	if err := c.Decode(&o); err != nil {
		return err
	}
	if len(args) != 1 {
		return usagef("policy new needs one DIR")
	}
	if o.Lang != "go" && o.Lang != "assemblyscript" {
		return usagef("--lang %q: want go or assemblyscript", o.Lang)
	}
	dir, err := filepath.Abs(args[0])
	if err != nil {
		return err
	}
	name := strings.ToLower(filepath.Base(dir))
	if !policyNameRE.MatchString(name) {
		return usagef("policy name %q (from DIR): want lowercase letters, digits, - and _, starting with a letter", name)
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("%s: directory exists and is not empty", dir)
	}
	// Inside an edgellm checkout the policy is part of its module; outside,
	// it gets a go.mod that points at one.
	inside := findSDK(dir)
	sdk := o.SDK
	if sdk == "" && inside == "" {
		if wd, err := os.Getwd(); err == nil {
			sdk = findSDK(wd)
		}
		if sdk == "" {
			return usagef("%s is outside an edgellm checkout: pass --sdk PATH (the checkout to build against)", dir)
		}
	}
	if sdk != "" && inside == "" {
		if sdk, err = filepath.Abs(sdk); err != nil {
			return err
		}
		if findSDK(sdk) != sdk {
			return fmt.Errorf("--sdk %s: no go.mod of module %s there", sdk, sdkModule)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root := inside
	if root == "" {
		root = sdk
	}
	vars := struct{ Name, SDKPackage string }{name, filepath.Join(root, "policy-sdk", "assemblyscript")}
	for _, src := range []string{"scaffold/common", "scaffold/" + o.Lang} {
		if err = copyScaffold(src, dir, vars); err != nil {
			break
		}
	}
	if err == nil && inside == "" {
		err = writePolicyGoMod(dir, name, sdk)
	}
	if err != nil {
		os.RemoveAll(dir) // nothing half-written left behind
		return err
	}
	c.Logf("wrote policy %s in %s; next: edgellm policy test %s", name, dir, args[0])
	return nil
}

// copyScaffold copies the embedded tree src into dir, executing templates.
func copyScaffold(src, dir string, vars any) error {
	return fs.WalkDir(scaffold, src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel := strings.TrimPrefix(p, src+"/")
		data, err := scaffold.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.HasSuffix(rel, ".tmpl") {
			rel = strings.TrimSuffix(rel, ".tmpl")
			var b strings.Builder
			if err := template.Must(template.New(rel).Delims("{%", "%}").Parse(string(data))).Execute(&b, vars); err != nil {
				return err
			}
			data = []byte(b.String())
		}
		dst := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
}

// findSDK returns the nearest directory at or above dir whose go.mod
// declares the edgellm module, "" if none.
func findSDK(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if f, err := os.Open(filepath.Join(d, "go.mod")); err == nil {
			sc := bufio.NewScanner(f)
			mod := ""
			for sc.Scan() {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
					mod = strings.TrimSpace(rest)
					break
				}
			}
			f.Close()
			if mod == sdkModule {
				return d
			}
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// writePolicyGoMod writes a go.mod that builds against the checkout sdk
// (a replace directive) with its requirements and go.sum, so the policy
// builds without fetching anything the checkout has not already fetched.
func writePolicyGoMod(dir, name, sdk string) error {
	mod, err := os.ReadFile(filepath.Join(sdk, "go.mod"))
	if err != nil {
		return err
	}
	var goLine string
	var requires []string
	inBlock := false
	for _, line := range strings.Split(string(mod), "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "go "):
			goLine = t
		case t == "require (":
			inBlock = true
		case inBlock && t == ")":
			inBlock = false
		case inBlock && t != "":
			requires = append(requires, strings.TrimSpace(strings.TrimSuffix(t, "// indirect")))
		case strings.HasPrefix(t, "require "):
			requires = append(requires, strings.TrimPrefix(t, "require "))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "module example.com/%s\n\n%s\n\nrequire %s v0.0.0\n\nrequire (\n", name, goLine, sdkModule)
	for _, r := range requires {
		fmt.Fprintf(&b, "\t%s // indirect\n", r)
	}
	fmt.Fprintf(&b, ")\n\nreplace %s => %s\n", sdkModule, sdk)
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	sum, err := os.ReadFile(filepath.Join(sdk, "go.sum"))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644)
}
