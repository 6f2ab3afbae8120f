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
		Options{NPrompt: 16, NGen: 8, Repeats: 1, Threads: 1, NoRepack: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.A.DecodeTPS <= 0 || r.B.DecodeTPS <= 0 || r.DecodeRatio <= 0 || r.PrefillRatio <= 0 {
		t.Fatalf("%+v %+v %+v", r, r.A, r.B)
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
					Options{NPrompt: 128, NGen: 128, Repeats: 3, Threads: threads, KVType: host.KVF16, Attention: a, NoRepack: true})
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
