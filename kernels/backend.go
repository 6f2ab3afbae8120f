package kernels

/*
#include "llama.h"
*/
import "C"

import "sync"

var backendOnce sync.Once

// initBackend calls llama_backend_init once per process. Every constructor
// (LoadModel, Quantize) calls it; there is no matching free: the backend lives
// as long as the process.
func initBackend() {
	backendOnce.Do(func() { C.llama_backend_init() })
}
