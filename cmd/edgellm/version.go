package main

import (
	"fmt"

	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/kernels"
)

func init() {
	register(&command{
		Name:    "version",
		Summary: "print the edgellm version, the llama.cpp commit and the CPU features ggml was built with",
		Run: func(c *cmdEnv, args []string) error {
			fmt.Fprintf(c.Stdout, "edgellm %s\n", host.Version())
			fmt.Fprintf(c.Stdout, "llama.cpp %s (via github.com/ollama/ollama %s)\n", kernels.LlamaCommit(), kernels.OllamaModuleVersion())
			fmt.Fprintf(c.Stdout, "system: %s\n", kernels.SystemInfo())
			return nil
		},
	})
}
