package sensors

// CPU pressure stall information, /proc/pressure/cpu (Linux 4.20+,
// CONFIG_PSI; Android 10+), has the same format as the memory file: "some" is
// the share of wall time in which at least one runnable task waited for a
// CPU. The system-wide "full" line is always zero (since 5.13) and is kept
// only for cgroups. A reading is a PSI value filled by parsePSI; the file is
// re-read by the Reader like the memory one (Snapshot.CPUPSI).
//
// A decoding thread that shares a core with another busy process pushes this
// up: it is the most direct sign that adding threads buys queueing, not
// speed.
const cpuPSIPath = "proc/pressure/cpu"
