package host

import (
	"slices"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/abi"
	"github.com/edgellm/edgellm/internal/native"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

var _ LayerWindowSetter = (*native.Session)(nil)

// TestAdapterLayerWindows: a decision's LayerWindowScale reaches the native
// engine as per-layer windows max(1, round(scale × Window)) (scale 0 = 1);
// scales go back to all-equal windows; a change the engine refuses leaves
// the decision in force as it was.
func TestAdapterLayerWindows(t *testing.T) {
	eng, err := Load(sharedtest.Stories260K(t), LoadOptions{Engine: "native"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	const nCtx = 64
	sess, err := eng.NewSession(SessionConfig{NCtx: nCtx, NBatch: 8, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	var log strings.Builder
	a := newAdapter(nil, nil, eng, sess, SessionConfig{NCtx: nCtx, Threads: 1, KVType: KVF16}, &log)
	ns := native.SessionOf(sess)
	tests := []struct {
		name    string
		window  int32
		scales  []float32 // layers 0..4
		want    []int     // windows in force afterwards
		wantLog string
	}{
		{"per-layer", 32, []float32{0.25, 0.5, 0, 1, 0.1}, []int{8, 16, 32, 32, 3}, "window 64→32 anchors 0→4, layer windows [8 16 32 32 3]"},
		{"window moves", 16, []float32{0.25, 0.5, 0, 1, 0.1}, []int{4, 8, 16, 16, 2}, "window 32→16 anchors 4→4, layer windows [4 8 16 16 2]"},
		{"scales only", 16, []float32{1, 1, 0.5, 0, 0}, []int{16, 16, 8, 16, 16}, "layer windows [16 16 8 16 16]"},
		{"back to equal", 16, nil, []int{16, 16, 16, 16, 16}, "layer windows [16 16 16 16 16]"},
		// Turning the window off once the ring is in use is refused.
		{"refused", nCtx, []float32{0.5}, []int{16, 16, 16, 16, 16}, "window 64 anchors 4 not applied"},
	}
	toks := make([]int32, 8)
	for i := range toks {
		toks[i] = int32(300 + i)
	}
	for step, tc := range tests {
		log.Reset()
		d := a.Current()
		d.Window, d.Anchors = tc.window, 4
		d.LayerWindowScale = [abi.MaxLayers]float32{}
		copy(d.LayerWindowScale[:], tc.scales)
		before := a.Current()
		if err := a.apply(step, d); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := ns.LayerWindows(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: layer windows %v, want %v", tc.name, got, tc.want)
		}
		if !strings.Contains(log.String(), tc.wantLog) {
			t.Errorf("%s: log %q, want %q", tc.name, log.String(), tc.wantLog)
		}
		cur := a.Current()
		if tc.name == "refused" {
			if cur.Window != before.Window || cur.LayerWindowScale != before.LayerWindowScale {
				t.Errorf("refused change still in force: window %d, scales %v", cur.Window, cur.LayerWindowScale[:5])
			}
		} else if cur.Window != tc.window || cur.LayerWindowScale != d.LayerWindowScale {
			t.Errorf("%s: current window %d scales %v, want the decision's", tc.name, cur.Window, cur.LayerWindowScale[:5])
		}
		// Decode well past every window: the rings wrap.
		for range 6 {
			if err := sess.Decode(toks, LogitsLast); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		t.Logf("%s: %s", tc.name, strings.TrimSpace(log.String()))
	}
	if sess.Len() != 5*6*8 {
		t.Fatalf("Len %d", sess.Len())
	}
}

// TestAdapterLayerWindowsUnsupported: an engine without per-layer windows
// keeps the scales in force unchanged.
func TestAdapterLayerWindowsUnsupported(t *testing.T) {
	eng, err := Load(sharedtest.Stories260K(t), LoadOptions{Engine: "llamacpp"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	sess, err := eng.NewSession(SessionConfig{NCtx: 64, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if _, ok := sess.(LayerWindowSetter); ok {
		t.Skip("the llamacpp session has per-layer windows now")
	}
	a := newAdapter(nil, nil, eng, sess, SessionConfig{NCtx: 64, Threads: 1, KVType: KVF16}, nil)
	d := a.Current()
	d.Window = 32
	d.LayerWindowScale[0] = 0.5
	if err := a.apply(0, d); err != nil {
		t.Fatal(err)
	}
	if cur := a.Current(); cur.LayerWindowScale != ([abi.MaxLayers]float32{}) {
		t.Fatalf("scales %v in force on an engine without per-layer windows", cur.LayerWindowScale[:4])
	}
}
