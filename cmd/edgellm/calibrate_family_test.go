package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/edgellm/edgellm/internal/synth"
)

// TestCalibrateFamilies: calibrate measures every layer of a SYNTHETIC tiny
// model of each family against its Q4_0 set and writes a manifest that run
// --layer-sets --manifest accepts.
func TestCalibrateFamilies(t *testing.T) {
	stories := sharedtest.Stories260K(t)
	text := sharedtest.Path(t, "text/stories.txt")
	for _, name := range []string{"qwen2-tiny", "qwen3-tiny", "gemma2-tiny", "gemma3-tiny", "phi3-tiny", "smollm2-tiny"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			vocab := []string{"--vocab", stories}
			if synth.Shapes[name].Vocab != "" {
				vocab = nil // the shape's own (phi3-tiny: Phi-3's)
			}
			var files []string
			for _, ty := range []string{"q8_0", "q4_0"} {
				f := filepath.Join(dir, ty+".gguf")
				if _, errs, code := runCLI(t, append([]string{"synth", "--shape", name, "--type", ty, "-o", f}, vocab...)...); code != 0 {
					t.Fatalf("synth %s: %s", ty, errs)
				}
				files = append(files, f)
			}
			man := filepath.Join(dir, "m.json")
			_, errs, code := runCLI(t, "calibrate", files[0], "--sets", files[1], "--text", text, "-o", man, "--threads", "1", "--chunk", "128")
			n := synth.Shapes[name].NLayer
			if code != 0 || !strings.Contains(errs, fmt.Sprintf("[%d/%d] layer %d", n, n, n-1)) || !strings.Contains(errs, "wrote "+man) {
				t.Fatalf("calibrate: exit %d: %s", code, errs)
			}
			_, errs, code = runCLI(t, "run", "-m", files[0], "--layer-sets", files[1], "--manifest", man, "-n", "4", "--threads", "1", "--temp", "0")
			if code != 0 || !strings.Contains(errs, fmt.Sprintf("precision manifest %s: %d layers", man, n)) {
				t.Fatalf("run --manifest: exit %d: %s", code, errs)
			}
		})
	}
}
