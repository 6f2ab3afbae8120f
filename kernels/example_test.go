package kernels_test

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/kernels"
)

// Greedy decoding with a reusable batch and a caller-owned logits slice.
func Example() {
	m, err := kernels.LoadModel(filepath.Join(sharedtest.Dir(), "models/stories260K.gguf"), kernels.ModelParams{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close() // after the Context: defers run in reverse order
	c, err := kernels.NewContext(m, kernels.ContextParams{NCtx: 256, Threads: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	b, _ := kernels.NewBatch(16, 1)
	defer b.Close()

	v := m.Vocab()
	prompt, _ := v.Tokenize("Once upon a time", true, false)
	for i, t := range prompt {
		b.Add(t, i, 0, i == len(prompt)-1) // logits for the last token only
	}
	logits := make([]float32, c.NVocab())
	text := []byte{}
	for pos := len(prompt); pos < len(prompt)+12; pos++ {
		if err := c.Decode(b); err != nil {
			fmt.Println(err)
			return
		}
		c.Logits(b.Len()-1, logits)
		tok := kernels.Argmax(logits)
		text, _ = v.Piece(text, tok, false)
		b.Clear()
		b.Add(tok, pos, 0, true)
	}
	fmt.Println(strings.TrimSpace(string(text)))
	// Output: , there was a little girl named Lily. She
}
