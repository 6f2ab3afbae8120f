#!/bin/sh
# Full-size SYNTHETIC shape of every native family (issue #28): parity with
# llama.cpp (256 greedy steps, flash and classic, F16 KV; Q8_0/Q4_0 KV with
# flash against llama.cpp at the same KV type is `make test`'s tiny models)
# and native ÷ llama.cpp decode/prefill in one process at 1 and 2 threads:
# native on edgellm's kernels (q4x4 layout) and native on ggml's repacked
# layout, each against llama.cpp repacked (docs/BENCHMARKS.md [g]).
# Usage: scripts/bench-families.sh BIN [SHAPE...]; EDGELLM_SHARED must be set.
# Writes the Q4_0 files into a temp dir (1-2.2 GB each) and removes them.
set -eu
BIN=$1; shift
SHAPES=${*:-"qwen2.5-0.5b qwen2.5-1.5b qwen3-0.6b gemma3-1b gemma2-2b phi3-mini smollm2-360m"}
DIR=$(mktemp -d "${TMPDIR:-/tmp}/edgellm-families-XXXXXX")
trap 'rm -rf "$DIR"' EXIT
for s in $SHAPES; do
	m="$DIR/$s-q4_0.gguf"
	"$BIN" synth --shape "$s" --type q4_0 -o "$m"
	"$BIN" parity -m "$m" -n 256 --attention flash --threads 2
	"$BIN" parity -m "$m" -n 256 --attention classic --threads 2
	for t in 1 2; do
		"$BIN" bench -m "$m" --engine native:edgellm --compare native:repack,llamacpp:repack --threads "$t" -r 3 -p 64 -n 64
	done
	rm -f "$m"
done
