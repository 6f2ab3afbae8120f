package main

import "github.com/edgellm/edgellm/abi"

// reason builds a reason text in place, without fmt and without allocating.
type reason struct {
	code abi.Reason
	b    [abi.ReasonTextSize]byte
	n    int
}

// set starts a new reason, replacing any earlier (less important) one.
func (r *reason) set(code abi.Reason, s string) {
	r.code, r.n = code, 0
	r.add(s)
}

func (r *reason) add(s string) { r.n += copy(r.b[r.n:], s) }

func (r *reason) addInt(v int64) {
	if v < 0 {
		r.add("-")
		v = -v
	}
	var tmp [20]byte
	i := len(tmp)
	for {
		i--
		tmp[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	r.n += copy(r.b[r.n:], tmp[i:])
}

// addPct writes a 0–1 fraction as a percentage.
func (r *reason) addPct(f float32) {
	r.addInt(int64(f*100 + 0.5))
	r.add("%")
}

// addWindow writes a window size, "full" for 0.
func (r *reason) addWindow(w int32) {
	if w == 0 {
		r.add("full")
		return
	}
	r.addInt(int64(w))
}

// tierMove writes "a→b".
func (r *reason) tierMove(a, b int32) {
	r.addInt(int64(a))
	r.add("→")
	r.addInt(int64(b))
}

func (r *reason) text() []byte { return r.b[:r.n] }
