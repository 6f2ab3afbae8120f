package serve

import (
	"embed"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/edgellm/edgellm/abi"
)

//go:embed page/index.html page/uplot.min.js page/uplot.min.css
var pageFS embed.FS

// page serves GET /: the prompt box and the live charts (page/index.html,
// no build step, embedded in the binary).
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	b, _ := pageFS.ReadFile("page/index.html")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'")
	w.Write(b)
}

// tick is the periodic sample GET /events sends for the charts.
type tick struct {
	Kind      string  `json:"kind"` // "tick"
	Time      int64   `json:"time_ms"`
	DecodeTPS float64 `json:"decode_tps"` // the last finished request's
	Tier      int32   `json:"tier"`
	Tiers     int32   `json:"tiers"` // tiers available (0: unknown)
	SpecK     int32   `json:"spec_k"`
	// AcceptRate is the speculation's acceptance rate the policy last saw
	// (-1: not reported).
	AcceptRate float64 `json:"accept_rate"`
	Window     int32   `json:"window"`
	NCtx       int     `json:"n_ctx"`
	KVType     string  `json:"kv_type"`
	LayerBits  Bits    `json:"layer_bits,omitempty"`
	NLayer     int     `json:"n_layer"`
	RSSMB      float64 `json:"rss_mb"`
	PSSMB      float64 `json:"pss_mb"`
	// CgroupUsageMB and CgroupLimitMB are the memory cgroup's (-1: none
	// readable or no limit).
	CgroupUsageMB float64 `json:"cgroup_usage_mb"`
	CgroupLimitMB float64 `json:"cgroup_limit_mb"`
	// TempC is the temperature the policy sees (its sensors: live or a
	// SIMULATED trace), else the first thermal zone's; -1: none.
	TempC float64 `json:"temp_c"`
	// Thermal is the thermal status the policy sees (0 none .. 6
	// shutdown: throttling), -1 without a policy.
	Thermal    int    `json:"thermal"`
	TempSource string `json:"temp_source"`
	Busy       bool   `json:"busy"`
	Policy     string `json:"policy"`
}

// events streams GET /events as SSE: a tick at once and every 250 ms,
// each policy decision and finished request as it happens, and each
// generated token's decode rate.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	rc := http.NewResponseController(w)
	c := s.hub.subscribe()
	defer s.hub.unsubscribe(c)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	send := func(v any) bool {
		b, _ := json.Marshal(v)
		rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		return rc.Flush() == nil
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
		Window: d.Window, NCtx: s.nCtx, KVType: d.KVType.String(), NLayer: s.worker.nLayer, Busy: st.Busy, Policy: s.cfg.PolicyDesc,
		AcceptRate: -1, Thermal: -1, CgroupUsageMB: -1, CgroupLimitMB: -1, TempC: -1, TempSource: "none"}
	if d.KVType == abi.KVUnknown {
		k.KVType = s.cfg.KVType
	}
	if dec := decisionOf(0, d, s.worker.nLayer); len(dec.LayerBits) > 0 {
		k.LayerBits = dec.LayerBits
	}
	if rss, pss, ok := readSmapsRollup(); ok {
		k.RSSMB, k.PSSMB = float64(rss)/(1<<20), float64(pss)/(1<<20)
	}
	if u, l, ok := readCgroupMemory(); ok {
		k.CgroupUsageMB, k.CgroupLimitMB = float64(u)/(1<<20), float64(l)/(1<<20)
	}
	if st.HasSensors {
		sn := st.Sensors
		k.Tiers, k.Thermal = sn.TiersAvailable, int(sn.ThermalStatus)
		if sn.Present&abi.PresentSpecAccept != 0 || sn.AcceptRate > 0 {
			k.AcceptRate = float64(sn.AcceptRate)
		}
		k.TempC, k.TempSource = float64(sn.TempC), s.cfg.SensorSource
		if k.TempSource == "" {
			k.TempSource = "policy sensors"
		}
		if sn.CgroupLimitMB > 0 {
			k.CgroupLimitMB, k.CgroupUsageMB = float64(sn.CgroupLimitMB), float64(sn.CgroupUsageMB)
		}
	} else if t := readTempC(); t >= 0 {
		k.TempC, k.TempSource = t, "live (thermal_zone0)"
	}
	return k
}

// asset serves the page's vendored uPlot files (page/uplot.*, embedded).
func (s *Server) asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	b, err := pageFS.ReadFile("page/" + name)
	if err != nil || (name != "uplot.min.js" && name != "uplot.min.css") {
		writeError(w, &APIError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "not_found", Message: "no such asset"})
		return
	}
	ct := "text/css; charset=utf-8"
	if strings.HasSuffix(name, ".js") {
		ct = "text/javascript; charset=utf-8"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "max-age=3600")
	w.Write(b)
}
