package native

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/edgellm/edgellm/host/engine"
)

// procKB reads a "Key:   N kB" line from a /proc file.
func procKB(t testing.TB, file, key string) int64 {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) >= 2 && string(f[0]) == key+":" {
			n, _ := strconv.ParseInt(string(f[1]), 10, 64)
			return n
		}
	}
	t.Fatalf("%s: no %s", file, key)
	return 0
}

// TestSoakLoadRSS (EDGELLM_SOAK=1, model in EDGELLM_NATIVE_BIG: make soak
// synthesizes a llama2-7b Q4_0 for it): load time and RSS at the first
// generated token against the file size. Requirement: RSS ≤ 1.1 × file.
func TestSoakLoadRSS(t *testing.T) {
	path := os.Getenv("EDGELLM_NATIVE_BIG")
	if os.Getenv("EDGELLM_SOAK") != "1" {
		t.Skip("set EDGELLM_SOAK=1 and EDGELLM_NATIVE_BIG=model.gguf (make soak does both)")
	}
	if path == "" {
		t.Fatal("EDGELLM_SOAK=1 without EDGELLM_NATIVE_BIG: make soak synthesizes the model it needs")
	}
	rss0 := procKB(t, "/proc/self/status", "VmRSS")
	start := time.Now()
	e, err := Load(path, Options{NoVocab: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	load := time.Since(start)
	rssLoad := procKB(t, "/proc/self/status", "VmRSS")
	s, err := e.newSession(engine.SessionConfig{NCtx: 256, NBatch: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	logits := make([]float32, e.Config().NVocab)
	start = time.Now()
	if err := s.Decode([]int32{1, 2, 3, 4}, engine.LogitsLast); err != nil {
		t.Fatal(err)
	}
	s.Logits(3, logits)
	first := time.Since(start)
	rss := procKB(t, "/proc/self/status", "VmRSS")
	pss := procKB(t, "/proc/self/smaps_rollup", "Pss")
	file := e.Report().FileBytes
	ratio := float64((rss-rss0)*1024) / float64(file)
	t.Logf("file %.1f MiB; load %v (RSS +%.1f MiB); first token after %v; RSS at first token +%.1f MiB (%.3f × file), PSS %.1f MiB; activations %.1f MiB, KV %.1f MiB",
		float64(file)/(1<<20), load, float64(rssLoad-rss0)/1024, first, float64(rss-rss0)/1024, ratio, float64(pss)/1024,
		float64(s.Stats().ActBufBytes)/(1<<20), float64(s.Stats().KVBytes)/(1<<20))
	if ratio > 1.1 {
		t.Errorf("RSS at first token is %.3f × the file size (max 1.1)", ratio)
	}
}
