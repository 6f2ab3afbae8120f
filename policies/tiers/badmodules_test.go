package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/host/policy"
)

// Bad modules built by the AssemblyScript toolchain (testdata/*.ts, built
// by make -C policies as-testdata and committed) are refused at load with
// an error that names the export.
func TestAssemblyScriptBadModules(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ file, want string }{
		{"testdata/no_decide.wasm", `"decide"`},
		{"testdata/decide_i64.wasm", `"decide"`},
		{"testdata/no_memory.wasm", `"memory"`},
	} {
		t.Run(tc.file, func(t *testing.T) {
			r, err := policy.NewRuntime(ctx, policy.NewConfig().WithInsecure(true).WithCacheDir("-").WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close(ctx)
			err = r.LoadFile(ctx, tc.file)
			if err == nil || !errors.Is(err, policy.ErrModule) && !errors.Is(err, policy.ErrInstantiate) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("load %s: %v; want a module error naming %s", tc.file, err, tc.want)
			}
			t.Log(err)
		})
	}
}
