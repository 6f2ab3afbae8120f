package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"text/tabwriter"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// bench --warm-start: time to first token and peak RSS of a whole `edgellm
// run` process from a cold page cache, per --willneed-layers value (how many
// leading layers the native engine reads ahead at load). Before each run the
// model file's pages are dropped from the page cache (POSIX_FADV_DONTNEED;
// nothing else may map the file meanwhile) and the drop is checked with
// mincore. The values run in turn, repeat by repeat, so a drift of the
// machine's speed falls on all of them.

var warmValues = []string{"none", "2", "3", "all"}

type warmRun struct {
	ttft    time.Duration
	peakRSS int64 // bytes
	cold    float64
}

func runWarmStart(c *cmdEnv, path, label string, o benchOptions) error {
	if o.Repeats < 1 {
		return usagef("-r %d: want ≥ 1", o.Repeats)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	threads := o.Threads
	res := map[string][]warmRun{}
	for r := range o.Repeats {
		for _, v := range warmValues {
			cold, err := dropPageCache(path)
			if err != nil {
				return err
			}
			args := []string{"run", "-m", path, "--engine", "native", "-n", "1", "--temp", "0", "--willneed-layers", v}
			if threads > 0 {
				args = append(args, "--threads", fmt.Sprint(threads))
			}
			w, err := timeFirstToken(exe, args)
			if err != nil {
				return fmt.Errorf("--willneed-layers %s, repeat %d: %w", v, r+1, err)
			}
			w.cold = cold
			res[v] = append(res[v], w)
		}
	}
	c.Logf("warm start: %s, native engine, a whole `edgellm run -n 1` process from a cold page cache (model pages dropped before each run), %d repeats, medians", label, o.Repeats)
	tw := tabwriter.NewWriter(c.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "willneed-layers\tfirst token ms\tmin\tmax\tpeak RSS MiB\tfile cold before run\t")
	for _, v := range warmValues {
		rs := res[v]
		ts := make([]time.Duration, len(rs))
		rss := make([]int64, len(rs))
		coldMin := 1.0
		for i, w := range rs {
			ts[i], rss[i], coldMin = w.ttft, w.peakRSS, min(coldMin, w.cold)
		}
		slices.Sort(ts)
		slices.Sort(rss)
		ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.1f\t%.0f%%\t\n", v, ms(ts[len(ts)/2]), ms(ts[0]), ms(ts[len(ts)-1]),
			float64(rss[len(rss)/2])/(1<<20), 100*coldMin)
	}
	return tw.Flush()
}

// timeFirstToken starts exe and returns the time from its start to the
// first byte on its stdout (the first token: no prompt is echoed) and its
// peak RSS.
func timeFirstToken(exe string, args []string) (warmRun, error) {
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), scenarioChildEnv...) // a test binary acts as edgellm
	out, err := cmd.StdoutPipe()
	if err != nil {
		return warmRun{}, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return warmRun{}, err
	}
	var w warmRun
	buf := make([]byte, 1)
	if n, _ := out.Read(buf); n == 1 {
		w.ttft = time.Since(start)
	}
	io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return w, err
	}
	if w.ttft == 0 {
		return w, fmt.Errorf("no token on stdout")
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		w.peakRSS = ru.Maxrss << 10
	}
	return w, nil
}

// dropPageCache evicts path's pages from the page cache and returns the
// fraction of its pages no longer resident (mincore over a fresh mapping).
func dropPageCache(path string) (float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fd := int(f.Fd())
	if err := unix.Fdatasync(fd); err != nil && err != unix.EINVAL {
		return 0, fmt.Errorf("fdatasync %s: %w", path, err)
	}
	if err := unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED); err != nil {
		return 0, fmt.Errorf("fadvise DONTNEED %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return 0, err
	}
	m, err := unix.Mmap(fd, 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, err
	}
	defer unix.Munmap(m)
	ps := os.Getpagesize()
	vec := make([]byte, (len(m)+ps-1)/ps)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return 0, fmt.Errorf("mincore %s: %w", path, e)
	}
	cold := 0
	for _, b := range vec {
		if b&1 == 0 {
			cold++
		}
	}
	return float64(cold) / float64(len(vec)), nil
}
