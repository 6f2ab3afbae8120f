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
// product and i8mm (-cpu max) it wants neoni8mm, with the dot product only
// (cortex-a76) neondot, with neither (cortex-a53) scalar, so the choice is
// shown to be made at run time.
var wantBest = flag.String("matvec.want-best", "", "implementation Best must return on this CPU (test only)")

// archImpls are the implementations each architecture has.
// (Scalar8, C8's reference, is portable C: every architecture has it.)
var archImpls = map[string][]Impl{
	"amd64": {Scalar, AVX2, AVX512VNNI, Scalar8},
	"arm64": {Scalar, NEONDot, Scalar8, NEONI8MM},
}

// TestDispatch: Best is the implementation the flag names, Available holds
// both contracts' references (Scalar, Scalar8) and Best and only this
// architecture's implementations, with NEONI8MM only where NEONDot is too,
// and Mul takes exactly the available ones.
func TestDispatch(t *testing.T) {
	if *wantBest != "" && Best().String() != *wantBest {
		t.Fatalf("Best() = %v, want %s (Available %v)", Best(), *wantBest, Available())
	}
	av := Available()
	t.Logf("Best %v, Available %v", Best(), av)
	if !slices.Contains(av, Scalar) || !slices.Contains(av, Scalar8) || !slices.Contains(av, Best()) {
		t.Fatalf("Available() = %v: want Scalar, Scalar8 and Best %v", av, Best())
	}
	if Best() == Scalar8 {
		t.Fatalf("Best() = %v: a reference is never the best", Best())
	}
	if slices.Contains(av, NEONI8MM) && !slices.Contains(av, NEONDot) {
		t.Fatalf("Available() = %v: NEONI8MM without NEONDot", av)
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
