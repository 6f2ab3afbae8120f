package bench

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// TestCompareEngines: the native engine against llama.cpp in one process
// (what internal/native's BenchCompare did) runs and yields positive rates.
func TestCompareEngines(t *testing.T) {
	r, err := Compare(context.Background(), sharedtest.Stories260K(t), "native", "llamacpp",
		Options{NPrompt: 16, NGen: 8, Repeats: 1, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.A.DecodeTPS <= 0 || r.B.DecodeTPS <= 0 || r.DecodeRatio <= 0 || r.PrefillRatio <= 0 {
		t.Fatalf("%+v %+v %+v", r, r.A, r.B)
	}
}

// The speed goals of the native engine against llama.cpp (issue #3 point
// 7), as ratios native/llama.cpp of the rates over the generating thread's
// CPU time. TestBenchCompare asserts them as stated, with no margin taken
// off the bound; the noise of a shared machine is handled by measuring
// (each side the median of benchReps alternating repetitions, and up to
// benchAttempts attempts, the first that meets both goals passing).
const (
	decodeGoal    = 0.95
	prefillGoal   = 0.90
	benchReps     = 5
	benchAttempts = 5
)

// TestBenchCompare asserts the speed goals on stories260K: one thread,
// F16 KV, the default attention (flash on the CPU in both engines), 128
// prompt tokens and 128 decode steps.
func TestBenchCompare(t *testing.T) {
	for attempt := 1; ; attempt++ {
		r, err := Compare(context.Background(), sharedtest.Stories260K(t), "native", "llamacpp",
			Options{NPrompt: 128, NGen: 128, Repeats: benchReps, Threads: 1, KVType: host.KVF16})
		if err != nil {
			t.Fatal(err)
		}
		if r.A.DecodeCPUTPS <= 0 || r.B.DecodeCPUTPS <= 0 || r.A.PrefillCPUTPS <= 0 || r.B.PrefillCPUTPS <= 0 {
			t.Fatalf("%+v %+v", r.A, r.B)
		}
		t.Logf("attempt %d: native/llama.cpp over thread CPU time: decode %.3f (goal ≥ %.2f), prefill %.3f (goal ≥ %.2f); over wall time %.3f / %.3f",
			attempt, r.DecodeCPURatio, decodeGoal, r.PrefillCPURatio, prefillGoal, r.DecodeRatio, r.PrefillRatio)
		if r.DecodeCPURatio >= decodeGoal && r.PrefillCPURatio >= prefillGoal {
			return
		}
		if attempt == benchAttempts {
			t.Fatalf("native/llama.cpp thread-CPU ratios decode %.3f, prefill %.3f; goals %.2f and %.2f (median of %d repetitions, %d attempts)",
				r.DecodeCPURatio, r.PrefillCPURatio, decodeGoal, prefillGoal, benchReps, benchAttempts)
		}
	}
}

// BenchmarkCompareStories260K runs both engines in one process and reports
// native/llama.cpp ratios (goal: decode ≥ 0.95, prefill ≥ 0.90);
// EDGELLM_NATIVE_BIG selects another model (e.g. a synthetic llama3.2-1b
// from `edgellm synth`).
func BenchmarkCompareStories260K(b *testing.B) {
	path, threads := os.Getenv("EDGELLM_NATIVE_BIG"), 0
	if path == "" {
		path, threads = sharedtest.Stories260K(b), 1
	}
	for _, a := range []host.Attention{host.AttentionClassic, host.AttentionFlash} {
		b.Run(fmt.Sprint(a), func(b *testing.B) {
			for b.Loop() {
				r, err := Compare(context.Background(), path, "native", "llamacpp",
					Options{NPrompt: 128, NGen: 128, Repeats: 3, Threads: threads, KVType: host.KVF16, Attention: a})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(r.DecodeRatio, "decode-ratio")
				b.ReportMetric(r.PrefillRatio, "prefill-ratio")
				b.ReportMetric(r.DecodeCPURatio, "decode-cpu-ratio")
				b.ReportMetric(r.PrefillCPURatio, "prefill-cpu-ratio")
				b.ReportMetric(r.A.DecodeTPS, "native-tok/s")
				b.ReportMetric(r.B.DecodeTPS, "llamacpp-tok/s")
			}
		})
	}
}
