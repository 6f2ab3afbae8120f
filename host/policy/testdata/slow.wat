;; Spins 300,000,000 loop iterations (about 0.1 s of CPU compiled, far
;; more interpreted), then decides nothing: a guest that always overruns the
;; default 5 ms deadline and fits a long one (the C API's deadline_us test).
(module
  (memory (export "memory") 1)
  (func (export "edgellm_abi_version_major") (result i32) i32.const 1)
  (func (export "edgellm_abi_version_minor") (result i32) i32.const 0)
  (func (export "in_ptr") (result i32) i32.const 1024)
  (func (export "out_ptr") (result i32) i32.const 4096)
  (func (export "decide") (result i32)
    (local $n i32)
    (local.set $n (i32.const 300000000))
    (block $done
      (loop $l
        (br_if $done (i32.le_s (local.get $n) (i32.const 0)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $l)))
    i32.const 0))
