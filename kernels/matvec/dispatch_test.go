package matvec

import (
	"flag"
	"runtime"
	"slices"
	"testing"
)

// wantBest is the implementation Best must choose on this CPU; empty skips
// the check. `make test-arm64` runs this package's arm64 test binary under
// qemu with CPUs of known features (scripts/matvec-arm64.sh): with the dot
// product (-cpu max, cortex-a76) it wants neondot, without it (cortex-a53)
// scalar, so the choice is shown to be made at run time.
var wantBest = flag.String("matvec.want-best", "", "implementation Best must return on this CPU (test only)")

// archImpls are the implementations each architecture has.
var archImpls = map[string][]Impl{"amd64": {Scalar, AVX2, AVX512VNNI}, "arm64": {Scalar, NEONDot}}

// TestDispatch: Best is the implementation the flag names, Available holds
// Scalar and Best and only this architecture's implementations, and Mul
// takes exactly the available ones.
func TestDispatch(t *testing.T) {
	if *wantBest != "" && Best().String() != *wantBest {
		t.Fatalf("Best() = %v, want %s (Available %v)", Best(), *wantBest, Available())
	}
	av := Available()
	t.Logf("Best %v, Available %v", Best(), av)
	if !slices.Contains(av, Scalar) || !slices.Contains(av, Best()) {
		t.Fatalf("Available() = %v: want Scalar and Best %v", av, Best())
	}
	arch, ok := archImpls[runtime.GOARCH]
	if !ok {
		arch = []Impl{Scalar}
	}
	for _, impl := range av {
		if !slices.Contains(arch, impl) {
			t.Errorf("Available() = %v: %v is not a %s implementation", av, impl, runtime.GOARCH)
		}
	}
	a, _ := NewActivations(QK)
	_ = a.Set(make([]float32, QK))
	for _, impl := range allImpls {
		err := Mul(impl, Q8_0, make([]byte, Q8_0.BlockBytes()), 1, a, make([]float32, 1), 1)
		if got := err == nil; got != slices.Contains(av, impl) {
			t.Errorf("%v: Mul error %v, but Available %v", impl, err, av)
		}
	}
}
