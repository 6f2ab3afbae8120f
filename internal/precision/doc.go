// Package precision is the precision manifest: a versioned JSON record of
// each layer's tolerance to fewer bits (min_bits, max_bits, KL per
// precision, sensitivity rank, clamp thresholds), made by `edgellm
// calibrate` and read by `edgellm run --manifest` and the policy. The
// schema is documented in docs/PRECISION-MANIFEST.md.
//
// A Manifest is a plain value; Load, Parse and Write validate it. Write is
// atomic (temporary file + rename), so a failed run leaves nothing behind.
package precision
