package host

import (
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/native"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestLoadShareAnchors: LoadOptions.ShareAnchors reaches the native
// engine (a lone session's anchor zones are advised mergeable; without
// the option they are not), and the llamacpp engine refuses it.
func TestLoadShareAnchors(t *testing.T) {
	path := sharedtest.Stories260K(t)
	if _, err := Load(path, LoadOptions{Engine: "llamacpp", ShareAnchors: true}); err == nil || !strings.Contains(err.Error(), "ShareAnchors") {
		t.Fatalf("llamacpp with ShareAnchors: err %v, want one naming ShareAnchors", err)
	}
	for _, share := range []bool{false, true} {
		eng, err := Load(path, LoadOptions{Engine: "native", ShareAnchors: share})
		if err != nil {
			t.Fatal(err)
		}
		sess, err := eng.NewSession(SessionConfig{NCtx: 512, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		// 256 anchors: whole pages of anchor cells in every region.
		if err := sess.(WindowSetter).SetWindow(256, 64); err != nil {
			t.Fatal(err)
		}
		kv := native.SessionOf(sess).KV()
		if kv.AnchorZoneBytes() == 0 {
			t.Fatal("no anchor zone")
		}
		if got := kv.Mergeable(); got != share {
			t.Errorf("ShareAnchors %v: one session's zones mergeable %v", share, got)
		}
		sess.Close()
		eng.Close()
	}
}
