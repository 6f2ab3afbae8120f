package main

import (
	"fmt"
	"time"
)

// ms formats a duration in milliseconds with enough precision for swaps and steps.
func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
