//go:build !unix

package policy

// lockFile: no advisory lock on this platform (edgellm's devices are Linux
// and Android); the merge in RollbackIndex.Record still keeps the highest
// revision it reads.
func lockFile(string) (func(), error) { return func() {}, nil }
