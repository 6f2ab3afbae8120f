package fpenv

func mxcsr() uint32
func setMXCSR(v uint32)

// Supported reports whether Read and Clear work on this architecture.
const Supported = true

// Read returns the calling thread's exception flags.
func Read() Flags { return Flags(mxcsr()) & all }

// Clear clears the calling thread's exception flags (not the masks or
// the rounding mode).
func Clear() { setMXCSR(mxcsr() &^ all) }
