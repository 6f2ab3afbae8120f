package fpenv

import (
	"math"
	"runtime"
	"testing"
)

var sink float32

// TestFlags: each flag is raised by the operation that defines it and
// cleared by Clear.
func TestFlags(t *testing.T) {
	if !Supported {
		t.Skip("flags are not read on " + runtime.GOARCH)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tiny := math.Float32frombits(1) // the smallest denormal
	for _, tc := range []struct {
		name string
		op   func(a float32) float32
		arg  float32
		want Flags
	}{
		{"denormal operand", func(a float32) float32 { return a * 2 }, tiny, Denormal},
		{"underflow", func(a float32) float32 { return a * a }, 1e-30, Underflow},
		{"overflow", func(a float32) float32 { return a * a }, 1e30, Overflow},
		{"invalid", func(a float32) float32 { return a - a }, float32(math.Inf(1)), Invalid},
	} {
		Clear()
		if f := Read(); f != 0 {
			t.Fatalf("%s: flags %#x after Clear", tc.name, f)
		}
		sink = tc.op(tc.arg)
		if f := Read(); f&tc.want == 0 {
			t.Errorf("%s: flags %#x, want %#x set", tc.name, f, tc.want)
		}
	}
}
