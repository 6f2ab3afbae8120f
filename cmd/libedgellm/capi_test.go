package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/policy"
	"github.com/edgellm/edgellm/host/policy/update"
	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/internal/wasmbuild"
)

// TestCAPI builds libedgellm.so, compiles testdata/capi_test.c against it
// and include/edgellm.h with gcc, and runs it on stories260K with two signed
// revisions of the default policy: the golden text, misuse (NULL pointers,
// freed and forged handles, double free, a struct size from the future),
// a callback that stops, cancellation and several threads at once, a
// critical trim level that shrinks the window, a hot reload, and 1,000
// load/free cycles that leave no descriptor or mapping behind with bounded
// resident memory. The program's own checks decide; this test only
// builds, runs and shows its output.
func TestCAPI(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the C test links a Linux shared library")
	}
	model := sharedtest.Stories260K(t)
	dir := libDir(t)
	prog := filepath.Join(t.TempDir(), "capi_test")
	run(t, "", "gcc", "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-I", "../../include",
		"testdata/capi_test.c", "-o", prog, "-L", dir, "-ledgellm", "-lpthread", "-Wl,-rpath,"+dir)
	runCAPITest(t, prog, model)
}

// TestCAPIStatic is the iOS route on this machine: the library as a Go
// c-archive (Go's c-shared does not run on iOS; an app links the archive
// into its own binary), linked statically into the same C program TestCAPI
// runs, which must pass the same way.
func TestCAPIStatic(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("links with this machine's gcc")
	}
	model := sharedtest.Stories260K(t)
	d := t.TempDir()
	cmd := exec.Command("go", "build", "-buildmode=c-archive", "-o", filepath.Join(d, "libedgellm.a"), ".")
	cmd.Env = libEnv()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -buildmode=c-archive: %v\n%s", err, b)
	}
	prog := filepath.Join(d, "capi_test_static")
	run(t, "", "gcc", "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-I", "../../include",
		"testdata/capi_test.c", "-o", prog, filepath.Join(d, "libedgellm.a"), "-lpthread", "-ldl", "-lm", "-lstdc++")
	runCAPITest(t, prog, model)
}

// runCAPITest runs a build of testdata/capi_test.c with two signed bundles.
func runCAPITest(t *testing.T, prog, model string) {
	t.Helper()
	dir := t.TempDir()
	bundles, key := signedBundles(t, dir)
	// API 1.2's update channel: a TUF repository publishing the default
	// policy as "default" revision 1, read from its directory.
	repo, root := tufRepo(t, filepath.Join(dir, "default.wasm"))
	t.Setenv("EDGELLM_CAPI_TEST_REPO", repo)
	t.Setenv("EDGELLM_CAPI_TEST_REPO_ROOT", root)
	slow, err := filepath.Abs("../../host/policy/testdata/slow.wasm")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("EDGELLM_CAPI_TEST_SLOW_POLICY", slow)
	// The pause makes the generate/free race meet its window (exports.go
	// testGenerateDelay).
	t.Setenv("EDGELLM_CAPI_TEST_GENERATE_DELAY_US", "300")
	out := run(t, "", prog, model, bundles[0], bundles[1], key)
	t.Logf("capi_test:\n%s", out)
	if !strings.Contains(out, " 0 failed") {
		t.Fatalf("capi_test reported failures:\n%s", out)
	}
}

// libDir builds the library as `make lib` does, once per test binary, into
// a directory kept until the process exits, and returns it: libedgellm.so.1
// (the soname) with libedgellm.so linking to it, portable code generation
// (libMarch), only the symbols of edgellm.map exported.
func libDir(t *testing.T) string {
	t.Helper()
	libOnce.Do(func() {
		d, err := os.MkdirTemp("", "libedgellm")
		if err != nil {
			libErr = err
			return
		}
		libPath = d
		ext := `-extldflags "-Wl,-soname,` + soname + " -Wl,--version-script=" + mustAbs("edgellm.map") + ` -Wl,--no-undefined-version"`
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-ldflags", ext, "-o", filepath.Join(d, soname), ".")
		cmd.Env = libEnv()
		if b, err := cmd.CombinedOutput(); err != nil {
			libErr = fmt.Errorf("go build -buildmode=c-shared: %v\n%s", err, b)
			return
		}
		libErr = os.Symlink(soname, filepath.Join(d, "libedgellm.so"))
	})
	if libErr != nil {
		t.Fatal(libErr)
	}
	return libPath
}

// soname is the library's ELF soname (Makefile LIB_SONAME).
const soname = "libedgellm.so.1"

// libMarch is the portable baseline `make lib` compiles for (Makefile
// LIB_MARCH): what an app ships must run on any CPU of its architecture.
func libMarch() string {
	if runtime.GOARCH == "arm64" {
		return "armv8.2-a"
	}
	return "x86-64-v2"
}

