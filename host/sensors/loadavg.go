package sensors

// Runnable is the machine's run queue from /proc/loadavg: its fourth field,
// "running/total", counts the tasks currently runnable (running or waiting
// for a CPU; the reader itself is one of them) and the tasks that exist. It
// is the instantaneous number that the load averages smooth.
type Runnable struct {
	Present bool
	Running int64 // runnable tasks, including the reader
	Total   int64 // scheduling entities that exist
	Load1   float64
}

// parseLoadavg reads "0.50 0.40 0.30 3/450 12345". Fields it cannot parse
// leave the reading absent.
func parseLoadavg(b []byte, r *Runnable) {
	*r = Runnable{}
	line, _ := cutLine(b)
	f1, rest := cutField(line)
	_, rest = cutField(rest) // load5
	_, rest = cutField(rest) // load15
	f4, _ := cutField(rest)
	l1, ok := parseDecimal(f1)
	if !ok {
		return
	}
	slash := -1
	for i, c := range f4 {
		if c == '/' {
			slash = i
			break
		}
	}
	if slash <= 0 {
		return
	}
	run, ok1 := parseInt(f4[:slash])
	tot, ok2 := parseInt(f4[slash+1:])
	if !ok1 || !ok2 || run < 0 || tot < run {
		return
	}
	*r = Runnable{Present: true, Running: run, Total: tot, Load1: l1}
}
