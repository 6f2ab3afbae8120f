package synth

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/edgellm/edgellm/internal/gguf"
)

// soakEnvOut tells the re-executed test binary to write the model and exit.
const soakEnvOut = "EDGELLM_SYNTH_SOAK_OUT"

// TestSoakSynth7B (EDGELLM_SOAK=1, make soak) writes a SYNTHETIC llama2-7b
// Q4_0 (3.6 GiB) in a child process and checks the child's peak RSS
// against what streaming needs: each of the 2 workers holds one chunk of
// ChunkElems float32 values and its quantized copy, plus a fixed 32 MiB for
// the binary's resident text, the Go runtime and the tokenizer. The model
// itself must never be held in memory. With EDGELLM_SOAK_DIR the file is
// written there and kept (make soak passes it on to TestSoakLoadRSS as
// EDGELLM_NATIVE_BIG); otherwise it goes to a temp dir.
func TestSoakSynth7B(t *testing.T) {
	if out := os.Getenv(soakEnvOut); out != "" {
		opts := Options{Shape: Shapes["llama2-7b"], Type: gguf.Q4_0, VocabPath: spmVocab(t), Seed: 1, Out: out}
		if err := Write(context.Background(), opts, nil); err != nil {
			t.Fatal(err)
		}
		return
	}
	if os.Getenv("EDGELLM_SOAK") != "1" {
		t.Skip("set EDGELLM_SOAK=1 (make soak)")
	}
	dir := os.Getenv("EDGELLM_SOAK_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	out := filepath.Join(dir, "llama2-7b-q4_0.gguf")
	cmd := exec.Command(os.Args[0], "-test.run=^TestSoakSynth7B$", "-test.count=1")
	cmd.Env = append(os.Environ(), soakEnvOut+"="+out)
	start := time.Now()
	if b, err := cmd.CombinedOutput(); err != nil {
		os.Remove(out)
		t.Fatalf("child: %v\n%s", err, b)
	}
	took := time.Since(start)
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Fatal("no rusage for the child")
	}
	peak := ru.Maxrss << 10 // kB on Linux
	st, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	const workers = 2 // Options.Workers 0
	bound := workers*(ChunkElems*4+gguf.Q4_0.RowSize(ChunkElems)) + 32<<20
	t.Logf("SYNTHETIC llama2-7b Q4_0: %d bytes in %v (loaded machine?), peak RSS %.1f MiB (bound %.1f MiB)",
		st.Size(), took.Round(time.Millisecond), float64(peak)/(1<<20), float64(bound)/(1<<20))
	if peak > bound {
		t.Errorf("peak RSS %.1f MiB > %.1f MiB: the writer holds more than its chunks", float64(peak)/(1<<20), float64(bound)/(1<<20))
	}
	if st.Size() < 3<<30 {
		t.Errorf("file is %d bytes, want a 7B Q4_0 (≈3.6 GiB)", st.Size())
	}
}
