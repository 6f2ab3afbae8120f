package host

import (
	"slices"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/kernels/matvec"
)

// TestAttentionEdgellmConversation: SessionConfig.Attention edgellm as an
// app runs it, through host on the native engine with edgellm's kernels,
// the default policy attached, over two Generate calls on one session:
// each turn's logits are bit for bit those of the same tokens decoded in
// the same batches by raw Decode calls in an edgellm-attention session,
// and they are not ggml's flash attention's (F32 sums against F16 ones:
// some logit differs), so the setting reaches the graph.
func TestAttentionEdgellmConversation(t *testing.T) {
	if !matvec.AttnUsable() {
		t.Skip("no edgellm attention kernel on this CPU: the session runs ggml's flash attention")
	}
	const n = 6
	eng, err := Load(sharedtest.Stories260K(t), LoadOptions{Engine: "native", Kernels: "edgellm"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	sc := SessionConfig{NCtx: 128, Threads: 1, Attention: AttentionEdgellm}
	sess, err := eng.NewSession(sc)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	a := attachDefault(t, buildPolicyWasm(t, "default"), sess, &fixedSensors{})
	defer a.Close()
	var chunks [][]int32
	for k, turn := range []string{"Once upon a time", " The"} {
		prompt, err := Tokenize(sess, turn)
		if err != nil {
			t.Fatal(err)
		}
		got := generateTurn(t, sess, prompt, n, a.BeforeStep)
		chunks = append(chunks, prompt)
		for _, tk := range got.toks {
			chunks = append(chunks, []int32{tk})
		}
		exact := decodeChunksWith(t, eng, sc, chunks)
		flash := decodeChunksWith(t, eng, SessionConfig{NCtx: 128, Threads: 1, Attention: AttentionFlash}, chunks)
		same := true
		for i := range got.logits {
			j := len(exact) - n - 1 + i
			if !slices.Equal(got.logits[i], exact[j]) {
				t.Fatalf("turn %d token %d: logits differ from the same tokens decoded in the same batches", k, i)
			}
			same = same && slices.Equal(got.logits[i], flash[j])
		}
		if same {
			t.Fatalf("turn %d: every logit bitwise ggml's flash attention's: edgellm's attention did not run", k)
		}
	}
}
