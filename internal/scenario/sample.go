package scenario

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// statsEvent is one line of the child's --stats-json file (see
// cmd/edgellm/runstats.go).
type statsEvent struct {
	Event          string  `json:"event"`
	UnixUS         int64   `json:"unix_us"`
	I              int     `json:"i"`
	Tier           int     `json:"tier"`
	K              int     `json:"k"`
	Window         int     `json:"window"`
	Threads        int     `json:"threads"`
	NTiers         int     `json:"n_tiers"`
	PromptTokens   int     `json:"prompt_tokens"`
	Generated      int     `json:"generated"`
	DecodeTPS      float64 `json:"decode_tps"`
	PrefillMs      float64 `json:"prefill_ms"`
	PolicyCalls    int     `json:"policy_calls"`
	PolicyChanges  int     `json:"policy_changes"`
	TierSwaps      int     `json:"tier_swaps"`
	PolicyFailures int     `json:"policy_failures"`
	Error          string  `json:"error"`
}

// statsTail follows a stats file being written: each poll returns the
// complete lines added since the last one.
type statsTail struct {
	path string
	f    *os.File
	r    *bufio.Reader
	part []byte // an incomplete last line
}

func (t *statsTail) poll(fn func(statsEvent)) error {
	if t.f == nil {
		f, err := os.Open(t.path)
		if os.IsNotExist(err) {
			return nil // the child has not created it yet
		}
		if err != nil {
			return err
		}
		t.f, t.r = f, bufio.NewReader(f)
	}
	for {
		b, err := t.r.ReadSlice('\n')
		t.part = append(t.part, b...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF {
			return nil // keep the partial line for the next poll
		}
		if err != nil {
			return err
		}
		var ev statsEvent
		if jerr := json.Unmarshal(t.part, &ev); jerr != nil {
			t.part = t.part[:0]
			return fmt.Errorf("stats file %s: %v", t.path, jerr)
		}
		t.part = t.part[:0]
		fn(ev)
	}
}

func (t *statsTail) close() {
	if t.f != nil {
		t.f.Close()
	}
}

// smapsRollup reads Rss and Pss (KiB) of pid from /proc/PID/smaps_rollup.
func smapsRollup(pid int) (rssKB, pssKB int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "Rss":
			rssKB = n
		case "Pss":
			pssKB = n
		}
	}
	if rssKB == 0 {
		return 0, 0, fmt.Errorf("/proc/%d/smaps_rollup: no Rss", pid)
	}
	return rssKB, pssKB, nil
}
