// Command libedgellm is the C API of edgellm, built as a shared library:
//
//	make lib    # lib/libedgellm.so; include/edgellm.h is the header
//
// The exported functions live in package internal/capi, not here: this
// main package uses no cgo on purpose. When the main package of a
// -buildmode=c-shared build uses cgo, the go command (1.26) wants cgo's
// export header from every cgo package it depends on, finds none cached for
// packages that export nothing (llama.cpp, ggml, runtime/cgo, net), and so
// recompiles all of them on every build. With the exports in a non-main
// package the build cache works and a rebuild is a link (docs/STATUS.md #17).
package main

import _ "github.com/edgellm/edgellm/cmd/libedgellm/internal/capi" // the //export functions

func main() {}
