// Package fpenv reads and clears the calling OS thread's floating-point
// exception flags (the SSE/AVX MXCSR register on amd64): a test can tell
// whether a computation on that thread consumed denormal operands,
// overflowed or produced NaN, which the CPU otherwise does silently (and,
// for denormals, on some CPUs at a large cost per operation). The flags are
// sticky: Clear, compute on the same locked OS thread, then Read.
package fpenv

// Flags are the exception flags (MXCSR bits 0-5 on amd64).
type Flags uint32

// The flags.
const (
	Invalid   Flags = 1 << 0 // an invalid operation: NaN produced
	Denormal  Flags = 1 << 1 // a denormal operand was consumed
	DivByZero Flags = 1 << 2
	Overflow  Flags = 1 << 3
	Underflow Flags = 1 << 4 // a tiny (denormal or zero) result
	Inexact   Flags = 1 << 5
	all             = 0x3f
)
