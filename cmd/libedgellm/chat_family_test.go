package main

import (
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/internal/synthtest"
)

// TestCAPIChatFamilies runs testdata/chat_family.c on each family's
// SYNTHETIC tiny model, which carries the family's chat template and
// control tokens (rigged to end its turn at once: synthtest.EndTurn), on
// both engines. The program checks model_info's template, chat_apply
// against llama.cpp's built-in template of the family, each control token
// as one id with EDGELLM_TOKENIZE_PARSE_SPECIAL (and text without), and a
// generation from the rendered chat with EDGELLM_GENERATE_PARSE_SPECIAL
// that stops at the end of turn at once. This test compares its rendering
// with llama.cpp's (host.ApplyChatTemplate) and its prompt tokens with the
// engine's special-token tokenization.
func TestCAPIChatFamilies(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the C test links a Linux shared library")
	}
	dir := libDir(t)
	prog := filepath.Join(t.TempDir(), "chat_family")
	run(t, "", "gcc", "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-I", "../../include",
		"testdata/chat_family.c", "-o", prog, "-L", dir, "-ledgellm", "-Wl,-rpath,"+dir)
	msgs := []host.ChatMessage{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi there"},
		{Role: "assistant", Content: "Hello!"}, {Role: "user", Content: "What is 2+2?"}}
	for _, name := range synthtest.TinyFamilies {
		t.Run(name, func(t *testing.T) {
			model, cf := synthtest.FamilyChatModel(t, name)
			rigged := filepath.Join(t.TempDir(), "endturn.gguf")
			synthtest.EndTurn(t, model, rigged)
			f, err := gguf.Open(rigged)
			if err != nil {
				t.Fatal(err)
			}
			tmpl, _ := f.GetString("tokenizer.chat_template")
			toks, _ := f.GetStringArray("tokenizer.ggml.tokens")
			args := []string{rigged, "", tmpl, cf.Builtin}
			for _, c := range cf.Control {
				args = append(args, fmt.Sprintf("%s=%d", c, slices.Index(toks, c)))
			}
			rendered, err := host.ApplyChatTemplate(cf.Builtin, msgs, true)
			if err != nil {
				t.Fatal(err)
			}
			for _, kind := range []string{"native", "llamacpp"} {
				args[1] = kind
				out := run(t, "", prog, args...)
				if !strings.Contains(out, " 0 failed") {
					t.Fatalf("%s: chat_family reported failures:\n%s", kind, out)
				}
				if want := "rendered: " + strings.ReplaceAll(rendered, "\n", `\n`) + "\n"; !strings.Contains(out, want) {
					t.Fatalf("%s: the C rendering is not llama.cpp's %s:\n%s\nwant %q", kind, cf.Builtin, out, want)
				}
				eng, err := host.Load(rigged, host.LoadOptions{Engine: kind})
				if err != nil {
					t.Fatal(err)
				}
				want, err := eng.Vocab().(host.SpecialTokenizer).TokenizeSpecial(rendered, true)
				eng.Close()
				if err != nil {
					t.Fatal(err)
				}
				var got []int32
				for _, l := range strings.Split(out, "\n") {
					if rest, ok := strings.CutPrefix(l, "prompt:"); ok {
						for _, w := range strings.Fields(rest) {
							n, _ := strconv.Atoi(w)
							got = append(got, int32(n))
						}
					}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("%s: C prompt tokens\n got %v\nwant %v", kind, got, want)
				}
				t.Logf("SYNTHETIC %s, %s:\n%s", name, kind, out)
			}
		})
	}
}