// libEnv is the test's environment with -march in the cgo flags set to
// libMarch, exactly as the Makefile's lib targets set it, so the build
// cache serves both.
func libEnv() []string {
	march := regexp.MustCompile(`-march=\S+`)
	env := os.Environ()
	for i, kv := range env {
		if strings.HasPrefix(kv, "CGO_CFLAGS=") || strings.HasPrefix(kv, "CGO_CXXFLAGS=") {
			env[i] = march.ReplaceAllString(kv, "-march="+libMarch())
		}
	}
	return env
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		panic(err)
	}
	return a
}

// TestCAPIOldHeader runs testdata/capi_v1_0_test.c, compiled against the
// API 1.0 header as released (testdata/v1.0/edgellm.h), on this library:
// the structs the library writes for it (1.0 *_init, session_stats) sit
// between canaries that must stay intact, and it generates the golden text
// through the 1.0 structs.
func TestCAPIOldHeader(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the C test links a Linux shared library")
	}
	model := sharedtest.Stories260K(t)
	dir := libDir(t)
	prog := filepath.Join(t.TempDir(), "capi_v1_0_test")
	run(t, "", "gcc", "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-I", "testdata/v1.0",
		"testdata/capi_v1_0_test.c", "-o", prog, "-L", dir, "-ledgellm", "-Wl,-rpath,"+dir)
	out := run(t, "", prog, model)
	t.Logf("capi_v1_0_test:\n%s", out)
	if !strings.Contains(out, " 0 failed") {
		t.Fatalf("capi_v1_0_test reported failures:\n%s", out)
	}
}

// TestCAPISymbols checks what the shared library shows the dynamic linker:
// its soname, and exactly the functions include/edgellm.h declares as
// exported symbols (nothing of llama.cpp, ggml or the Go runtime).
func TestCAPISymbols(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ELF only")
	}
	lib := filepath.Join(libDir(t), soname)
	dyn := run(t, "", "readelf", "-d", lib)
	if !strings.Contains(dyn, "(SONAME)") || !strings.Contains(dyn, "["+soname+"]") {
		t.Errorf("readelf -d shows no soname %s:\n%s", soname, dyn)
	}
	var got []string
	for _, l := range strings.Split(run(t, "", "nm", "-D", "--defined-only", lib), "\n") {
		if f := strings.Fields(l); len(f) == 3 {
			got = append(got, strings.TrimSuffix(f[2], "@@"))
		}
	}
	hdr, err := os.ReadFile("../../include/edgellm.h")
	if err != nil {
		t.Fatal(err)
	}
	// Non-static function declarations: "int edgellm_x(" at a line start,
	// plus the 1.0 initialisers the library keeps for old programs.
	var want []string
	for _, m := range regexp.MustCompile(`(?m)^(?:int|void|const char \*)\s*(edgellm_\w+)\(`).FindAllStringSubmatch(string(hdr), -1) {
		want = append(want, m[1])
	}
	for _, m := range regexp.MustCompile(`(?m)^static inline void (edgellm_\w+_init)\(`).FindAllStringSubmatch(string(hdr), -1) {
		if m[1] != "edgellm_model_info_init" { // new in 1.1: header only
			want = append(want, m[1])
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("exported symbols differ from the header's functions:\n got  %v\n want %v", got, want)
	}
	t.Logf("%d exported symbols, soname %s", len(got), soname)
	if runtime.GOARCH == "amd64" && libMarch() == "x86-64-v2" {
		// x86-64-v2 has no AVX: no instruction of the C and C++ code
		// (llama.cpp, ggml, the cgo helpers, our shims) may touch a ymm or
		// zmm register; a -march=native build on this machine has tens of
		// thousands (bin/edgellm: 31,594). The Go runtime's and standard
		// library's assembly is exempt: it checks the CPU before using AVX.
		if n, where := avxInstructions(t, lib); n > 0 {
			t.Errorf("%d instructions of C/C++ code use ymm/zmm registers in a build for x86-64-v2, e.g. in %s", n, where)
		}
	}
}

// cFunc matches the names of functions compiled from C or C++.
var cFunc = regexp.MustCompile(`^(ggml|llama|_Z|quantize|dequantize|x_cgo|_cgo|edgellm|gguf)`)

// avxInstructions counts the instructions of C/C++ functions in an ELF file
// that use a ymm or zmm register, and names one such function.
func avxInstructions(t *testing.T, path string) (n int, where string) {
	t.Helper()
	b, err := exec.Command("objdump", "-d", "--no-show-raw-insn", path).Output()
	if err != nil {
		t.Fatalf("objdump: %v", err)
	}
	fn := ""
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasSuffix(l, ">:") {
			if i := strings.Index(l, "<"); i >= 0 {
				fn = l[i+1 : len(l)-2]
			}
			continue
		}
		if cFunc.MatchString(fn) && (strings.Contains(l, "%ymm") || strings.Contains(l, "%zmm")) {
			n++
			where = fn
		}
	}
	return n, where
}

// TestMain removes the library libDir built.
func TestMain(m *testing.M) {
	code := m.Run()
	if libPath != "" {
		os.RemoveAll(libPath)
	}
	os.Exit(code)
}

var (
	libOnce sync.Once
	libPath string
	libErr  error
)

