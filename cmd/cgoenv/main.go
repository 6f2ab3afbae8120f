// Command cgoenv prints the cgo environment that builds edgellm (llama.cpp
// and ggml from the pinned github.com/ollama/ollama module, with edgellm's
// flags) as shell exports. It is the one setup step of an app that embeds
// edgellm with `go get`:
//
//	go get github.com/edgellm/edgellm/host
//	eval "$(go run github.com/edgellm/edgellm/cmd/cgoenv)"
//	go build ./...
//
// Run it inside the app's module: it finds the ollama module of that
// module's build list (downloading it into the module cache if needed). The
// flags are kernels/cflags' (the Makefile's `make -s env` prints the same).
//
//	-march M     the -march value (default native: tuned for this CPU and not
//	             portable; a portable build names a baseline such as x86-64-v2)
//	-no-repack   leave ggml's repacked kernels out (GGML_USE_CPU_REPACK)
//	-goarch A    target architecture (default: $GOARCH, else this one)
//
// Pure Go, no cgo: it runs before anything of edgellm can be compiled.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"github.com/edgellm/edgellm/kernels/cflags"
)

const ollamaModule = "github.com/ollama/ollama"

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "cgoenv:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("cgoenv", flag.ContinueOnError)
	march := fs.String("march", "native", "-march value (native, or a baseline such as x86-64-v2)")
	noRepack := fs.Bool("no-repack", false, "leave GGML_USE_CPU_REPACK out")
	goarch := fs.String("goarch", "", "target architecture (default $GOARCH, else the running one)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	arch := *goarch
	if arch == "" {
		arch = os.Getenv("GOARCH")
	}
	if arch == "" {
		arch = runtime.GOARCH
	}
	dir, err := ollamaDir()
	if err != nil {
		return err
	}
	cache, err := cflags.CacheDir(os.Getenv("XDG_CACHE_HOME"), os.Getenv("HOME"))
	if err != nil {
		return err
	}
	env, err := cflags.Resolve(cflags.Options{OllamaDir: dir, March: *march, GOARCH: arch, NoRepack: *noRepack, CacheDir: cache})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "export CGO_ENABLED=\"1\"\nexport CGO_CPPFLAGS=%q\nexport CGO_CFLAGS=%q\nexport CGO_CXXFLAGS=%q\n",
		env.CPPFLAGS, env.CFLAGS, env.CXXFLAGS)
	return err
}

// ollamaDir is the ollama module's directory in the current module's build
// list, downloaded first when it is not in the module cache yet.
func ollamaDir() (string, error) {
	list := func() (string, error) {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", ollamaModule).Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("go list -m %s: %s", ollamaModule, strings.TrimSpace(string(ee.Stderr)))
		}
		return strings.TrimSpace(string(out)), err
	}
	dir, err := list()
	if err != nil {
		return "", fmt.Errorf("%w (run cgoenv inside a module that requires github.com/edgellm/edgellm)", err)
	}
	if dir != "" {
		return dir, nil
	}
	if out, err := exec.Command("go", "mod", "download", ollamaModule).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go mod download %s: %v: %s", ollamaModule, err, strings.TrimSpace(string(out)))
	}
	if dir, err = list(); err == nil && dir == "" {
		err = fmt.Errorf("%s is not in the module cache after go mod download", ollamaModule)
	}
	return dir, err
}
