// edgellm policy SDK for AssemblyScript: ABI v1 (abi/ABI.md).
//
// A policy exports edgellm_abi_version_major/minor, in_ptr, out_ptr and
// decide (see policies/tiers/tiers.ts). The struct offsets and enum values
// come from ./abi, which is generated from abi/layout.go; this file holds
// the few helpers every policy needs. Nothing here allocates.
export * from "./abi";
import {
  ABI_MAJOR, ABI_MINOR, DECISION_SIZE, DECISION_SIZE_1_0, SENSORS_SIZE_1_0, REASON_TEXT_SIZE,
  S_VERSION_MAJOR, S_SIZE, S_PRESENT, D_VERSION_MAJOR, D_VERSION_MINOR, D_SIZE,
  D_REASON_CODE, D_REASON_LEN, D_REASON_TEXT,
} from "./abi";

/** True if the Sensors at p have this major and at least the 1.0 size. */
export function sensorsValid(p: usize): bool {
  return load<u16>(p + S_VERSION_MAJOR) == <u16>ABI_MAJOR && load<u32>(p + S_SIZE) >= <u32>SENSORS_SIZE_1_0;
}

/** True if the pre-filled Decision at p has this major and at least the 1.0 size. */
export function decisionValid(p: usize): bool {
  return load<u16>(p + D_VERSION_MAJOR) == <u16>ABI_MAJOR && load<u32>(p + D_SIZE) >= <u32>DECISION_SIZE_1_0;
}

/** True if every bit of mask is set in Sensors.present. */
export function has(p: usize, mask: u64): bool {
  return (load<u64>(p + S_PRESENT) & mask) == mask;
}

/** Writes this SDK's header into the Decision at p (call before returning STATUS_OK). */
export function finishDecision(p: usize): void {
  store<u16>(p + D_VERSION_MAJOR, <u16>ABI_MAJOR);
  store<u16>(p + D_VERSION_MINOR, <u16>ABI_MINOR);
  store<u32>(p + D_SIZE, <u32>DECISION_SIZE);
}

/** Sets the reason code and text (ASCII, cut at REASON_TEXT_SIZE bytes) without allocating. */
export function setReason(p: usize, code: u16, text: string): void {
  store<u16>(p + D_REASON_CODE, code);
  let n = min(text.length, REASON_TEXT_SIZE);
  for (let i = 0; i < REASON_TEXT_SIZE; i++) {
    store<u8>(p + D_REASON_TEXT + i, i < n ? <u8>text.charCodeAt(i) : 0);
  }
  store<u8>(p + D_REASON_LEN, <u8>n);
}
