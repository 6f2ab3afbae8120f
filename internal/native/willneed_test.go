package native

import (
	"fmt"
	"os"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/edgellm/edgellm/internal/gguf"
)

// residentFrac is the fraction of the pages of w's mapping in [lo, hi) that
// are resident (mincore).
func residentFrac(t *testing.T, w *Weights, lo, hi int64) float64 {
	t.Helper()
	ps := int64(os.Getpagesize())
	lo, hi = lo/ps*ps, min((hi+ps-1)/ps*ps, int64(len(w.mapping)))
	vec := make([]byte, (hi-lo)/ps)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&w.mapping[lo])), uintptr(hi-lo), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatalf("mincore: %v", e)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return float64(n) / float64(len(vec))
}

// dropCache writes back and evicts path's pages from the page cache
// (nothing maps it now).
func dropCache(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil { // dirty pages (a file just written) are not dropped
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Skipf("cannot drop the page cache: %v", err)
	}
}

// TestWillNeedLayers (issue #29, warm start): from a cold page cache, a load
// with WillNeedNone leaves the last layer's weights on disk (nothing at
// load reads them), and a load with WillNeedAll brings them in without
// any decoding (read-ahead; polled until done, bounded at 20 s).
func TestWillNeedLayers(t *testing.T) {
	path := synthModel(t, tinyLlamaQuarter, gguf.Q4_0)
	last := func(e *Engine) (int64, int64) {
		l := e.w.Layers[len(e.w.Layers)-1]
		return l.lo, l.hi
	}
	dropCache(t, path)
	e, err := Load(path, Options{Threads: 1, WillNeedLayers: WillNeedNone})
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := last(e)
	if f := residentFrac(t, e.w, lo, hi); f > 0.25 {
		// Another process may have read the file since the drop: that
		// would make this check meaningless rather than the code wrong.
		t.Errorf("WillNeedNone: %.0f%% of the last layer resident after load from a cold cache", 100*f)
	}
	e.Close()

	dropCache(t, path)
	e, err = Load(path, Options{Threads: 1, WillNeedLayers: WillNeedAll})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	lo, hi = last(e)
	var f float64
	for start := time.Now(); time.Since(start) < 20*time.Second; time.Sleep(10 * time.Millisecond) {
		if f = residentFrac(t, e.w, lo, hi); f >= 0.99 {
			break
		}
	}
	if f < 0.99 {
		t.Errorf("WillNeedAll: %s of the last layer resident 20 s after load", fmt.Sprintf("%.0f%%", 100*f))
	}
}
