package serve

import (
	"embed"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

//go:embed page/index.html
var pageFS embed.FS

// page serves GET /: the prompt box and the live charts (page/index.html,
// no build step, embedded in the binary).
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	b, _ := pageFS.ReadFile("page/index.html")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
	w.Write(b)
}

// tick is the periodic sample GET /events sends for the charts.
type tick struct {
	Kind      string  `json:"kind"` // "tick"
	Time      int64   `json:"time_ms"`
	DecodeTPS float64 `json:"decode_tps"` // the running request's, else the last one's
	Tier      int32   `json:"tier"`
	SpecK     int32   `json:"spec_k"`
	Window    int32   `json:"window"`
	LayerBits []uint8 `json:"layer_bits,omitempty"`
	RSSMB     float64 `json:"rss_mb"`
	PSSMB     float64 `json:"pss_mb"`
	TempC     float64 `json:"temp_c"` // -1: no thermal zone readable
	Busy      bool    `json:"busy"`
}

// events streams GET /events as SSE: a tick at once and every 250 ms, and each policy
// decision and finished request as it happens.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	f, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	c := s.hub.subscribe()
	defer s.hub.unsubscribe(c)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	send := func(v any) bool {
		b, _ := json.Marshal(v)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		f.Flush()
		return true
	}
	if !send(s.tick()) { // the current state at once, then every 250 ms
		return
	}
	for {
		var v any
		select {
		case <-r.Context().Done():
			return
		case e := <-c:
			v = e
		case <-t.C:
			v = s.tick()
		}
		if !send(v) {
			return
		}
	}
}

func (s *Server) tick() tick {
	st := s.worker.snapshot()
	d := st.Current
	k := tick{Kind: "tick", Time: time.Now().UnixMilli(), DecodeTPS: st.LastDecodeTPS, Tier: d.Tier, SpecK: d.SpecK,
		Window: d.Window, TempC: readTempC(), Busy: st.Busy}
	if dec := decisionOf(0, d, s.worker.nLayer); len(dec.LayerBits) > 0 {
		k.LayerBits = dec.LayerBits
	}
	if rss, pss, ok := readSmapsRollup(); ok {
		k.RSSMB, k.PSSMB = float64(rss)/(1<<20), float64(pss)/(1<<20)
	}
	return k
}
