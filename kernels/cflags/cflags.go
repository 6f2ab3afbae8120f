// Package cflags is the one definition of the C compiler flags that build
// llama.cpp and ggml into edgellm (the pinned github.com/ollama/ollama
// module's cgo files, plus the kernels package's own C), for the Makefile's
// build and for an app that embeds edgellm with `go get`.
//
// The flags are:
//
//	CGO_CPPFLAGS  -I<ollama>/llama/llama.cpp/include -I<ollama>/ml/backend/ggml/ggml/include
//	              -DGGML_USE_CPU_REPACK (ggml's interleaved kernels; Repack false leaves it out)
//	CGO_CFLAGS    -O3 -march=<MARCH> [x86: -mno-amx-*] -include <cache>/spinwait-<cksum>.h
//	CGO_CXXFLAGS  -O3 -march=<MARCH> [x86: -mno-amx-*]
//
// spinwait.h (embedded here) bounds the spin of ggml's thread barrier
// (kernels/RATIONALE.md, "Bounded barrier spin"). It is written to a path
// outside any checkout, named by the POSIX cksum of its content, so that an
// edit rebuilds ggml (Go's build cache keys on the flags, not on a header
// outside the package it compiles) while every checkout and app on a machine
// shares one compiled llama.cpp. The Makefile computes the same path with
// cksum(1); TestMatchesMakefile in cmd/cgoenv holds the two together.
//
// Pure Go, no cgo: cmd/cgoenv imports it before anything can be compiled.
package cflags

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

//go:embed spinwait.h
var spinwaitH []byte

// Options selects the target of a build.
type Options struct {
	// OllamaDir is the pinned github.com/ollama/ollama module's directory in
	// the module cache (`go list -m -f '{{.Dir}}' github.com/ollama/ollama`).
	OllamaDir string
	// March is the -march value: "native" tunes for this CPU; a portable
	// build names a baseline (x86-64-v2, armv8.2-a+dotprod).
	March string
	// GOARCH is the target architecture ("amd64", "arm64").
	GOARCH string
	// NoRepack leaves GGML_USE_CPU_REPACK out (ggml's CPU_REPACK buffer type
	// is then not registered).
	NoRepack bool
	// CacheDir is where the spinwait header is written (see CacheDir).
	CacheDir string
}

// Env is the cgo environment of one build.
type Env struct {
	CPPFLAGS, CFLAGS, CXXFLAGS string
	// SpinwaitHeader is the path CFLAGS force-includes.
	SpinwaitHeader string
}

// CacheDir is where the Makefile writes the spinwait header for a given
// $XDG_CACHE_HOME and $HOME (passed in: library code reads no environment):
// xdgCacheHome/edgellm, else home/.cache/edgellm.
func CacheDir(xdgCacheHome, home string) (string, error) {
	if xdgCacheHome != "" {
		return filepath.Join(xdgCacheHome, "edgellm"), nil
	}
	if home == "" {
		return "", fmt.Errorf("cflags: no cache directory: set XDG_CACHE_HOME or HOME")
	}
	return filepath.Join(home, ".cache", "edgellm"), nil
}

// SpinwaitHeaderName is the header's file name: spinwait-<POSIX cksum>.h.
func SpinwaitHeaderName() string {
	return fmt.Sprintf("spinwait-%d.h", Cksum(spinwaitH))
}

// Resolve computes the flags and writes the spinwait header where they
// point (atomically; an existing header of the same name is the same
// content and is left as it is).
func Resolve(o Options) (Env, error) {
	if o.OllamaDir == "" {
		return Env{}, fmt.Errorf("cflags: OllamaDir is empty: the github.com/ollama/ollama module is not in the module cache (go mod download github.com/ollama/ollama)")
	}
	if _, err := os.Stat(filepath.Join(o.OllamaDir, "llama", "llama.cpp", "include", "llama.h")); err != nil {
		return Env{}, fmt.Errorf("cflags: %s is not the ollama module (no llama/llama.cpp/include/llama.h)", o.OllamaDir)
	}
	if o.March == "" {
		return Env{}, fmt.Errorf("cflags: March is empty (native, or a baseline such as x86-64-v2)")
	}
	if o.CacheDir == "" {
		return Env{}, fmt.Errorf("cflags: CacheDir is empty (CacheDir(XDG_CACHE_HOME, HOME))")
	}
	hdr := filepath.Join(o.CacheDir, "include", SpinwaitHeaderName())
	if err := writeOnce(hdr, spinwaitH); err != nil {
		return Env{}, err
	}
	cpp := []string{
		"-I" + filepath.Join(o.OllamaDir, "llama", "llama.cpp", "include"),
		"-I" + filepath.Join(o.OllamaDir, "ml", "backend", "ggml", "ggml", "include"),
	}
	if !o.NoRepack {
		cpp = append(cpp, "-DGGML_USE_CPU_REPACK")
	}
	common := []string{"-O3", "-march=" + o.March}
	if o.GOARCH == "amd64" {
		// ollama's cgo files do not compile ggml's AMX kernels, yet
		// ggml-cpu.cpp references them when the compiler defines
		// __AMX_INT8__ (-march=native on Sapphire Rapids and later).
		common = append(common, "-mno-amx-tile", "-mno-amx-int8", "-mno-amx-bf16")
	}
	return Env{
		CPPFLAGS:       strings.Join(cpp, " "),
		CFLAGS:         strings.Join(append(append([]string{}, common...), "-include", hdr), " "),
		CXXFLAGS:       strings.Join(common, " "),
		SpinwaitHeader: hdr,
	}, nil
}

func writeOnce(path string, b []byte) error {
	if old, err := os.ReadFile(path); err == nil && string(old) == string(b) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("cflags: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".spinwait-*")
	if err != nil {
		return fmt.Errorf("cflags: %w", err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("cflags: %w", err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("cflags: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("cflags: %w", err)
	}
	return nil
}

// Cksum is POSIX cksum(1)'s CRC: CRC-32 with polynomial 0x04C11DB7, most
// significant bit first, over the data and then its length (least
// significant byte first, as few bytes as it takes), complemented.
func Cksum(b []byte) uint32 {
	var crc uint32
	feed := func(c byte) {
		crc ^= uint32(c) << 24
		for i := 0; i < 8; i++ {
			if crc&0x80000000 != 0 {
				crc = crc<<1 ^ 0x04C11DB7
			} else {
				crc <<= 1
			}
		}
	}
	for _, c := range b {
		feed(c)
	}
	for n := len(b); n > 0; n >>= 8 {
		feed(byte(n))
	}
	return ^crc
}
