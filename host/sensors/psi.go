package sensors

// PSILine is one line of a pressure file: the share of wall time (percent) in
// which some (or all, for "full") non-idle tasks were stalled on memory, over
// the last 10, 60 and 300 seconds, and the total stall time in microseconds.
type PSILine struct {
	Present              bool
	Avg10, Avg60, Avg300 float64
	TotalUS              uint64
}

// PSI is memory pressure stall information from /proc/pressure/memory
// (Linux 4.20+, CONFIG_PSI; Android 10+).
type PSI struct {
	Present    bool
	Some, Full PSILine
}

// parsePSI fills p from "some avg10=0.00 avg60=0.00 avg300=0.00 total=0"
// and the matching "full ..." line. Unknown keys are ignored.
func parsePSI(b []byte, p *PSI) {
	*p = PSI{Present: true}
	for len(b) > 0 {
		var line []byte
		line, b = cutLine(b)
		kind, rest := cutField(line)
		var dst *PSILine
		switch string(kind) {
		case "some":
			dst = &p.Some
		case "full":
			dst = &p.Full
		default:
			continue
		}
		*dst = PSILine{}
		for len(rest) > 0 {
			var kv []byte
			kv, rest = cutField(rest)
			if len(kv) == 0 {
				break
			}
			eq := -1
			for i, c := range kv {
				if c == '=' {
					eq = i
					break
				}
			}
			if eq < 0 {
				continue
			}
			k, v := kv[:eq], kv[eq+1:]
			switch string(k) {
			case "avg10":
				dst.Avg10, dst.Present = decimalOr(v, dst.Avg10, dst.Present)
			case "avg60":
				dst.Avg60, dst.Present = decimalOr(v, dst.Avg60, dst.Present)
			case "avg300":
				dst.Avg300, dst.Present = decimalOr(v, dst.Avg300, dst.Present)
			case "total":
				if t, ok := parseInt(v); ok && t >= 0 {
					dst.TotalUS, dst.Present = uint64(t), true
				}
			}
		}
	}
}

func decimalOr(v []byte, old float64, present bool) (float64, bool) {
	if f, ok := parseDecimal(v); ok {
		return f, true
	}
	return old, present
}
