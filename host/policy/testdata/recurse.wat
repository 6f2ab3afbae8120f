;; Hostile: decide never returns, without a single loop: a binary call tree
;; of depth 60 (2^60 calls, stack depth 60). Only function-entry checks stop it.
(module
  (memory (export "memory") 1)
  (func (export "edgellm_abi_version_major") (result i32) i32.const 1)
  (func (export "edgellm_abi_version_minor") (result i32) i32.const 0)
  (func (export "in_ptr") (result i32) i32.const 1024)
  (func (export "out_ptr") (result i32) i32.const 4096)
  (func $tree (param $n i32) (result i32)
    (if (result i32) (i32.eqz (local.get $n))
      (then (i32.const 1))
      (else (i32.add
        (call $tree (i32.sub (local.get $n) (i32.const 1)))
        (call $tree (i32.sub (local.get $n) (i32.const 1)))))))
  (func (export "decide") (result i32)
    (drop (call $tree (i32.const 60)))
    i32.const 0))