// TestJNI is the Android path minus the phone: testdata/jni/EdgeLLM.java
// (native methods) over a JNI shim in C over the library, compiled with
// javac and gcc and run on the machine's JVM with -Xcheck:jni. It streams
// the golden text into Java, stops from a Java listener, streams 64 tokens
// at temperature 100 as whole characters (the shim's default), and pushes a
// thermal reading (a valid one and one out of range). A machine without a JDK fails the test
// unless EDGELLM_NO_JAVA=1 says that is acceptable (.ci/run installs one).
func TestJNI(t *testing.T) {
	javac, err1 := exec.LookPath("javac")
	java, err2 := exec.LookPath("java")
	if err1 != nil || err2 != nil {
		if os.Getenv("EDGELLM_NO_JAVA") != "" {
			t.Skip("no JDK and EDGELLM_NO_JAVA is set")
		}
		t.Fatalf("no JDK (javac: %v, java: %v): install one (Debian default-jdk-headless) or set EDGELLM_NO_JAVA=1", err1, err2)
	}
	real, err := filepath.EvalSymlinks(javac)
	if err != nil {
		t.Fatal(err)
	}
	jdk := filepath.Dir(filepath.Dir(real))
	model := sharedtest.Stories260K(t)
	lib, out := libDir(t), t.TempDir()
	run(t, "", "gcc", "-std=c11", "-shared", "-fPIC", "-O1", "-Wall", "-Werror",
		"-I", filepath.Join(jdk, "include"), "-I", filepath.Join(jdk, "include", "linux"), "-I", "../../include",
		"testdata/jni/edgellm_jni.c", "-o", filepath.Join(out, "libedgellm_jni.so"), "-L", lib, "-ledgellm", "-Wl,-rpath,"+lib)
	run(t, "", javac, "-d", out, "testdata/jni/EdgeLLM.java")
	// The Go runtime installs signal handlers over the JVM's; libjsig
	// (preloaded, as docs/ANDROID.md says) chains them, and CheckJNI then
	// finds every JVM handler where it left it.
	cmd := exec.Command(java, "-Xcheck:jni", "-Djava.library.path="+out, "-cp", out, "EdgeLLM", model)
	jsig := filepath.Join(jdk, "lib", "libjsig.so")
	if _, err := os.Stat(jsig); err != nil {
		t.Fatalf("the JDK at %s has no lib/libjsig.so: %v", jdk, err)
	}
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+jsig)
	b, err := cmd.CombinedOutput()
	got := string(b)
	t.Logf("EdgeLLM:\n%s", got)
	if err != nil {
		t.Fatalf("java: %v", err)
	}
	if strings.Contains(got, "in native method") { // CheckJNI's WARNING or FATAL ERROR
		t.Errorf("CheckJNI complained:\n%s", got)
	}
	if strings.Contains(got, "Handler was modified") {
		t.Errorf("the JVM's signal handlers were replaced despite libjsig:\n%s", got)
	}
	if !strings.Contains(got, "jni: 7 passed, 0 failed") {
		t.Fatalf("the Java program reported failures:\n%s", got)
	}
}

// tufRepo makes an operator's TUF repository (update.InitRepo, one key per
// role) that publishes the module at wasmPath as "default" revision 1, and
// returns its published directory and the root.json an app ships.
func tufRepo(t *testing.T, wasmPath string) (string, string) {
	t.Helper()
	wasm, err := os.ReadFile(wasmPath)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r, err := update.InitRepo(dir, update.FileKeyring{Dir: filepath.Join(dir, "keys")}, update.InitOptions{}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	cfg := policy.NewConfig().WithCacheDir("-")
	if _, err := update.AddModule(context.Background(), r, cfg, wasm, update.AddOptions{Name: "default", MinEngineVersion: "0.0.0"}); err != nil {
		t.Fatal(err)
	}
	if err := r.Publish(update.Expiries{}); err != nil {
		t.Fatal(err)
	}
	return r.PublishedDir(), r.RootPath()
}

// signedBundles signs the default policy twice (revisions 1 and 2) with a
// fresh key and returns the two bundle directories and the public key file.
func signedBundles(t *testing.T, dir string) ([2]string, string) {
	t.Helper()
	wasmPath, err := wasmbuild.Build("../../policies/default", dir)
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(wasmPath)
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, err := policy.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pem, err := policy.MarshalPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, "policy.pub")
	if err := os.WriteFile(keyPath, pem, 0o644); err != nil {
		t.Fatal(err)
	}
	var paths [2]string
	for i := range paths {
		m := policy.Manifest{Name: "default", Revision: int64(i + 1), ABIVersion: abi.Current().String(), MinEngineVersion: "0.0.0"}
		b, err := policy.SignBundle(wasm, m, priv)
		if err != nil {
			t.Fatal(err)
		}
		paths[i] = filepath.Join(dir, fmt.Sprintf("bundle-rev%d", i+1))
		if err := b.Write(paths[i]); err != nil {
			t.Fatal(err)
		}
	}
	return paths, keyPath
}

// run runs a command and returns its combined output; it fails the test on
// a non-zero exit.
func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	// A deadlock (a call from a callback that waits for the engine its
	// generation holds) fails here, not at the suite's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, b)
	}
	return string(b)
}
