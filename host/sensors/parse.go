package sensors

// Allocation-free helpers for the kernel's text formats. Every parser in this
// package works on the bytes of one pread and never converts them to strings
// except in switch statements, which the compiler does without allocating.

// cutLine returns the first line of b (without '\n') and the rest.
func cutLine(b []byte) (line, rest []byte) {
	for i, c := range b {
		if c == '\n' {
			return b[:i], b[i+1:]
		}
	}
	return b, nil
}

// trimSpace trims ASCII blanks on both sides.
func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == 0 }

// cutField returns the first blank-separated field of b and the rest.
func cutField(b []byte) (field, rest []byte) {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for i, c := range b {
		if isSpace(c) {
			return b[:i], b[i:]
		}
	}
	return b, nil
}

// maxInt is the largest value parseInt returns; longer digit strings saturate.
const maxInt = 1<<63 - 1

// parseInt parses an optionally signed decimal integer at the start of b
// (after blanks), ignoring anything after the digits. It saturates instead of
// overflowing and reports false when there are no digits.
func parseInt(b []byte) (int64, bool) {
	b = trimSpace(b)
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		b = b[1:]
	}
	var v int64
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		d := int64(c - '0')
		if v > (maxInt-d)/10 {
			v = maxInt
		} else {
			v = v*10 + d
		}
		n++
	}
	if n == 0 {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}

// parseDecimal parses a non-negative decimal with an optional fraction
// ("12.34") as used by PSI averages. At most 9 fraction digits are kept.
func parseDecimal(b []byte) (float64, bool) {
	b = trimSpace(b)
	var ip, fp int64
	var scale float64 = 1
	n := 0
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		if ip < maxInt/10-10 {
			ip = ip*10 + int64(b[i]-'0')
		}
		n++
	}
	if i < len(b) && b[i] == '.' {
		i++
		for k := 0; i < len(b) && b[i] >= '0' && b[i] <= '9'; i, k = i+1, k+1 {
			if k < 9 {
				fp = fp*10 + int64(b[i]-'0')
				scale *= 10
			}
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return float64(ip) + float64(fp)/scale, true
}

// keyValue splits "Key: value" (meminfo, smaps_rollup) at the first ':'.
func keyValue(line []byte) (key, val []byte, ok bool) {
	for i, c := range line {
		if c == ':' {
			return trimSpace(line[:i]), line[i+1:], true
		}
	}
	return nil, nil, false
}

// parseKB parses "  1234 kB" and returns bytes (saturating).
func parseKB(val []byte) (int64, bool) {
	v, ok := parseInt(val)
	if !ok || v < 0 {
		return 0, false
	}
	if v > maxInt/1024 {
		return maxInt, true
	}
	return v * 1024, true
}
