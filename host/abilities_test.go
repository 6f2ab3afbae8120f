package host

import (
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/cpu"

	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/kernels"
)

// The live abilities a session can have: each is a setter interface, and a
// session implements it only when the ability is real (RATIONALE.md,
// "What a session can change"). work calls the setter and checks that the
// session's state changed.
var abilities = []struct {
	name string
	has  func(Session) bool
	work func(t *testing.T, s Session)
}{
	{"ThreadSetter", is[ThreadSetter], func(t *testing.T, s Session) {
		want := 1
		if threadsOf(t, s) == 1 {
			want = 2
		}
		if err := s.(ThreadSetter).SetThreads(want); err != nil || threadsOf(t, s) != want {
			t.Errorf("SetThreads(%d): %v; %d threads", want, err, threadsOf(t, s))
		}
	}},
	{"TierSwapper", is[TierSwapper], func(t *testing.T, s Session) {
		tr := s.Engine().(tierReporter)
		_, cur := tr.Tiers()
		if _, err := s.(TierSwapper).SwapTier(1 - cur); err != nil {
			t.Fatal("SwapTier:", err)
		}
		if _, now := tr.Tiers(); now != 1-cur {
			t.Errorf("SwapTier(%d): on tier %d", 1-cur, now)
		}
	}},
	{"WindowSetter", is[WindowSetter], func(t *testing.T, s Session) {
		if err := s.(WindowSetter).SetWindow(2, 8); err != nil {
			t.Fatal("SetWindow:", err)
		}
		if a := s.(interface{ Anchors() int }).Anchors(); a != 2 {
			t.Errorf("SetWindow(2, 8): %d anchors", a)
		}
	}},
	{"LayerWindowSetter", is[LayerWindowSetter], func(t *testing.T, s Session) {
		ws := make([]int, s.Engine().Info().NLayer)
		for i := range ws {
			ws[i] = 4 + 2*i
		}
		if err := s.(LayerWindowSetter).SetLayerWindows(2, ws); err != nil {
			t.Fatal("SetLayerWindows:", err)
		}
		if got := s.(interface{ LayerWindows() []int }).LayerWindows(); !slices.Equal(got, ws) {
			t.Errorf("SetLayerWindows(%v): windows %v", ws, got)
		}
	}},
	{"LayerSetter", is[LayerSetter], func(t *testing.T, s Session) {
		ls := s.(LayerSetter)
		sets := ls.LayerSets()
		for i := range sets {
			sets[i] = 1 - sets[i]
		}
		if err := ls.SetLayerSets(sets); err != nil {
			t.Fatal("SetLayerSets:", err)
		}
		if got := ls.LayerSets(); !slices.Equal(got, sets) {
			t.Errorf("SetLayerSets(%v): sets %v", sets, got)
		}
	}},
	{"KVTypeSetter", is[KVTypeSetter], func(t *testing.T, s Session) {
		c, err := s.(KVTypeSetter).SetKVType(KVQ8_0)
		if err != nil || !c.Changed || c.To != KVQ8_0 {
			t.Errorf("SetKVType(q8_0): %+v, %v", c, err)
		}
	}},
	{"RepackSetter", is[RepackSetter], func(t *testing.T, s Session) {
		rs := s.(RepackSetter)
		if _, err := rs.SetRepackLayers(0); err != nil {
			t.Fatal("SetRepackLayers(0):", err)
		}
		if st := rs.RepackState(); st.Layers != 0 || st.MaxLayers == 0 {
			t.Errorf("SetRepackLayers(0): %+v", st)
		}
	}},
	{"LayerLatencySampler", is[LayerLatencySampler], func(t *testing.T, s Session) {
		ll := s.(LayerLatencySampler)
		if err := ll.SetLayerLatencyEvery(1); err != nil {
			t.Fatal("SetLayerLatencyEvery:", err)
		}
		if err := s.Decode([]int32{1}, LogitsLast); err != nil {
			t.Fatal(err)
		}
		var l LayerLatency
		if !ll.LastLayerLatency(&l) {
			t.Error("no layer latency after a sampled step")
		}
	}},
}

func is[T any](s Session) bool { _, ok := s.(T); return ok }

func threadsOf(t *testing.T, s Session) int {
	th, ok := s.(interface{ Threads() int })
	if !ok {
		t.Fatal("a ThreadSetter without Threads()")
	}
	return th.Threads()
}

// TestSessionAbilities: for each engine and way of loading, the session
// implements exactly the setters of the abilities it has, and each one it
// implements changes the session's state. A plain native session is no
// TierSwapper, a tier ladder no LayerSetter, weights loaded without
// repacking no RepackSetter, a llama.cpp session only a ThreadSetter (and a
// TierSwapper on a ladder).
func TestSessionAbilities(t *testing.T) {
	dir := "models/derived/stories260K-ff192-"
	f32, q8, q4 := sharedtest.Path(t, dir+"f32.gguf"), sharedtest.Path(t, dir+"Q8_0.gguf"), sharedtest.Path(t, dir+"Q4_0.gguf")
	repack := kernels.RepackAvailable() && runtime.GOARCH == "amd64" && cpu.X86.HasAVX2 // ggml's repacked Q4_0 kernel
	native := []string{"ThreadSetter", "WindowSetter", "LayerWindowSetter", "KVTypeSetter", "LayerLatencySampler"}
	with := func(base []string, more ...string) []string { return append(slices.Clone(base), more...) }
	repackIf := func(base []string) []string {
		if repack {
			return with(base, "RepackSetter")
		}
		return base
	}
	tests := []struct {
		name string
		path string
		opts LoadOptions
		want []string
	}{
		{"native plain", q8, LoadOptions{Engine: "native"}, native},
		{"native tier ladder", "", LoadOptions{Engine: "native", Tiers: []string{q8, q4}}, with(native, "TierSwapper")},
		{"native weight sets", f32, LoadOptions{Engine: "native", LayerSets: []string{q8}}, with(native, "LayerSetter")},
		{"native repack", q4, LoadOptions{Engine: "native", Repack: true}, repackIf(native)},
		{"native tier ladder repack", "", LoadOptions{Engine: "native", Tiers: []string{q8, q4}, Repack: true}, repackIf(with(native, "TierSwapper"))},
		{"native weight sets repack", q4, LoadOptions{Engine: "native", LayerSets: []string{q8}, Repack: true}, repackIf(with(native, "LayerSetter"))},
		{"llamacpp plain", q8, LoadOptions{Engine: "llamacpp"}, []string{"ThreadSetter"}},
		{"llamacpp tier ladder", "", LoadOptions{Engine: "llamacpp", Tiers: []string{q8, q4}}, []string{"ThreadSetter", "TierSwapper"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eng, err := Load(tt.path, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			sess, err := eng.NewSession(SessionConfig{NCtx: 64, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer sess.Close()
			if err := sess.Decode([]int32{1, 2, 3}, LogitsLast); err != nil {
				t.Fatal(err)
			}
			for _, ab := range abilities {
				if got, want := ab.has(sess), slices.Contains(tt.want, ab.name); got != want {
					t.Errorf("%s: %v, want %v", ab.name, got, want)
				} else if got {
					ab.work(t, sess)
				}
			}
		})
	}
}
