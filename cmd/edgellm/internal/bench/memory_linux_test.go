//go:build linux

package bench

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/edgellm/edgellm/internal/cputime"
)

// TestMemSamplerSeesPeak maps and touches 64 MiB between Start and Stop and
// unmaps it before Stop: only a sampler that really samples in the
// background can report that peak (the final reading no longer sees it).
func TestMemSamplerSeesPeak(t *testing.T) {
	m, err := NewMemSampler(5 * time.Millisecond)
	if errors.Is(err, ErrNoSmaps) {
		t.Fatal(err) // Linux CI always has smaps_rollup
	}
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rss0, pss0 := m.Now()
	if rss0 <= 0 || pss0 <= 0 || pss0 > rss0 {
		t.Fatalf("baseline RSS %d, PSS %d", rss0, pss0)
	}
	const size = 64 << 20
	m.Start()
	buf, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < size; i += 4096 {
		buf[i] = 1
	}
	// Wait for the background goroutine to read both files after the
	// touch (two statm ticks and an smaps walk), however long a loaded
	// machine takes to schedule it.
	touched := m.Peek()
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		p := m.Peek()
		if p.Samples >= touched.Samples+2 && p.SmapsSamples >= touched.SmapsSamples+1 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the sampler took %d statm and %d smaps readings in 30 s at a 5 ms tick",
				p.Samples-touched.Samples, p.SmapsSamples-touched.SmapsSamples)
		}
	}
	if err := syscall.Munmap(buf); err != nil {
		t.Fatal(err)
	}
	if rss, _ := m.Now(); rss > rss0+size/2 {
		t.Fatalf("RSS %d MiB after munmap: the test cannot tell background samples from the final one", rss>>20)
	}
	peak := m.Stop()
	if peak.RSS < rss0+size*9/10 || peak.PSS < pss0+size*9/10 {
		t.Fatalf("peak RSS %d MiB, PSS %d MiB; baseline %d / %d MiB + 64 MiB touched",
			peak.RSS>>20, peak.PSS>>20, rss0>>20, pss0>>20)
	}
	if peak.PSS > peak.RSS {
		t.Fatalf("peak PSS %d above peak RSS %d", peak.PSS, peak.RSS)
	}
	// A restart resets the peak: the 64 MiB are gone, so a reset sampler
	// cannot report them.
	m.Start()
	again := m.Stop()
	if again.RSS > rss0+size/2 {
		t.Fatalf("Start did not reset the peak: %+v after %+v", again, peak)
	}
}

// TestMemSamplerCPU: the sampler counts the CPU its background readings
// cost (bench leaves it out of "cores busy"): more than nothing after its
// readings, never more than the whole process used meanwhile, and never
// decreasing (a reading that resumed on another thread would subtract one
// thread's clock from another's).
func TestMemSamplerCPU(t *testing.T) {
	m, err := NewMemSampler(time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.CPU() != 0 {
		t.Fatalf("CPU %v before Start", m.CPU())
	}
	p0 := cputime.Process()
	m.Start()
	last := time.Duration(0)
	for end := time.Now().Add(30 * time.Second); m.Peek().Samples < 50; time.Sleep(time.Millisecond) {
		c := m.CPU()
		if c < last {
			t.Fatalf("sampler CPU went from %v to %v", last, c)
		}
		last = c
		if time.Now().After(end) {
			t.Fatalf("%d readings in 30 s at a 1 ms tick", m.Peek().Samples)
		}
	}
	m.Stop()
	cpu, proc := m.CPU(), cputime.Process()-p0
	t.Logf("%d readings (%d smaps walks): sampler CPU %v, process CPU %v", m.Peek().Samples, m.Peek().SmapsSamples, cpu, proc)
	if cpu <= 0 || cpu > proc {
		t.Fatalf("sampler CPU %v, process CPU %v over the same time: want 0 < sampler ≤ process", cpu, proc)
	}
}
