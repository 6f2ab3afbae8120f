package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/host/policy"
	"github.com/edgellm/edgellm/internal/sharedtest"
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

	bundles, key := signedBundles(t, t.TempDir())
	out := run(t, "", prog, model, bundles[0], bundles[1], key)
	t.Logf("capi_test:\n%s", out)
	if !strings.Contains(out, " 0 failed") {
		t.Fatalf("capi_test reported failures:\n%s", out)
	}
}

// libDir builds libedgellm.so once per test binary into a directory kept
// until the process exits, and returns it.
func libDir(t *testing.T) string {
	t.Helper()
	libOnce.Do(func() {
		d, err := os.MkdirTemp("", "libedgellm")
		if err != nil {
			libErr = err
			return
		}
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", filepath.Join(d, "libedgellm.so"), ".")
		if b, err := cmd.CombinedOutput(); err != nil {
			libErr = fmt.Errorf("go build -buildmode=c-shared: %v\n%s", err, b)
			return
		}
		libPath = d
	})
	if libErr != nil {
		t.Fatal(libErr)
	}
	return libPath
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
// javac and gcc and run on the machine's JVM. It streams the golden text
// into Java, stops from a Java listener, and pushes a thermal reading (a
// valid one and one out of range). A machine without a JDK fails the test
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
	got := run(t, "", java, "-Djava.library.path="+out, "-cp", out, "EdgeLLM", model)
	t.Logf("EdgeLLM:\n%s", got)
	if !strings.Contains(got, "jni: 6 passed, 0 failed") {
		t.Fatalf("the Java program reported failures:\n%s", got)
	}
}

// signedBundles signs the default policy twice (revisions 1 and 2) with a
// fresh key and returns the two bundle directories and the public key file.
func signedBundles(t *testing.T, dir string) ([2]string, string) {
	t.Helper()
	wasmPath := filepath.Join(dir, "default.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", wasmPath, "../../policies/default")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the default policy: %v\n%s", err, b)
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
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, b)
	}
	return string(b)
}
