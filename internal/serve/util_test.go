package serve

import (
	"errors"
	"testing"

	"github.com/openai/openai-go"
)

func asAPIError(err error, target **openai.Error) bool { return errors.As(err, target) }

func TestStopFilter(t *testing.T) {
	f := stopFilter{stops: []string{"END", "xy"}}
	var out string
	for _, p := range []string{"ab", "E", "N", "c", "EN", "D", "zz"} {
		out += f.push(p)
	}
	if out != "abENc" || !f.hit {
		t.Fatalf("got %q hit %v", out, f.hit)
	}
	f = stopFilter{stops: []string{"END"}}
	out = f.push("aE") + f.push("b") + f.flush()
	if out != "aEb" || f.hit {
		t.Fatalf("no stop: %q", out)
	}
}
