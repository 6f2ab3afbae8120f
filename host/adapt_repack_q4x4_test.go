package host

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/internal/native"
	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/kernels"
)

// TestAdapterRepackQ4x4: the host's door to edgellm's q4x4 layout as repack
// units. LoadOptions Kernels "edgellm" with Repack, on a CPU that runs the
// q4x4 kernel: a native session is a RepackSetter with every unit in q4x4
// at load (what Info reports as repacked memory), the policy's sensors
// carry it, a Decision.RepackLayers of 0 releases every unit (0 bytes) and
// one of MaxLayers takes them back; SetRepackLayers through the
// RepackSetter keeps half. Greedy tokens are the same at every count (the
// q4x4 and plain-block kernels agree bitwise on decode steps).
func TestAdapterRepackQ4x4(t *testing.T) {
	if !kernels.EdgellmQ4x4Available() {
		t.Skip("q4x4 kernels need AVX-512 VNNI or AVX2 with FMA and F16C")
	}
	q4 := filepath.Join(sharedtest.Path(t, "models/derived"), "stories260K-ff192-Q4_0.gguf")
	eng, err := Load(q4, LoadOptions{Engine: "native", Kernels: "edgellm", Repack: true})
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
	// The units hold q4x4 copies, not ggml's repacked blocks.
	if ne, ok := eng.(*native.Engine); !ok || ne.Report().OwnLayout.Bytes == 0 || ne.Report().OwnLayout.Bytes != eng.Info().RepackBytes {
		t.Fatalf("not on edgellm's q4x4 layout: %+v, info repack %d bytes", ne.Report(), eng.Info().RepackBytes)
	}
	full := rs.RepackState()
	if full.MaxLayers < eng.Info().NLayer || full.Layers != full.MaxLayers || full.Bytes == 0 || full.Bytes != eng.Info().RepackBytes {
		t.Fatalf("after load: %+v, info repack %d bytes (%d layers)", full, eng.Info().RepackBytes, eng.Info().NLayer)
	}
	greedy := func() []int32 {
		t.Helper()
		s, err := eng.NewSession(sc)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		toks := []int32{1}
		l := make([]float32, eng.Info().NVocab)
		for len(toks) < 24 {
			if err := s.Decode(toks[len(toks)-1:], LogitsLast); err != nil {
				t.Fatal(err)
			}
			if err := s.Logits(0, l); err != nil {
				t.Fatal(err)
			}
			toks = append(toks, kernels.Argmax(l))
		}
		return toks
	}
	want := greedy()
	var log bytes.Buffer
	a := newAdapter(nil, nil, eng, sess, sc, &log)
	var s abi.Sensors
	a.fillRepack(&s)
	if !s.Has(abi.PresentRepack) || s.RepackLayers != int32(full.Layers) || s.RepackMB == 0 {
		t.Fatalf("sensors %+v, want %+v", s, full)
	}
	d := a.cur
	d.RepackLayers = 0
	if err := a.apply(1, d); err != nil {
		t.Fatal(err)
	}
	if st := rs.RepackState(); st.Layers != 0 || st.Bytes != 0 || st.MaxBytes != full.Bytes || !strings.Contains(log.String(), "MiB released") {
		t.Fatalf("decision 0: %+v, log %q", st, log.String())
	}
	if got := greedy(); !slices.Equal(got, want) {
		t.Fatalf("every unit released: tokens %v, want %v", got, want)
	}
	if _, err := rs.SetRepackLayers(full.MaxLayers / 2); err != nil {
		t.Fatal(err)
	}
	if st := rs.RepackState(); st.Layers != full.MaxLayers/2 || st.Bytes == 0 || st.Bytes >= full.Bytes {
		t.Fatalf("half: %+v", st)
	}
	if got := greedy(); !slices.Equal(got, want) {
		t.Fatalf("half the units: tokens %v, want %v", got, want)
	}
	d = a.cur
	d.RepackLayers = int32(full.MaxLayers)
	if err := a.apply(2, d); err != nil {
		t.Fatal(err)
	}
	a.next = 1 << 30 // no policy here: BeforeStep only carries a paced raise on
	for step := 3; rs.RepackState().Layers < full.MaxLayers && step < 3+full.MaxLayers; step++ {
		if err := a.BeforeStep(step); err != nil {
			t.Fatal(err)
		}
	}
	if st := rs.RepackState(); st != full {
		t.Fatalf("decision %d: %+v, want %+v", full.MaxLayers, st, full)
	}
	if got := greedy(); !slices.Equal(got, want) {
		t.Fatalf("every unit back: tokens %v, want %v", got, want)
	}
}
