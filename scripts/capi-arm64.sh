#!/usr/bin/env bash
# The C API test program against the linux/arm64 libedgellm.so, under
# qemu-aarch64 user-mode emulation (`make test-arm64`; issue 17, point 3):
# cmd/libedgellm/testdata/capi_test.c is cross-compiled with the arm64 C
# compiler against include/edgellm.h and the library, then run on
# stories260K with two signed revisions of the default policy, exactly as
# TestCAPI runs it on this machine (golden text, misuse cases, threads,
# cancellation, the trim push, a hot reload, 1,000 load/free cycles, and
# every API 1.1 entry point), then testdata/capi_v1_0_test.c built against the
# 1.0 header (struct canaries). It runs
# with "emulated": the policy gets a 200 ms deadline (API 1.5 deadline_us),
# since an emulated call can miss the default 5 ms, and the kernel's RSS (qemu's process, whose own heap grows with every guest
# mmap/munmap) is printed, not checked; the guest's resident pages are.
#
# usage: scripts/capi-arm64.sh LIBEDGELLM.so HOST_EDGELLM SHARED_DIR DEFAULT_POLICY.wasm
#   HOST_EDGELLM is this machine's bin/edgellm: it makes the key and signs
#   the bundles (fast, not emulated).
# env:   CROSS_ARM64_CC  arm64 C compiler (default aarch64-linux-gnu-gcc)
#        QEMU_ARM64      emulator (default: qemu-aarch64, else qemu-aarch64-static)
#        QEMU_CPU        emulated CPU (default cortex-a76)
#        QEMU_LD_PREFIX  arm64 sysroot for the dynamic loader (default /usr/aarch64-linux-gnu)
#
# The program's own last line is "N passed, M failed"; this script exits
# non-zero when it fails, and with one line when a tool or input is missing.
set -uo pipefail

die() { echo "capi-arm64: $*" >&2; exit 1; }

[ $# -eq 4 ] || die "usage: $0 LIBEDGELLM.so HOST_EDGELLM SHARED_DIR DEFAULT_POLICY.wasm"
lib=$1 edgellm=$2 shared=$3 wasm=$4
[ -f "$lib" ] || die "library $lib not found (make lib-arm64)"
[ -x "$edgellm" ] || die "host binary $edgellm not found (make build)"
model=$shared/models/stories260K.gguf
[ -f "$model" ] || die "model $model not found (set SHARED)"
[ -f "$wasm" ] || die "policy $wasm not found (make policies)"

cc=${CROSS_ARM64_CC:-aarch64-linux-gnu-gcc}
command -v "${cc%% *}" >/dev/null 2>&1 ||
  die "cross compiler '$cc' not found (Debian: apt-get install gcc-aarch64-linux-gnu, or set CROSS_ARM64_CC)"
. "$(dirname "$0")/qemu-arm64.sh"
cpu=${QEMU_CPU:-cortex-a76}

root=$(cd "$(dirname "$0")/.." && pwd)
libdir=$(cd "$(dirname "$lib")" && pwd)
[ "$(basename "$lib")" = libedgellm.so ] || die "library $lib must be named libedgellm.so (its soname)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "capi-arm64: $lib with $cc, run on $qemu -cpu $cpu"
"$cc" -std=c11 -O1 -Wall -Wextra -Werror -I "$root/include" "$root/cmd/libedgellm/testdata/capi_test.c" \
  -o "$work/capi_test" -L "$libdir" -ledgellm -lpthread -Wl,-rpath,"$libdir" ||
  die "cross-compiling capi_test.c failed"
# A program built against the API 1.0 header, with canaries around every
# struct the library writes (TestCAPIOldHeader's program).
"$cc" -std=c11 -O1 -Wall -Wextra -Werror -I "$root/cmd/libedgellm/testdata/v1.0" "$root/cmd/libedgellm/testdata/capi_v1_0_test.c" \
  -o "$work/capi_v1_0_test" -L "$libdir" -ledgellm -Wl,-rpath,"$libdir" ||
  die "cross-compiling capi_v1_0_test.c failed"

# Two signed revisions of the default policy, as TestCAPI's signedBundles makes.
"$edgellm" policy keygen -o "$work/key" >/dev/null &&
  "$edgellm" policy sign --key "$work/key.key" --name default --revision 1 "$wasm" -o "$work/rev1.tar.gz" >/dev/null &&
  "$edgellm" policy sign --key "$work/key.key" --name default --revision 2 "$wasm" -o "$work/rev2.tar.gz" >/dev/null ||
  die "making the signed bundles with $edgellm failed"

# A runaway emulation must not hold CI: at most 15 minutes.
t0=$(date +%s)
EDGELLM_CAPI_TEST_GENERATE_DELAY_US=300 timeout 900 "$qemu" -L "$sysroot" -cpu "$cpu" "$work/capi_test" "$model" "$work/rev1.tar.gz" "$work/rev2.tar.gz" "$work/key.pub" emulated \
  >"$work/out" 2>&1
code=$?
secs=$(($(date +%s) - t0))
sed -e 's/^/    /' "$work/out"
if [ $code -ne 0 ] || ! grep -q ' 0 failed' "$work/out"; then
  echo "capi-arm64: FAIL (exit $code after $secs s under emulation)"
  exit 1
fi
echo "capi-arm64: ok in $secs s under emulation (not a performance number)"
timeout 300 "$qemu" -L "$sysroot" -cpu "$cpu" "$work/capi_v1_0_test" "$model" >"$work/out1" 2>&1
code=$?
sed -e 's/^/    /' "$work/out1"
if [ $code -ne 0 ] || ! grep -q ' 0 failed' "$work/out1"; then
  echo "capi-arm64: the 1.0-header program FAILED (exit $code)"
  exit 1
fi
