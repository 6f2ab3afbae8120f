// Bad on purpose: decide takes an argument and returns i64.
export function edgellm_abi_version_major(): i32 { return 1; }
export function edgellm_abi_version_minor(): i32 { return 0; }
const IN: usize = memory.data(1024, 16);
export function in_ptr(): i32 { return <i32>IN; }
export function out_ptr(): i32 { return <i32>IN; }
export function decide(x: i32): i64 { return <i64>x; }
