package serve

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/edgellm/edgellm/abi"
)

// metrics writes GET /metrics in Prometheus's text format.
func (s *Server) metrics(w http.ResponseWriter, _ *http.Request) {
	st := s.worker.snapshot()
	var b bytes.Buffer
	g := func(name, help, typ string, v float64, labels string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n%s%s %s\n", name, help, name, typ, name, labels,
			strconv.FormatFloat(v, 'g', -1, 64))
	}
	g("edgellm_decode_tokens_per_second", "Steady-state decode throughput of the last request.", "gauge", st.LastDecodeTPS, "")
	g("edgellm_prefill_tokens_per_second", "Prefill throughput of the last request.", "gauge", st.LastPrefillTPS, "")
	g("edgellm_time_to_first_token_seconds", "Prefill plus first sample of the last request.", "gauge", st.LastTTFT.Seconds(), "")
	g("edgellm_requests_total", "Requests the engine ran.", "counter", float64(st.Requests), "")
	g("edgellm_requests_cancelled_total", "Requests whose client left or whose timeout ran out.", "counter", float64(st.Cancelled), "")
	g("edgellm_requests_failed_total", "Requests that failed in the engine.", "counter", float64(st.Failed), "")
	g("edgellm_requests_rejected_total", "Requests refused with 429 (queue full).", "counter", float64(s.rejected.Load()), "")
	g("edgellm_queue_length", "Requests waiting for the engine.", "gauge", float64(s.worker.queue.len()), "")
	g("edgellm_prompt_tokens_total", "Prompt tokens of all requests.", "counter", float64(st.PromptTokens), "")
	g("edgellm_prompt_tokens_reuse_lost_total", "Prompt tokens shared with the previous request but prefilled again: the KV window had evicted positions they need.", "counter", float64(st.ReuseLostTokens), "")
	g("edgellm_streams_cut_off_total", "Streaming clients cut off for not reading fast enough (--stream-buffer, --write-timeout).", "counter", float64(st.SlowClients), "")
	g("edgellm_prompt_tokens_reused_total", "Prompt tokens whose KV was kept from the previous request (prefill saved).", "counter", float64(st.ReusedTokens), "")
	g("edgellm_generated_tokens_total", "Generated tokens.", "counter", float64(st.GeneratedTokens), "")
	d := st.Current
	g("edgellm_tier", "Quantization tier in force (0 = highest precision).", "gauge", float64(d.Tier), "")
	g("edgellm_spec_k", "Speculation depth K in force (0 = off).", "gauge", float64(d.SpecK), "")
	g("edgellm_kv_window_tokens", "KV window in force (0 = full context).", "gauge", float64(d.Window), "")
	kv := d.KVType.String()
	if d.KVType == abi.KVUnknown {
		kv = s.cfg.KVType
	}
	g("edgellm_kv_type_info", "KV cache type in force.", "gauge", 1, fmt.Sprintf("{kv_type=%q}", kv))
	if st.HasSensors && st.Sensors.Has(abi.PresentEvict) {
		mode := "drop"
		if st.Sensors.KVEvict == abi.EvictMerge {
			mode = "merge"
		}
		g("edgellm_kv_evict_info", "What the KV window does with evicted positions (the session's mode, as the policy last saw it).", "gauge", 1, fmt.Sprintf("{mode=%q}", mode))
	}
	g("edgellm_policy_calls_total", "Policy calls.", "counter", float64(st.PolicyCalls), "")
	g("edgellm_policy_failures_total", "Policy calls answered by the fallback.", "counter", float64(st.PolicyFails), "")
	g("edgellm_policy_changes_total", "Policy decisions that changed what the engine does.", "counter", float64(st.Change), "")
	g("edgellm_policy_revision", "Revision of the policy in service (--policy-inbox reloads raise it; 0 = no policy).", "gauge", float64(st.Revision), "")
	if rss, pss, ok := readSmapsRollup(); ok {
		g("edgellm_rss_bytes", "Resident set size (/proc/self/smaps_rollup Rss).", "gauge", float64(rss), "")
		g("edgellm_pss_bytes", "Proportional set size (/proc/self/smaps_rollup Pss).", "gauge", float64(pss), "")
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write(b.Bytes())
}

// readSmapsRollup returns the process's Rss and Pss in bytes.
func readSmapsRollup() (rss, pss int64, ok bool) {
	f, err := os.Open("/proc/self/smaps_rollup")
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var key string
		var kb int64
		if n, _ := fmt.Sscanf(sc.Text(), "%s %d kB", &key, &kb); n != 2 {
			continue
		}
		switch key {
		case "Rss:":
			rss = kb << 10
		case "Pss:":
			pss = kb << 10
		}
	}
	return rss, pss, rss > 0
}

// readTempC is the first thermal zone's temperature in °C, -1 if none.
func readTempC() float64 {
	b, err := os.ReadFile("/sys/class/thermal/thermal_zone0/temp")
	if err != nil {
		return -1
	}
	var milli int64
	if _, err := fmt.Sscan(string(b), &milli); err != nil {
		return -1
	}
	return float64(milli) / 1000
}

// readCgroupMemory is the process's cgroup v2 memory.current and
// memory.max in bytes; ok false without a readable limit ("max").
func readCgroupMemory() (usage, limit int64, ok bool) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, 0, false
	}
	var path string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if p, found := strings.CutPrefix(line, "0::"); found {
			path = p
		}
	}
	if path == "" {
		return 0, 0, false
	}
	dir := "/sys/fs/cgroup" + path
	lb, err1 := os.ReadFile(dir + "/memory.max")
	ub, err2 := os.ReadFile(dir + "/memory.current")
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	limit, err1 = strconv.ParseInt(strings.TrimSpace(string(lb)), 10, 64)
	usage, err2 = strconv.ParseInt(strings.TrimSpace(string(ub)), 10, 64)
	return usage, limit, err1 == nil && err2 == nil
}
