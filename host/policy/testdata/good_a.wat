;; A well-behaved policy: tier 1, spec_k 4, reason 7 (fixed).
(module
  (memory (export "memory") 1)
  (func (export "edgellm_abi_version_major") (result i32) i32.const 1)
  (func (export "edgellm_abi_version_minor") (result i32) i32.const 0)
  (func (export "in_ptr") (result i32) i32.const 1024)
  (func (export "out_ptr") (result i32) i32.const 4096)
  (func (export "decide") (result i32)
    (i32.store (i32.const 4104) (i32.const 1))     ;; out+8  tier
    (i32.store (i32.const 4108) (i32.const 4))     ;; out+12 spec_k
    (i32.store16 (i32.const 4130) (i32.const 7))   ;; out+34 reason_code
    i32.const 0))
