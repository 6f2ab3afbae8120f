package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/internal/sharedtest"
)

// fullWriter fails every write, as stdout on a full disk or a closed pipe.
type fullWriter struct{}

func (fullWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// TestOutputErrorsReachExitCode: a command whose product cannot be written
// fails, on every output path (stdout, --stats-json, --logits-out).
func TestOutputErrorsReachExitCode(t *testing.T) {
	model := sharedtest.Stories260K(t)
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"inspect", model}, fullWriter{}, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "writing standard output") {
		t.Errorf("inspect to a full stdout: exit %d, stderr %q", code, stderr.String())
	}
	stderr.Reset()
	if code := run(context.Background(), []string{"run", "-m", model, "-n", "4", "--temp", "0", "-p", "Once"}, fullWriter{}, &stderr); code != 1 {
		t.Errorf("run to a full stdout: exit %d, stderr %q", code, stderr.String())
	}
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	for _, flag := range []string{"--stats-json", "--logits-out"} {
		_, errs, code := runCLI(t, "run", "-m", model, "-n", "4", "--temp", "0", "-p", "Once", flag, "/dev/full")
		if code != 1 || !strings.Contains(errs, flag) {
			t.Errorf("run %s /dev/full: exit %d, stderr %q", flag, code, errs)
		}
	}
}
