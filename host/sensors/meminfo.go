package sensors

// MemField names one /proc/meminfo field; Meminfo.Has is a mask of them.
type MemField uint16

const (
	MemTotal MemField = 1 << iota
	MemFree
	MemAvailable // absent before Linux 3.14
	MemBuffers
	MemCached
	MemSwapTotal
	MemSwapFree
	MemAnonPages
	MemMapped
	MemShmem
	MemDirty
)

// Meminfo is the system memory picture from /proc/meminfo, in bytes.
type Meminfo struct {
	Present bool     // the file was read
	Has     MemField // which fields were found
	Total, Free, Available,
	Buffers, Cached,
	SwapTotal, SwapFree,
	AnonPages, Mapped, Shmem, Dirty int64
}

// parseMeminfo fills m from the content of /proc/meminfo. Unknown lines are
// ignored; a line with no number leaves its field absent.
func parseMeminfo(b []byte, m *Meminfo) {
	*m = Meminfo{Present: true}
	for len(b) > 0 {
		var line []byte
		line, b = cutLine(b)
		key, val, ok := keyValue(line)
		if !ok {
			continue
		}
		var dst *int64
		var f MemField
		switch string(key) {
		case "MemTotal":
			dst, f = &m.Total, MemTotal
		case "MemFree":
			dst, f = &m.Free, MemFree
		case "MemAvailable":
			dst, f = &m.Available, MemAvailable
		case "Buffers":
			dst, f = &m.Buffers, MemBuffers
		case "Cached":
			dst, f = &m.Cached, MemCached
		case "SwapTotal":
			dst, f = &m.SwapTotal, MemSwapTotal
		case "SwapFree":
			dst, f = &m.SwapFree, MemSwapFree
		case "AnonPages":
			dst, f = &m.AnonPages, MemAnonPages
		case "Mapped":
			dst, f = &m.Mapped, MemMapped
		case "Shmem":
			dst, f = &m.Shmem, MemShmem
		case "Dirty":
			dst, f = &m.Dirty, MemDirty
		default:
			continue
		}
		if v, ok := parseKB(val); ok {
			*dst = v
			m.Has |= f
		}
	}
}

// AvailableEstimate is MemAvailable, or on kernels without it the classic
// approximation MemFree + Buffers + Cached. ok is false when neither exists.
func (m *Meminfo) AvailableEstimate() (bytes int64, ok bool) {
	if m.Has&MemAvailable != 0 {
		return m.Available, true
	}
	if m.Has&MemFree != 0 {
		return m.Free + m.Buffers + m.Cached, true
	}
	return 0, false
}
