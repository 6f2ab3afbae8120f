#!/bin/sh
# TTFT and decode tok/s through `edgellm serve` (client side, curl over
# loopback SSE) against `edgellm run`, same model, prompt, greedy, 1 thread,
# alternating REPS times. Usage: docs/serve_bench.sh [MODEL] [REPS] [N]
set -eu
M=${1:-${EDGELLM_SHARED:-../shared}/models/stories260K.gguf}; REPS=${2:-5}; N=${3:-200}
PORT=$((20000 + $(od -An -N2 -tu2 /dev/urandom) % 20000))
./bin/edgellm serve -m "$M" --threads 1 --ctx 512 --addr 127.0.0.1:$PORT 2>/dev/null & SP=$!
trap 'kill $SP' EXIT
sleep 2
i=0
while [ $i -lt "$REPS" ]; do
  ./bin/edgellm run -m "$M" --threads 1 --ctx 512 --temp 0 -n "$N" -p "Once upon a time" 2>&1 >/dev/null | grep -o 'prefill.*' | sed 's/^/run:   /'
  curl -s -N -H 'Content-Type: application/json' -o /tmp/serve_bench.$$ -w 'serve: ttft(first SSE byte) %{time_starttransfer}s total %{time_total}s\n' \
    "http://127.0.0.1:$PORT/v1/completions" -d "{\"prompt\":\"Once upon a time\",\"max_tokens\":$N,\"temperature\":0,\"stream\":true}"
  grep -o '"usage":{[^}]*}' /tmp/serve_bench.$$ | sed 's/^/serve: /'; grep -o '"ttft_ms":[^,]*,"decode_tps":[0-9.]*' /tmp/serve_bench.$$ | sed 's/^/serve (server side): /'
  rm -f /tmp/serve_bench.$$
  i=$((i+1))
done
