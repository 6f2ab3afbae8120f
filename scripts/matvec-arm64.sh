#!/usr/bin/env bash
# The kernels/matvec tests on linux/arm64 under qemu-aarch64 user-mode
# emulation (`make test-arm64`; issue 31, point 1): the package's arm64 test
# binary, built at the base architecture (armv8-a), runs on three emulated
# CPUs, and on each its TestDispatch checks the kernel chosen at run time
# from getauxval(AT_HWCAP, AT_HWCAP2):
#   max         ARMv8.x with dotprod and i8mm  -> neoni8mm (contract C8)
#   cortex-a76  ARMv8.2-A with dotprod         -> neondot  (contract C4)
#   cortex-a53  ARMv8.0-A, no dotprod          -> scalar   (the fallback, C4)
# while TestBatchInvariant, TestContracts and TestMulMatchesFloat64 run every
# available implementation (bitwise batch invariance and its contract's
# reference's bits, the float64 bound). Then, when given, package kernels'
# arm64 test binary runs the custom op's tests (TestMulMatEdgellm: inside a
# ggml graph on ggml's arm64 thread pool, the op is bitwise the reference of
# Best's contract and the 1-row graph, and within the derived bound of
# ggml's own arm64 mul_mat) on each CPU of $QEMU_CPUS: max runs the i8mm
# kernel (C8), cortex-a76 the dotprod one (C4).
#
# usage: scripts/matvec-arm64.sh MATVEC_TEST_BINARY [KERNELS_TEST_BINARY]
# env:   QEMU_ARM64      emulator (default: qemu-aarch64, else qemu-aarch64-static)
#        QEMU_CPUS       emulated CPUs for the kernels binary (default $QEMU_CPU, else
#                        "max cortex-a76")
#        QEMU_LD_PREFIX  arm64 sysroot for the dynamic loader (default /usr/aarch64-linux-gnu)
#
# Emulated timings printed by `go test` are NOT performance numbers. Prints
# "matvec-arm64: N passed, M failed" and exits non-zero when anything failed.
set -uo pipefail

die() { echo "matvec-arm64: $*" >&2; exit 1; }

[ $# -eq 1 ] || [ $# -eq 2 ] || die "usage: $0 MATVEC_TEST_BINARY [KERNELS_TEST_BINARY]"
bin=$1 kbin=${2:-}
[ -f "$bin" ] || die "test binary $bin not found (make test-arm64-matvec builds it)"
[ -z "$kbin" ] || [ -f "$kbin" ] || die "test binary $kbin not found (make test-arm64-matvec builds it)"

. "$(dirname "$0")/qemu-arm64.sh"

out=$(mktemp)
trap 'rm -f "$out"' EXIT

echo "matvec-arm64: $bin on $qemu (test timings are emulated: not performance numbers)"
passed=0 failed=0
for pair in max:neoni8mm cortex-a76:neondot cortex-a53:scalar; do
  cpu=${pair%%:*} want=${pair#*:}
  t0=$(date +%s)
  # A runaway emulation must not hold CI: at most 5 minutes per CPU.
  timeout 300 "$qemu" -L "$sysroot" -cpu "$cpu" "$bin" -test.count=1 -test.v \
    -matvec.want-best="$want" >"$out" 2>&1
  code=$?
  secs=$(($(date +%s) - t0))
  chosen=$(grep -o 'Best [a-z0-9]*, Available \[[^]]*\]' "$out" | head -n 1)
  if [ $code -eq 0 ] && grep -q '^--- PASS: TestDispatch' "$out" && grep -q '^--- PASS: TestBatchInvariant' "$out"; then
    passed=$((passed + 1))
    echo "ok    -cpu $cpu: $chosen; $(grep -c '^--- PASS' "$out") tests passed ($secs s, emulated)"
  else
    failed=$((failed + 1))
    echo "FAIL  -cpu $cpu (exit $code, want Best $want): ${chosen:-no dispatch line}"
    grep -v '^=== RUN' "$out" | head -n 40 | sed -e 's/^/    /'
  fi
done

for cpu in ${QEMU_CPUS:-${QEMU_CPU:-max cortex-a76}}; do
  [ -n "$kbin" ] || break
  t0=$(date +%s)
  timeout 300 "$qemu" -L "$sysroot" -cpu "$cpu" "$kbin" -test.count=1 -test.v \
    -test.run 'TestEdgellmActsMatchGGML|TestMulMatEdgellm' >"$out" 2>&1
  code=$?
  secs=$(($(date +%s) - t0))
  if [ $code -eq 0 ] && grep -q '^--- PASS: TestMulMatEdgellm ' "$out"; then
    passed=$((passed + 1))
    echo "ok    -cpu $cpu: the custom op in a ggml graph; $(grep -c '^--- PASS' "$out") tests passed ($secs s, emulated)"
  else
    failed=$((failed + 1))
    echo "FAIL  -cpu $cpu: the custom op in a ggml graph (exit $code)"
    grep -v '^=== RUN' "$out" | head -n 40 | sed -e 's/^/    /'
  fi
done

echo "matvec-arm64: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
