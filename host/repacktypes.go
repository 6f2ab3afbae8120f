package host

import "github.com/edgellm/edgellm/kernels"

// RepackTypes lists the weight types ggml repacks into interleaved layouts
// on this CPU (LoadOptions.Repack), as ggml itself answers for each type:
// Q4_0, IQ4_NL and Q4_K with AVX2, Q2_K too with AVX-512, in this ggml.
// Matrices also need a row count that is a multiple of 8. Empty when the
// build has no CPU_REPACK buffer type (make REPACK=0).
func RepackTypes() []string { return kernels.RepackTypes() }
