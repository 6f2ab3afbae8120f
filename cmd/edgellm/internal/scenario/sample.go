package scenario

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

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
