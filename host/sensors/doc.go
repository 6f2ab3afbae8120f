// Package sensors reads the device readings an adaptive policy acts on —
// memory, memory pressure, the memory cgroup, the process's PSS, thermal
// zones, power supplies, CPU frequencies — from the kernel files Linux and
// Android share, and accepts the readings an embedding app pushes from its
// platform's own APIs.
//
// # Use
//
//	r, err := sensors.NewReader()            // opens every file once
//	defer r.Close()
//	p := sensors.NewPlatform(sensors.DefaultStaleness)
//	s := sensors.NewSampler(r, p, sensors.DefaultInterval)
//	for each decode step {
//		s.Fill(&in)                          // abi.Sensors: cached between readings
//	}
//	// from the app's threads:
//	p.PushMemoryInfo(availMem, threshold, totalMem, lowMemory)
//	p.PushThermalStatus(status)
//
// A Reader keeps the kernel files open and re-reads them with pread from
// offset 0 into one preallocated buffer: a Read makes no path lookups and no
// allocations. Reading every sensor costs about 18 µs on the CI machine
// (BenchmarkReadAll), with smaps_rollup — whose cost grows with the resident
// size — re-read once per second (WithSmapsInterval). A missing file is never
// an error: each reading has a Present flag, and Snapshot.Fill sets only the
// ABI presence bits of readings that exist. WithRoot points a Reader at a
// fixture tree (testdata/).
//
// README.md maps each Android API to its ABI field, with units, and documents
// the precedence and staleness of pushed readings; ZoneStatus documents how a
// 0–6 thermal status is derived from trip points.
//
// # Goroutines and ownership
//
// Reader and Sampler are not safe for concurrent use: they belong to the
// decode loop. Platform is safe for concurrent use (pushes from app threads,
// Apply from the decode loop). Snapshot is a plain fixed-size value.
package sensors
