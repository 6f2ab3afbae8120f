// Package rules holds no code: its test (rules_test.go) checks the module's
// structural rules as data, the way Go's go/build/deps_test.go keeps the
// standard library's layers: which package may import which (with the
// reason beside each edge), that no engine imports another, that nothing
// below host imports above it, that host's exported API names no internal/
// type, that no source file grows past 500 lines, and that library code
// (everything outside cmd/) reads no environment and writes nothing to
// stderr. Changing the data is a design decision, never a way to make a
// build pass.
package rules
