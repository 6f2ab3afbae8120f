;; Imports host functions that do not exist.
(module
  (import "env" "steal_keys" (func $steal (param i32) (result i32)))
  (import "wasi_snapshot_preview1" "no_such_call" (func $nope))
  (memory (export "memory") 1)
  (func (export "edgellm_abi_version_major") (result i32) i32.const 1)
  (func (export "edgellm_abi_version_minor") (result i32) i32.const 0)
  (func (export "in_ptr") (result i32) i32.const 1024)
  (func (export "out_ptr") (result i32) i32.const 4096)
  (func (export "decide") (result i32) (drop (call $steal (i32.const 0))) i32.const 0))
