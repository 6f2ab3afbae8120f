package host

import (
	"bytes"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/cpu"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/kernels"
)

// TestAdapterRepack: with repacked weights the sensors carry the ABI 1.4
// readings (units, MiB), a Decision.RepackLayers releases and restores
// units between steps (logged, counted, decoding goes on), a negative
// value leaves the count, and an engine loaded without repacking reports
// nothing and cannot take the field (policy.Apply keeps it).
func TestAdapterRepack(t *testing.T) {
	if !kernels.RepackAvailable() {
		t.Fatal("the build must define GGML_USE_CPU_REPACK (eval \"$(make -s env)\")")
	}
	if runtime.GOARCH != "amd64" || !cpu.X86.HasAVX2 {
		t.Skip("no AVX2: ggml has no repacked Q4_0 kernel on this CPU")
	}
	q4 := filepath.Join(sharedtest.Path(t, "models/derived"), "stories260K-ff192-Q4_0.gguf")
	eng, err := Load(q4, LoadOptions{Engine: "native", Repack: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	sc := SessionConfig{NCtx: 64, Threads: 1}
	sess, err := eng.NewSession(sc)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	rs, ok := sess.(RepackSetter)
	if !ok {
		t.Fatal("a native session is not a RepackSetter")
	}
	full := rs.RepackState()
	if full.MaxLayers < eng.Info().NLayer || full.Layers != full.MaxLayers || full.Bytes == 0 {
		t.Fatalf("after load: %+v (%d layers)", full, eng.Info().NLayer)
	}
	var log bytes.Buffer
	a := newAdapter(nil, nil, eng, sess, sc, &log)
	if a.cur.RepackLayers != int32(full.Layers) {
		t.Fatalf("pre-filled RepackLayers %d, want %d", a.cur.RepackLayers, full.Layers)
	}
	var s abi.Sensors
	a.fillRepack(&s)
	mib := func(b int64) int32 { return int32((b + 1<<20 - 1) >> 20) }
	if !s.Has(abi.PresentRepack) || s.RepackLayers != int32(full.Layers) || s.RepackLayersMax != int32(full.MaxLayers) ||
		s.RepackMB != mib(full.Bytes) || s.RepackMBMax != mib(full.MaxBytes) {
		t.Fatalf("sensors %+v, want %+v", s, full)
	}
	tok := int32(1)
	decode := func() {
		t.Helper()
		if err := sess.Decode([]int32{tok}, LogitsLast); err != nil {
			t.Fatal(err)
		}
		tok = 403
	}
	decode()
	for _, tc := range []struct {
		k, want int32
		log     string
	}{
		{2, 2, "MiB released"},
		{-1, 2, ""}, // leave as is
		{0, 0, "MiB released"},
		{int32(full.MaxLayers), int32(full.MaxLayers), "MiB over 1 steps"},
	} {
		log.Reset()
		d := a.cur
		d.RepackLayers = tc.k
		if err := a.apply(1, d); err != nil {
			t.Fatal(err)
		}
		got := rs.RepackState()
		if a.cur.RepackLayers != tc.want || int32(got.Layers) != tc.want || !strings.Contains(log.String(), tc.log) {
			t.Errorf("k %d: decision %d, engine %+v, log %q", tc.k, a.cur.RepackLayers, got, log.String())
		}
		var s abi.Sensors
		a.fillRepack(&s)
		if s.RepackLayers != tc.want {
			t.Errorf("k %d: sensors say %d", tc.k, s.RepackLayers)
		}
		decode()
	}
	if a.Stats().RepackChanges != 3 {
		t.Errorf("%d repack changes counted, want 3", a.Stats().RepackChanges)
	}

	// A raise is paced: with no time budget, one unit a step, the rest at
	// the following steps (BeforeStep), logged once complete.
	defer func(b time.Duration) { RepackStepBudget = b }(RepackStepBudget)
	RepackStepBudget = 0
	d := a.cur
	d.RepackLayers = 0
	if err := a.apply(10, d); err != nil {
		t.Fatal(err)
	}
	log.Reset()
	d = a.cur
	d.RepackLayers = int32(full.MaxLayers)
	if err := a.apply(11, d); err != nil {
		t.Fatal(err)
	}
	if got := rs.RepackState().Layers; got != 1 || !strings.Contains(log.String(), fmt.Sprintf("repacking 0→%d layers", full.MaxLayers)) {
		t.Fatalf("first step of a paced raise: %d units, log %q", got, log.String())
	}
	a.next = 1 << 30 // no policy here: BeforeStep only carries the raise on
	for step := 12; rs.RepackState().Layers < full.MaxLayers; step++ {
		if step > 11+full.MaxLayers {
			t.Fatalf("raise not complete after %d steps: %+v", step-11, rs.RepackState())
		}
		before := rs.RepackState().Layers
		if err := a.BeforeStep(step); err != nil {
			t.Fatal(err)
		}
		if got := rs.RepackState().Layers; got != before+1 {
			t.Fatalf("step %d: %d → %d units, want one more", step, before, got)
		}
		decode()
	}
	if want := fmt.Sprintf("repacked 0→%d layers", full.MaxLayers); !strings.Contains(log.String(), want) ||
		!strings.Contains(log.String(), fmt.Sprintf("over %d steps", full.MaxLayers)) {
		t.Errorf("log %q lacks %q over %d steps", log.String(), want, full.MaxLayers)
	}
	if a.Stats().RepackChanges != 5 || a.repack.pending {
		t.Errorf("%d repack changes (want 5), pending %v", a.Stats().RepackChanges, a.repack.pending)
	}

	plain, err := Load(q4, LoadOptions{Engine: "native"})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	ps, err := plain.NewSession(sc)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	b := newAdapter(nil, nil, plain, ps, sc, &log)
	var s2 abi.Sensors
	b.fillRepack(&s2)
	if s2.Has(abi.PresentRepack) || b.abilities().Repack {
		t.Errorf("an engine loaded without repacking: sensors %+v, abilities %+v", s2, b.abilities())
	}
}
