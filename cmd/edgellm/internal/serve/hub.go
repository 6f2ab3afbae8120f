package serve

import "sync"

// event is one live update for the page's charts (GET /events).
type event struct {
	Kind     string    `json:"kind"` // "decision", "request"
	Decision *Decision `json:"decision,omitempty"`
	Request  *reqEvent `json:"request,omitempty"`
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
	c := make(chan event, 64)
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
