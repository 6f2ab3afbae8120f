;; Follows the sensors: tier 2 when mem_available_mb (in+32) < 1000, else tier 0;
;; keeps a call counter in a global to exercise instance state.
(module
  (memory (export "memory") 1)
  (func (export "edgellm_abi_version_major") (result i32) i32.const 1)
  (func (export "edgellm_abi_version_minor") (result i32) i32.const 0)
  (func (export "in_ptr") (result i32) i32.const 1024)
  (func (export "out_ptr") (result i32) i32.const 4096)
  (global $calls (mut i32) (i32.const 0))
  (func (export "decide") (result i32)
    (global.set $calls (i32.add (global.get $calls) (i32.const 1)))
    (i32.store (i32.const 4104)
      (select (i32.const 2) (i32.const 0) (i32.lt_s (i32.load (i32.const 1056)) (i32.const 1000))))
    i32.const 0))
