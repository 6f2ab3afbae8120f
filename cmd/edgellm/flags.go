package main

import (
	"github.com/edgellm/edgellm/host"
	"github.com/spf13/pflag"
)

// Flags shared by several commands. A key means the same thing, with the same
// type and default, in every command that has it (TestSharedFlagsAgree).

func addModelFlag(fs *pflag.FlagSet) {
	fs.StringP("model", "m", "", "model GGUF file (default: $EDGELLM_MODEL, ../shared/models/stories260K.gguf, else a small synthetic model)")
}

func addThreadsFlag(fs *pflag.FlagSet) {
	fs.IntP("threads", "t", 0, "CPU threads (0 = all cores)")
}

func addCtxFlag(fs *pflag.FlagSet) {
	fs.Int("ctx", host.DefaultNCtx, "context length in tokens (the default is capped by the model's training context; a value set above it is an error)")
}

func addKVTypeFlag(fs *pflag.FlagSet) {
	fs.String("kv-type", "f16", "KV cache type: f16, q8_0 or q4_0")
}

func addAttentionFlag(fs *pflag.FlagSet) {
	fs.String("attention", "auto", "attention kernel: auto (flash attention on CPU, in both engines), flash, classic, or edgellm (native engine: edgellm's attention kernel, F32 sums, each row bitwise the same whatever the batch; ggml's flash attention where it does not apply: a Q8_0/Q4_0 KV cache, arm64; llamacpp runs flash attention)")
}

func addEngineFlag(fs *pflag.FlagSet) {
	fs.String("engine", "auto", "engine: auto (native for llama, qwen2, qwen3, gemma2, gemma3 and phi3 models, else llamacpp), native or llamacpp")
}

func addKernelsFlag(fs *pflag.FlagSet) {
	fs.String("kernels", "ggml", "native engine: kernels of the weight matmuls: ggml, or edgellm (edgellm's own Q8_0/Q4_0/F32/F16 kernels for decode steps and verify batches up to 9 tokens (K+1), batch-invariant: greedy speculation is exact; on AVX-512 VNNI or AVX2 CPUs each Q4_0 matrix is copied at load into edgellm's q4x4 layout, which serves every batch size, prefill included: the layout is the Q4_0 matrices' repacked one, per repack unit: every unit is copied at load, or with --repack the first --repack-layers units, and a policy releases and restores units live; ggml's repacked matrices and other types keep ggml's)")
}

func addJSONFlag(fs *pflag.FlagSet) {
	fs.Bool("json", false, "print JSON on stdout")
}

func addSeedFlag(fs *pflag.FlagSet) {
	fs.Int64("seed", 42, "sampling seed")
}
