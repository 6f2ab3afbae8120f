package sensors

import (
	"os"
	"time"
)

// Smaps is the process's memory from /proc/self/smaps_rollup (Linux 4.14+),
// in bytes. PSS — resident memory with shared pages divided among their
// sharers — is what Android's memory accounting (and its low-memory killer)
// measures, so it is the figure to watch, not VSS or even RSS.
//
// Cost note: the kernel computes smaps_rollup by walking the process's page
// tables, so a read costs time proportional to the resident size (a few
// microseconds for a small process, more for gigabytes of mapped weights).
type Smaps struct {
	Present bool
	Time    time.Time // when it was read (see WithSmapsInterval)
	Rss, Pss, PssAnon, PssFile, PssShmem,
	PrivateClean, PrivateDirty, SharedClean, SharedDirty,
	Anonymous, Swap, SwapPss, Locked int64
}

// parseSmapsRollup fills s from the content of /proc/self/smaps_rollup. The
// first line (the address range header) and unknown keys are ignored.
func parseSmapsRollup(b []byte, s *Smaps) {
	*s = Smaps{Present: true, Time: s.Time}
	for len(b) > 0 {
		var line []byte
		line, b = cutLine(b)
		key, val, ok := keyValue(line)
		if !ok {
			continue
		}
		var dst *int64
		switch string(key) {
		case "Rss":
			dst = &s.Rss
		case "Pss":
			dst = &s.Pss
		case "Pss_Anon":
			dst = &s.PssAnon
		case "Pss_File":
			dst = &s.PssFile
		case "Pss_Shmem":
			dst = &s.PssShmem
		case "Private_Clean":
			dst = &s.PrivateClean
		case "Private_Dirty":
			dst = &s.PrivateDirty
		case "Shared_Clean":
			dst = &s.SharedClean
		case "Shared_Dirty":
			dst = &s.SharedDirty
		case "Anonymous":
			dst = &s.Anonymous
		case "Swap":
			dst = &s.Swap
		case "SwapPss":
			dst = &s.SwapPss
		case "Locked":
			dst = &s.Locked
		default:
			continue
		}
		if v, ok := parseKB(val); ok {
			*dst = v
		}
	}
}

// Statm is the process's memory from /proc/PID/statm, in bytes: counters the
// kernel maintains, so reading them is cheap whatever the resident size.
type Statm struct {
	Present  bool
	Size     int64 // virtual size
	Resident int64 // RSS
	Shared   int64 // resident file-backed and shared pages
}

var pageSize = int64(os.Getpagesize())

// parseStatm fills st from "size resident shared text lib data dt" (pages).
func parseStatm(b []byte, page int64, st *Statm) {
	var v [3]int64
	for i := range v {
		var f []byte
		f, b = cutField(b)
		n, ok := parseInt(f)
		if !ok || n < 0 || n > maxInt/page {
			*st = Statm{}
			return
		}
		v[i] = n * page
	}
	*st = Statm{Present: true, Size: v[0], Resident: v[1], Shared: v[2]}
}
