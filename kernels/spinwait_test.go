package kernels

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edgellm/edgellm/internal/cputime"
)

// TestBarrierSpinBounded: two pool threads confined to one CPU compute a
// chain of small nodes, so at every node's barrier one thread waits for a
// partner that cannot run until the waiter gives the core up. ggml's own
// barrier spins until the scheduler's tick preempts it (a millisecond or
// more per node); the bounded spin (spinwait.c) sleeps after
// DefaultSpinLimit. The bound checked is derived from that: per node at
// most the limit, one sleep and the two context switches it takes, with a
// generous allowance for the switches.
func TestBarrierSpinBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("times graph computations")
	}
	cpus := AllowedCPUs()
	if len(cpus) == 0 {
		t.Skip("no CPU affinity reading")
	}
	cpu := cpus[len(cpus)-1]
	runtime.LockOSThread()
	var orig unix.CPUSet
	if err := unix.SchedGetaffinity(0, &orig); err != nil {
		t.Skip(err)
	}
	defer func() {
		unix.SchedSetaffinity(0, &orig)
		runtime.UnlockOSThread()
	}()
	var one unix.CPUSet
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Skip(err)
	}
	defer SetSpinLimit(SetSpinLimit(DefaultSpinLimit))

	const links = 50 // Add + Scale per link: 100 nodes, 99 barriers
	ctx, err := NewGGMLContext(4*links+8, 4*links+8)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	x := mustTensor(t, ctx, GGMLTypeF32, 4096)
	y := x
	for range links {
		y = ctx.Scale(ctx.Add(y, x), 0.5)
	}
	y.SetOutput()
	g, err := ctx.NewGraph(4*links + 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Expand(y); err != nil {
		t.Fatal(err)
	}
	ga, err := NewGallocr()
	if err != nil {
		t.Fatal(err)
	}
	defer ga.Close()
	if err := ga.Alloc(g); err != nil {
		t.Fatal(err)
	}
	nodes := g.NNodes()
	backend := func(n int) *CPUBackend {
		tp, err := NewThreadpool(ThreadpoolParams{NThreads: n, CPUs: []int{cpu}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tp.Close() })
		be, err := NewCPUBackend(tp, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { be.Close() })
		return be
	}
	b1, b2 := backend(1), backend(2)
	// time is the best of reps computations, wall and this thread's CPU
	// (thread 0 of the pool is the caller).
	time1 := func(be *CPUBackend, reps int) (wall, cpu time.Duration) {
		for i := range reps {
			t0, c0 := time.Now(), cputime.Thread()
			if err := be.Compute(g); err != nil {
				t.Fatal(err)
			}
			w, c := time.Since(t0), cputime.Thread()-c0
			if i == 0 || w < wall {
				wall, cpu = w, c
			}
		}
		return wall, cpu
	}
	time1(b1, 2)
	time1(b2, 2) // warm up
	s0 := ReadSpinStats()
	var w1, c1, w2 time.Duration
	for round := range 3 {
		a, c := time1(b1, 5)
		b, _ := time1(b2, 5)
		if round == 0 || a < w1 {
			w1, c1 = a, c
		}
		if round == 0 || b < w2 {
			w2 = b
		}
	}
	s1 := ReadSpinStats()
	perNode := DefaultSpinLimit + spinSleep + 200*time.Microsecond
	bound := w1 + time.Duration(nodes)*perNode
	t.Logf("%d nodes on one CPU: 1 thread %v (thread CPU %v), 2 threads %v (bound %v); %d waits reached the limit, %d sleeps",
		nodes, w1, c1, w2, bound, s1.Bounded-s0.Bounded, s1.Sleeps-s0.Sleeps)
	if s1.Bounded == s0.Bounded {
		t.Fatal("no barrier wait reached the spin limit: ggml was compiled without kernels/spinwait.h (build through the Makefile, or see `make env`)")
	}
	// Another task on this CPU takes slices of its own that no wait can
	// shorten: the one-thread run shows it as CPU below its wall.
	if float64(c1) < 0.8*float64(w1) {
		t.Logf("another task shares CPU %d (one thread got %.0f%% of its wall): the time bound is not checked", cpu, 100*float64(c1)/float64(w1))
		return
	}
	if w2 > bound {
		t.Errorf("2 threads on one CPU: %v per graph of %d nodes, want ≤ %v (1 thread %v + %v per node)", w2, nodes, bound, w1, perNode)
	}
	// The control: ggml's own spin, once.
	SetSpinLimit(0)
	u, _ := time1(b2, 1)
	t.Logf("unbounded spin (ggml's): 2 threads on one CPU %v per graph (%.0f× the bounded)", u, float64(u)/float64(w2))
}
