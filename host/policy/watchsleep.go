package policy

import "time"

// watchSleeper is how the deadline watchdog sleeps. On Linux it is ppoll
// on an eventfd (watchsleep_linux.go), a blocking system call, so the Go
// runtime keeps no timer for it: a runtime timer starts a goroutine and
// wakes spinning threads at every expiry. Elsewhere, or without an
// eventfd, it is chanSleeper.
type watchSleeper interface {
	// sleep returns after d (d < 0: never) or once woken.
	sleep(d time.Duration)
	wake()
	close()
}

// chanSleeper is the portable watchSleeper: a channel and a runtime timer.
type chanSleeper struct {
	ch    chan struct{}
	timer *time.Timer
}

func newChanSleeper() *chanSleeper {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &chanSleeper{ch: make(chan struct{}, 1), timer: t}
}

func (c *chanSleeper) sleep(d time.Duration) {
	if d < 0 {
		<-c.ch
		return
	}
	c.timer.Reset(d)
	select {
	case <-c.ch:
	case <-c.timer.C:
	}
	c.timer.Stop()
}

func (c *chanSleeper) wake() {
	select {
	case c.ch <- struct{}{}:
	default: // a wake is already pending
	}
}

func (c *chanSleeper) close() { c.timer.Stop() }
