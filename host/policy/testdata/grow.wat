;; Hostile: memory.grow bomb: grows by 16 pages per iteration until refused, then traps.
(module
  (memory (export "memory") 1)
  (func (export "edgellm_abi_version_major") (result i32) i32.const 1)
  (func (export "edgellm_abi_version_minor") (result i32) i32.const 0)
  (func (export "in_ptr") (result i32) i32.const 1024)
  (func (export "out_ptr") (result i32) i32.const 4096)
  (func (export "decide") (result i32)
    (loop $l
      (br_if $l (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
    unreachable))
