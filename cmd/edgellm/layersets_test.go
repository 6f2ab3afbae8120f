package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/internal/sharedtest"
	"github.com/spf13/pflag"
)

func TestLayerSetFlags(t *testing.T) {
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	addLayerSetFlags(fs)
	if err := fs.Parse([]string{"--layer-sets", "a.gguf,b.gguf"}); err != nil {
		t.Fatal(err)
	}
	got, err := fs.GetStringSlice("layer-sets")
	if err != nil || !slices.Equal(got, []string{"a.gguf", "b.gguf"}) {
		t.Fatalf("--layer-sets: %v, %v", got, err)
	}
	dir := "models/derived/stories260K-ff192-"
	eng, err := host.Load(sharedtest.Path(t, dir+"Q8_0.gguf"), host.LoadOptions{Engine: "native",
		LayerSets: []string{sharedtest.Path(t, dir+"Q4_0.gguf")}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if d := describeLayerSets(eng); !strings.Contains(d, "1: stories260K-ff192-Q4_0.gguf (q4_0, 4.50 bits/weight)") {
		t.Errorf("describe: %q", d)
	}
}
