package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
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
// critical trim level that shrinks the window, a hot reload, and RSS over
// 1,000 load/free cycles. The program's own checks decide; this test only
// builds, runs and shows its output.
func TestCAPI(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the C test links a Linux shared library")
	}
	model := sharedtest.Stories260K(t)
	dir := t.TempDir()
	lib := filepath.Join(dir, "libedgellm.so")
	run(t, "", "go", "build", "-buildmode=c-shared", "-o", lib, ".")

	prog := filepath.Join(dir, "capi_test")
	run(t, "", "gcc", "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-I", "../../include",
		"testdata/capi_test.c", "-o", prog, "-L", dir, "-ledgellm", "-lpthread", "-Wl,-rpath,"+dir)

	bundles, key := signedBundles(t, dir)
	out := run(t, "", prog, model, bundles[0], bundles[1], key)
	t.Logf("capi_test:\n%s", out)
	if !strings.Contains(out, " 0 failed") {
		t.Fatalf("capi_test reported failures:\n%s", out)
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
		m := policy.Manifest{Name: "default", Revision: int64(i + 1), ABIVersion: abi.Current().String()}
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
