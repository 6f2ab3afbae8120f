;; Hostile: decide never returns, and the module exports a name the host
;; reserves for instrumentation, so it runs on the fallback runtime.
(module
  (memory (export "memory") 1)
  (global (export "__edgellm_stop") (mut i32) (i32.const 0))
  (func (export "edgellm_abi_version_major") (result i32) i32.const 1)
  (func (export "edgellm_abi_version_minor") (result i32) i32.const 0)
  (func (export "in_ptr") (result i32) i32.const 1024)
  (func (export "out_ptr") (result i32) i32.const 4096)
  (func (export "decide") (result i32)
    (loop $l (br $l))
    i32.const 0))
