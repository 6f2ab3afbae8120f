package bench

import (
	"sync"
	"time"
)

// ReadBandwidth measures how fast `threads` goroutines can stream-read a
// buffer of `bytes` (summing 8-byte words, so the loads cannot be elided),
// returning bytes per second, best of `reps`. It is the denominator of the
// decode roofline: a memory-bound decode step reads every weight once, so
// tok/s ≤ bandwidth / bytes read per token.
func ReadBandwidth(bytes, threads, reps int) float64 {
	words := make([]uint64, bytes/8)
	for i := range words {
		words[i] = uint64(i)
	}
	best := 0.0
	var sink uint64
	var mu sync.Mutex
	for r := 0; r < reps; r++ {
		var wg sync.WaitGroup
		chunk := len(words) / threads
		start := time.Now()
		for t := 0; t < threads; t++ {
			part := words[t*chunk : (t+1)*chunk]
			wg.Add(1)
			go func() {
				defer wg.Done()
				var s0, s1, s2, s3 uint64
				for i := 0; i+3 < len(part); i += 4 {
					s0 += part[i]
					s1 += part[i+1]
					s2 += part[i+2]
					s3 += part[i+3]
				}
				mu.Lock()
				sink += s0 + s1 + s2 + s3
				mu.Unlock()
			}()
		}
		wg.Wait()
		if bw := float64(chunk*threads*8) / time.Since(start).Seconds(); bw > best {
			best = bw
		}
	}
	if sink == 42 { // keep the sums alive
		println()
	}
	return best
}
