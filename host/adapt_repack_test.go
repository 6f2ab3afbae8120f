package host

import (
	"bytes"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

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
		{int32(full.MaxLayers), int32(full.MaxLayers), "MiB repacked"},
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
