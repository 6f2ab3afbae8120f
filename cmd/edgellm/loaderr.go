package main

import "strings"

// loadFlagNames maps the Go fields host's load errors name to the flags
// that set them here: the library speaks Go, the CLI its flags.
var loadFlagNames = strings.NewReplacer(
	"LoadOptions.RepackLayers", "--repack-layers",
	"LoadOptions.Repack", "--repack",
	"LoadOptions.Tiers", "--tiers",
	"LoadOptions.LayerSets", "--layer-sets",
	"LoadOptions.NoMmap", "--no-mmap",
	"LoadOptions.Engine", "--engine",
	"Options.ExtraSets", "--layer-sets",
)

// cliLoadError rewrites a host.Load error in the CLI's terms; errors.Is
// and errors.As still see the original.
func cliLoadError(err error) error {
	if err == nil {
		return nil
	}
	return &flagNamedError{msg: loadFlagNames.Replace(err.Error()), err: err}
}

type flagNamedError struct {
	msg string
	err error
}

func (e *flagNamedError) Error() string { return e.msg }
func (e *flagNamedError) Unwrap() error { return e.err }
