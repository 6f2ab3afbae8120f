;; Hostile: asks for what no engine can do; every field must be clamped.
(module
  (memory (export "memory") 1)
  (func (export "edgellm_abi_version_major") (result i32) i32.const 1)
  (func (export "edgellm_abi_version_minor") (result i32) i32.const 0)
  (func (export "in_ptr") (result i32) i32.const 1024)
  (func (export "out_ptr") (result i32) i32.const 4096)
  (func (export "decide") (result i32)
    (i32.store (i32.const 4104) (i32.const 99))        ;; tier
    (i32.store (i32.const 4108) (i32.const 100))       ;; spec_k
    (i32.store (i32.const 4112) (i32.const 1000000))   ;; window
    (i32.store (i32.const 4116) (i32.const 5000000))   ;; anchors
    (i32.store (i32.const 4120) (i32.const 4096))      ;; threads
    (i32.store (i32.const 4124) (i32.const 1000000))   ;; cadence_steps
    (i32.store8 (i32.const 4128) (i32.const 4))        ;; kv_type q4_0
    (i32.store8 (i32.const 4192) (i32.const 12))       ;; layer_bits[0] = 12
    (i32.store8 (i32.const 4193) (i32.const 1))        ;; layer_bits[1] = 1
    (i32.store8 (i32.const 4319) (i32.const 4))        ;; layer_bits[127] (no such layer)
    (f32.store (i32.const 4320) (f32.const 7.5))       ;; layer_window_scale[0]
    i32.const 0))
