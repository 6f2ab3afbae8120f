package matvec

import "time"

var start = time.Now()

func nowNs() int64 { return int64(time.Since(start)) }
