// The tiers reference policy in AssemblyScript: the same logic as main.go,
// checked by the same test table (decide_test.go, TestAssemblyScript).
// Build: make -C policies assemblyscript  (needs npm).
import {
  ABI_MAJOR, ABI_MINOR, SENSORS_SIZE, DECISION_SIZE, STATUS_OK, STATUS_BAD_SENSORS, STATUS_BAD_DECISION,
  S_TIERS_AVAILABLE, S_LOW_MEMORY, S_TRIM_LEVEL, S_THERMAL_STATUS, S_MEM_AVAILABLE_MB, S_MEM_THRESHOLD_MB,
  P_TIERS_AVAILABLE, P_LOW_MEMORY, P_TRIM_LEVEL, P_THERMAL_STATUS, P_MEM_AVAILABLE_MB, P_MEM_THRESHOLD_MB,
  D_TIER, D_WINDOW, TRIM_RUNNING_CRITICAL, THERMAL_MODERATE, THERMAL_LIGHT,
  REASON_LOW_MEMORY, REASON_THERMAL, REASON_MEMORY_PRESSURE, REASON_MEMORY_HEADROOM,
  sensorsValid, decisionValid, has, finishDecision, setReason,
} from "../../policy-sdk/assemblyscript/assembly/index";

const EMERGENCY_WINDOW: i32 = 256;
const PRESSURE_MB: i32 = 256;
const HEADROOM_MB: i32 = 1024;

// The two buffers, static for the instance's life.
const IN: usize = memory.data(SENSORS_SIZE, 16);
const OUT: usize = memory.data(DECISION_SIZE, 16);

export function edgellm_abi_version_major(): i32 { return ABI_MAJOR; }
export function edgellm_abi_version_minor(): i32 { return ABI_MINOR; }
export function in_ptr(): i32 { return <i32>IN; }
export function out_ptr(): i32 { return <i32>OUT; }

export function decide(): i32 {
  if (!sensorsValid(IN)) return STATUS_BAD_SENSORS;
  if (!decisionValid(OUT)) return STATUS_BAD_DECISION;
  run(IN, OUT);
  finishDecision(OUT);
  return STATUS_OK;
}

function run(s: usize, d: usize): void {
  const tiers = load<i32>(s + S_TIERS_AVAILABLE);
  if (!has(s, P_TIERS_AVAILABLE) || tiers <= 0) return;
  const last = tiers - 1;
  const low = has(s, P_LOW_MEMORY) && load<u8>(s + S_LOW_MEMORY) != 0;
  const trim = has(s, P_TRIM_LEVEL) && load<u8>(s + S_TRIM_LEVEL) >= TRIM_RUNNING_CRITICAL;
  if (low || trim) {
    store<i32>(d + D_TIER, last);
    store<i32>(d + D_WINDOW, EMERGENCY_WINDOW);
    setReason(d, REASON_LOW_MEMORY, "emergency");
    return;
  }
  if (load<i32>(d + D_WINDOW) == EMERGENCY_WINDOW) store<i32>(d + D_WINDOW, 0);
  const hasThermal = has(s, P_THERMAL_STATUS);
  const thermal = load<u8>(s + S_THERMAL_STATUS);
  const hot = hasThermal && thermal >= THERMAL_MODERATE;
  const cool = !hasThermal || thermal <= THERMAL_LIGHT;
  const hasMem = has(s, P_MEM_AVAILABLE_MB | P_MEM_THRESHOLD_MB);
  const head = load<i32>(s + S_MEM_AVAILABLE_MB) - load<i32>(s + S_MEM_THRESHOLD_MB);
  const tier = load<i32>(d + D_TIER);
  if (hot && tier < last) {
    store<i32>(d + D_TIER, tier + 1);
    setReason(d, REASON_THERMAL, "hot");
  } else if (hasMem && head < PRESSURE_MB && tier < last) {
    store<i32>(d + D_TIER, tier + 1);
    setReason(d, REASON_MEMORY_PRESSURE, "low headroom");
  } else if (cool && (!hasMem || head > HEADROOM_MB) && tier > 0) {
    store<i32>(d + D_TIER, tier - 1);
    setReason(d, REASON_MEMORY_HEADROOM, "recovered");
  }
}
