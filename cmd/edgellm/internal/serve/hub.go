package serve

import "sync"

// event is one live update for the page's charts (GET /events).
type event struct {
	Kind     string    `json:"kind"` // "decision", "request", "token"
	Decision *Decision `json:"decision,omitempty"`
	Request  *reqEvent `json:"request,omitempty"`
	Token    *tokEvent `json:"token,omitempty"`
}

// tokEvent is one generated token's decode rate, as it streams: 1/(time
// since the request's previous token), and its moving average over ~4.
type tokEvent struct {
	Time        int64   `json:"time_ms"`
	TPS         float64 `json:"tps"`
	TPSSmoothed float64 `json:"tps_smoothed"`
}

// reqEvent summarises a finished request.
type reqEvent struct {
	DecodeTPS float64 `json:"decode_tps"`
	TTFTMs    float64 `json:"ttft_ms"`
	Tokens    int     `json:"tokens"`
	Reused    int     `json:"reused"`
}

// hub fans events out to subscribers; a slow subscriber misses events
// rather than slowing the decode loop.
type hub struct {
	mu   sync.Mutex
	subs map[chan event]struct{}
}

func newHub() *hub { return &hub{subs: map[chan event]struct{}{}} }

func (h *hub) subscribe() chan event {
	c := make(chan event, 256)
	h.mu.Lock()
	h.subs[c] = struct{}{}
	h.mu.Unlock()
	return c
}

func (h *hub) unsubscribe(c chan event) {
	h.mu.Lock()
	delete(h.subs, c)
	h.mu.Unlock()
}

func (h *hub) publish(e event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.subs {
		select {
		case c <- e:
		default:
		}
	}
}
