;; Hostile: decide works 5 times per instance (tier 3), then traps.
(module
  (memory (export "memory") 1)
  (func (export "edgellm_abi_version_major") (result i32) i32.const 1)
  (func (export "edgellm_abi_version_minor") (result i32) i32.const 0)
  (func (export "in_ptr") (result i32) i32.const 1024)
  (func (export "out_ptr") (result i32) i32.const 4096)
  (global $n (mut i32) (i32.const 0))
  (func (export "decide") (result i32)
    (global.set $n (i32.add (global.get $n) (i32.const 1)))
    (if (i32.gt_u (global.get $n) (i32.const 5)) (then unreachable))
    (i32.store (i32.const 4104) (i32.const 3))
    i32.const 0))
