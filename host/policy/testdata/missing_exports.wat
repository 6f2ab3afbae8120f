;; Missing exports: no decide, no in_ptr/out_ptr.
(module
  (memory (export "memory") 1)
  (func (export "edgellm_abi_version_major") (result i32) i32.const 1)
  (func (export "edgellm_abi_version_minor") (result i32) i32.const 0))
