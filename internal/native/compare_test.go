package native

import (
	"fmt"
	"os"
	"testing"

	"github.com/edgellm/edgellm/host/engine"
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

// TestBenchCompare checks the comparison runs and yields positive rates.
func TestBenchCompare(t *testing.T) {
	r, err := BenchCompare(sharedtest.Stories260K(t), BenchOptions{Prefill: 16, Decode: 8, Threads: 1, Reps: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Native.DecodeTokS <= 0 || r.LlamaCpp.DecodeTokS <= 0 || r.DecodeRatio <= 0 || r.PrefillRatio <= 0 {
		t.Fatalf("%+v", r)
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
