package cflags

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCksumMatchesPOSIX compares Cksum with cksum(1) on the embedded header
// and on inputs whose lengths take 0 to 3 length bytes.
func TestCksumMatchesPOSIX(t *testing.T) {
	if _, err := exec.LookPath("cksum"); err != nil {
		t.Skip("no cksum(1) on this machine")
	}
	inputs := [][]byte{nil, []byte("a"), []byte(strings.Repeat("xy", 200)), make([]byte, 70000), spinwaitH}
	for _, in := range inputs {
		cmd := exec.Command("cksum")
		cmd.Stdin = strings.NewReader(string(in))
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		want, err := strconv.ParseUint(strings.Fields(string(out))[0], 10, 32)
		if err != nil {
			t.Fatal(err)
		}
		if got := Cksum(in); got != uint32(want) {
			t.Errorf("len %d: Cksum %d, cksum(1) %d", len(in), got, want)
		}
	}
}

func TestResolveWritesHeader(t *testing.T) {
	ollama := t.TempDir()
	inc := filepath.Join(ollama, "llama", "llama.cpp", "include")
	if err := os.MkdirAll(inc, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(inc, "llama.h"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	env, err := Resolve(Options{OllamaDir: ollama, March: "x86-64-v2", GOARCH: "amd64", CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(env.SpinwaitHeader)
	if err != nil || string(b) != string(spinwaitH) {
		t.Fatalf("header at %s: %v (content equal: %v)", env.SpinwaitHeader, err, string(b) == string(spinwaitH))
	}
	if !strings.Contains(env.CFLAGS, "-include "+env.SpinwaitHeader) || !strings.Contains(env.CFLAGS, "-march=x86-64-v2") {
		t.Errorf("CFLAGS %q", env.CFLAGS)
	}
	if !strings.Contains(env.CPPFLAGS, "-DGGML_USE_CPU_REPACK") || !strings.Contains(env.CPPFLAGS, "-I"+inc) {
		t.Errorf("CPPFLAGS %q", env.CPPFLAGS)
	}
	for _, bad := range []Options{{March: "native", CacheDir: cache}, {OllamaDir: t.TempDir(), March: "native", CacheDir: cache}, {OllamaDir: ollama, CacheDir: cache}, {OllamaDir: ollama, March: "native"}} {
		if _, err := Resolve(bad); err == nil {
			t.Errorf("Resolve(%+v) accepted", bad)
		}
	}
}
