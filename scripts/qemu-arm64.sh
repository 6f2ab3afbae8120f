# Sourced by the arm64 scripts (arm64-smoke.sh, capi-arm64.sh,
# matvec-arm64.sh) after they define die(): sets $qemu (QEMU_ARM64, else
# qemu-aarch64, else qemu-aarch64-static) and $sysroot (QEMU_LD_PREFIX, else
# Debian's cross libc), or dies naming the Debian package to install.
qemu=${QEMU_ARM64:-}
if [ -z "$qemu" ]; then
  for q in qemu-aarch64 qemu-aarch64-static; do
    if command -v "$q" >/dev/null 2>&1; then qemu=$q; break; fi
  done
fi
[ -n "$qemu" ] && command -v "$qemu" >/dev/null 2>&1 ||
  die "${qemu:-qemu-aarch64} not found (Debian: apt-get install qemu-user, or set QEMU_ARM64)"
sysroot=${QEMU_LD_PREFIX:-/usr/aarch64-linux-gnu}
[ -e "$sysroot/lib/ld-linux-aarch64.so.1" ] ||
  die "arm64 sysroot $sysroot has no lib/ld-linux-aarch64.so.1 (Debian: apt-get install libc6-arm64-cross, or set QEMU_LD_PREFIX)"
