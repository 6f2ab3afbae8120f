package host

import (
	"github.com/edgellm/edgellm/internal/buildinfo"
	"github.com/edgellm/edgellm/kernels"
)

// BuildInfo is what this binary was built from.
type BuildInfo struct {
	Version       string // edgellm's, set at link time by the Makefile
	LlamaCommit   string // the llama.cpp commit of the kernels
	OllamaVersion string // the github.com/ollama/ollama module that vendors it
	System        string // the CPU features ggml was built with (llama_print_system_info)
}

// Build returns what this binary was built from.
func Build() BuildInfo {
	return BuildInfo{Version: buildinfo.Version, LlamaCommit: kernels.LlamaCommit(),
		OllamaVersion: kernels.OllamaModuleVersion(), System: kernels.SystemInfo()}
}
