// Package pressure puts a process under real resource pressure for scenario
// runs: a memory cgroup with a limit (v2, or v1 on older and hybrid
// systems), a CPU quota lowered at chosen times, and memory hogs — processes
// that take a given amount of memory, like a background app.
//
// # Use
//
//	cg, err := pressure.NewCgroup("scenario")
//	if errors.Is(err, pressure.ErrUnavailable) { /* trace-only, label it simulated */ }
//	defer cg.Close()                           // kills what is left, removes the directories
//	cg.SetMemoryLimit(512 << 20)
//	cg.Start(engineCmd)                        // or cg.AddProcess(pid)
//	hog, _ := pressure.StartHog(ctx, 300, pressure.HogOptions{Cgroup: cg})
//	cg.SetCPUQuota(0.5)                        // throttle to half a core
//	res := hog.Stop()                          // res.Killed: SIGKILLed (OOM?)
//	ev, _ := cg.Events()                       // ev.OOMKill counts OOM kills
//
// OOM kills are reported, never hidden: a hog or engine killed by the OOM
// killer ends with SIGKILL (HogResult.Killed) and the cgroup's oom_kill
// counter rises.
//
// # Cleanup
//
// Close kills the cgroup's processes and removes its directories; call it
// with defer and run under a context cancelled on SIGINT/SIGTERM (the CLI's
// cmdEnv.Ctx) so Ctrl-C unwinds through it. Hogs die with their parent
// (PR_SET_PDEATHSIG and a closed stdin). A runner killed with SIGKILL
// cannot clean up; the next NewCgroup removes cgroups whose owner pid is
// gone.
//
// # The hog process
//
// A hog is the running executable re-executed with EDGELLM_PRESSURE_HOG_MB
// set; this package's init then runs the hog and exits instead of the
// program. Any binary that imports this package can therefore serve as its
// own hog with no help from main. See RATIONALE.md.
//
// Not safe for concurrent use on one Cgroup; different Cgroups are
// independent. Linux only.
package pressure
