#!/usr/bin/env bash
# Smoke run of the linux/arm64 edgellm binary under qemu-aarch64 user-mode
# emulation (`make test-arm64`; issue 9, point 4):
#   - version lists the ARM features ggml was compiled with (NEON, and DOTPROD
#     when MARCH_ARM64 asks for it);
#   - run reproduces the golden stories260K text on both engines;
#   - run --policy loads a signed bundle of the default policy (wazero on
#     arm64) and switches tier under the thermal-ramp trace;
#   - parity -n 64 gives top-1 agreement exactly 1.
#
# usage: scripts/arm64-smoke.sh BINARY SHARED_DIR DEFAULT_POLICY.wasm
# env:   QEMU_ARM64      emulator (default: qemu-aarch64, else qemu-aarch64-static)
#        QEMU_CPU        emulated CPU (default cortex-a76: ARMv8.2-A with dot product)
#        QEMU_LD_PREFIX  arm64 sysroot for the dynamic loader (default /usr/aarch64-linux-gnu)
#        MARCH_ARM64     the -march the binary was built with (for the feature check)
#
# Every tok/s figure printed here comes from an emulated CPU: it is NOT a
# performance number. Prints "arm64-smoke: N passed, M failed" and exits
# non-zero when anything failed.
set -uo pipefail

die() { echo "arm64-smoke: $*" >&2; exit 1; }

[ $# -eq 3 ] || die "usage: $0 BINARY SHARED_DIR DEFAULT_POLICY.wasm"
bin=$1 shared=$2 wasm=$3
[ -f "$bin" ] || die "binary $bin not found (make build-arm64)"
[ -f "$shared/models/stories260K.gguf" ] || die "model $shared/models/stories260K.gguf not found (set SHARED)"
[ -f "$wasm" ] || die "policy $wasm not found (make policies)"

. "$(dirname "$0")/qemu-arm64.sh"
cpu=${QEMU_CPU:-cortex-a76}
march=${MARCH_ARM64:-}

root=$(cd "$(dirname "$0")/.." && pwd)
models=$shared/models
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A runaway emulation must not hold CI: every step gets at most 15 minutes.
arm() { timeout 900 "$qemu" -L "$sysroot" -cpu "$cpu" "$bin" "$@"; }

# Speeds under emulation are labelled wherever they are shown.
label() { sed -e '/tok\/s/s/$/   [qemu-emulated: not a performance number]/' "$@"; }
show() { head -n 40 "$@" | label | sed -e 's/^/    /'; }

passed=0 failed=0
pass() { passed=$((passed + 1)); echo "ok    $1 ($2 s)"; }
fail() {
  failed=$((failed + 1)); echo "FAIL  $1: $2"
  for f in "$work/out" "$work/err"; do [ -s "$f" ] && show "$f"; done
}

# step NAME ARGS...: runs the binary under qemu, stdout → $work/out, stderr → $work/err.
step() {
  name=$1; shift
  t0=$(date +%s)
  arm "$@" >"$work/out" 2>"$work/err"
  code=$?
  secs=$(($(date +%s) - t0))
  return $code
}

echo "arm64-smoke: $bin on $qemu -cpu $cpu (tok/s below are emulated: not performance numbers)"

# 1. version: ggml's compiled-in ARM features.
if step version version; then
  sys=$(grep '^system:' "$work/out")
  want=("NEON = 1")
  case $march in *dotprod*) want+=("DOTPROD = 1") ;; esac
  missing=()
  for f in "${want[@]}"; do [[ $sys == *"$f"* ]] || missing+=("$f"); done
  if [ ${#missing[@]} -eq 0 ]; then pass "version: $sys" "$secs"; else fail version "missing ${missing[*]} in: $sys"; fi
else
  fail version "exit $code"
fi

# 2. The golden greedy text on stories260K (cmd/edgellm TestRunGolden), both engines.
golden="Once upon a time, there was a little girl named Lily. She loved to play outside in the park."
for engine in llamacpp native; do
  if step "run $engine" run -m "$models/stories260K.gguf" -n 64 --temp 0 --threads 1 --engine "$engine"; then
    out=$(cat "$work/out")
    if [[ $out == "$golden"* ]]; then
      pass "run --engine $engine: golden text; $(grep -m1 'tok/s' "$work/err" | label)" "$secs"
    else
      fail "run --engine $engine" "stdout does not start with the golden text"
    fi
  else
    fail "run --engine $engine" "exit $code"
  fi
done

# 3. A signed bundle of the default policy, run in wazero on arm64 under the
#    thermal-ramp trace (SIMULATED sensors): the policy must move to tier 1,
#    with no call failed. The 5 ms default deadline is a budget for a real
#    CPU: emulated code runs many times slower, and this machine may be shared,
#    so the deadline here is 1 s: the check is that the policy works, not how
#    fast.
if step "policy keygen" policy keygen -o "$work/key" &&
  step "policy sign" policy sign --key "$work/key.key" --name default --revision 1 "$wasm" -o "$work/default.tar.gz"; then
  if step "run --policy" run --tiers "$models/derived/stories260K-ff192-Q8_0.gguf,$models/derived/stories260K-ff192-Q4_0.gguf" \
    --policy "$work/default.tar.gz" --policy-key "$work/key.pub" --policy-state "$work/state" --policy-deadline 1s \
    --sensors trace:"$root/testdata/traces/thermal_ramp.jsonl" --trace-step-ms 50 \
    -n 100 --temp 0 --threads 1; then
    if [[ $(cat "$work/out") != "Once upon a time"* ]]; then
      fail "run --policy" "stdout does not start with \"Once upon a time\""
    elif ! grep -q ', 0 failures,' "$work/err"; then
      fail "run --policy" "a policy call failed"
    elif ! grep -q 'tier 0→1' "$work/err"; then
      fail "run --policy" "no tier change to 1 under the thermal ramp"
    else
      pass "run --policy (signed default bundle, SIMULATED thermal trace): $(grep -m1 'tier 0→1' "$work/err")" "$secs"
    fi
  else
    fail "run --policy" "exit $code"
  fi
else
  fail "policy bundle" "keygen/sign exit $code"
fi

# 4. Native engine against llama.cpp on the same tokens: every top-1 agrees.
#    The JSON field is agree/n; encoding/json writes exactly 1.0 as 1.
if step parity parity -m "$models/stories260K.gguf" -n 64 --threads 1 --json; then
  if grep -q '"n":64,' "$work/out" && grep -q '"top1_agreement":1,' "$work/out"; then
    pass "parity -n 64: top1_agreement 1, $(grep -o '"max_abs_logit_diff":[^,]*' "$work/out")" "$secs"
  else
    fail parity "want n 64 and top1_agreement 1: $(head -c 300 "$work/out")"
  fi
else
  fail parity "exit $code"
fi

echo "arm64-smoke: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
