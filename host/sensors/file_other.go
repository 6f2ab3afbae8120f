//go:build !linux && !android

package sensors

// kfile on platforms without procfs/sysfs: every file is absent, so every
// reading reports Present == false.
type kfile struct{}

func openKFile(string) kfile                 { return kfile{} }
func (kfile) ok() bool                       { return false }
func (kfile) read(buf []byte) ([]byte, bool) { return nil, false }
func (*kfile) close()                        {}

func affinity() (mask [2]uint64, n int, ok bool) { return mask, 0, false }
