package kernels

/*
#include "llama.h"
*/
import "C"

import (
	"runtime/debug"

	// Compiles llama.cpp, ggml and the ggml CPU backend into the binary.
	_ "github.com/ollama/ollama/llama/llama.cpp/src"
)

// llamaCommit is the llama.cpp commit vendored by the pinned ollama module
// (FETCH_HEAD in its Makefile.sync). TestLlamaCommitMatchesModule keeps it in
// step with go.mod.
const llamaCommit = "ec98e2002"

const ollamaModule = "github.com/ollama/ollama"

// LlamaCommit returns the llama.cpp commit compiled into this binary.
func LlamaCommit() string { return llamaCommit }

// OllamaModuleVersion returns the version of the ollama module that vendors
// llama.cpp and ggml, as recorded in the binary's build info.
func OllamaModuleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == ollamaModule {
				return d.Version
			}
		}
	}
	return "unknown"
}

// SystemInfo returns llama_print_system_info(): the CPU features ggml was
// compiled with (AVX2, AVX512, NEON, ...).
func SystemInfo() string { return C.GoString(C.llama_print_system_info()) }
