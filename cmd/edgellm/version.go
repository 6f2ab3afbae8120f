package main

import (
	"fmt"

	"github.com/edgellm/edgellm/host"
)

func init() {
	register(&command{
		Name:    "version",
		Summary: "print the edgellm version, the llama.cpp commit and the CPU features ggml was built with",
		Run: func(c *cmdEnv, args []string) error {
			b := host.Build()
			fmt.Fprintf(c.Stdout, "edgellm %s\n", b.Version)
			fmt.Fprintf(c.Stdout, "llama.cpp %s (via github.com/ollama/ollama %s)\n", b.LlamaCommit, b.OllamaVersion)
			fmt.Fprintf(c.Stdout, "system: %s\n", b.System)
			return nil
		},
	})
}
