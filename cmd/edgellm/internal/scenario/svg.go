package scenario

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// chartKinds are the charts drawn per policy.
var chartKinds = []string{"tps", "tier", "memory", "kl"}

// tpsWindow is the number of tokens the plotted tok/s is averaged over.
const tpsWindow = 8

// scales are shared by every policy's charts so they compare by eye.
type scales struct {
	xMax   float64 // ms
	tpsMax float64
	memMax float64
	klMax  float64
	nTiers int
}

func newScales(r *Report) scales {
	sc := scales{xMax: 1, tpsMax: 1, memMax: 1, klMax: 0.001, nTiers: max(1, len(r.Tiers))}
	if r.Memory != nil {
		sc.memMax = float64(r.Memory.LimitMB)
	}
	for _, p := range r.Policies {
		for _, t := range p.Timeline {
			sc.xMax = max(sc.xMax, t.TMs)
			sc.klMax = max(sc.klMax, t.KL)
		}
		for _, v := range tpsSeries(p.Timeline) {
			sc.tpsMax = max(sc.tpsMax, v[1])
		}
		for _, m := range p.Samples {
			sc.xMax = max(sc.xMax, m.TMs)
			sc.memMax = max(sc.memMax, m.RSSMB, m.PSSMB, m.CgroupMB)
		}
	}
	sc.tpsMax = niceCeil(sc.tpsMax * 1.05)
	sc.memMax = niceCeil(sc.memMax * 1.05)
	sc.klMax = niceCeil(sc.klMax * 1.05)
	sc.xMax = niceCeil(sc.xMax)
	return sc
}

// tpsSeries is (t ms, tok/s averaged over the last tpsWindow tokens).
func tpsSeries(tl []TokenPoint) [][2]float64 {
	var out [][2]float64
	for j := tpsWindow; j < len(tl); j++ {
		dt := tl[j].TMs - tl[j-tpsWindow].TMs
		if dt > 0 {
			out = append(out, [2]float64{tl[j].TMs, tpsWindow / (dt / 1000)})
		}
	}
	return out
}

// niceCeil rounds v up to a round number (1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8
// × a power of ten).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

const (
	svgW, svgH   = 420, 200
	padL, padR   = 48, 10
	padT, padB   = 22, 30
	plotW, plotH = svgW - padL - padR, svgH - padT - padB
)

type plot struct {
	b          strings.Builder
	xMax, yMax float64
}

func (p *plot) x(v float64) float64 { return padL + v/p.xMax*plotW }
func (p *plot) y(v float64) float64 { return padT + plotH - v/p.yMax*plotH }

func (p *plot) line(pts [][2]float64, color string, step bool) {
	if len(pts) == 0 {
		return
	}
	var d strings.Builder
	for i, pt := range pts {
		switch {
		case i == 0:
			fmt.Fprintf(&d, "M%.1f,%.1f", p.x(pt[0]), p.y(pt[1]))
		case step:
			fmt.Fprintf(&d, " H%.1f V%.1f", p.x(pt[0]), p.y(pt[1]))
		default:
			fmt.Fprintf(&d, " L%.1f,%.1f", p.x(pt[0]), p.y(pt[1]))
		}
	}
	fmt.Fprintf(&p.b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.5"/>`+"\n", d.String(), color)
}

func chartSVG(r *Report, pr *PolicyResult, kind string, sc scales) string {
	p := &plot{xMax: sc.xMax}
	var title string
	var legend [][2]string // label, color
	var yLabels []string   // for the tier chart
	switch kind {
	case "tps":
		p.yMax = sc.tpsMax
		title = fmt.Sprintf("%s: decode tok/s (mean of %d tokens)", pr.Name, tpsWindow)
	case "tier":
		p.yMax = float64(sc.nTiers - 1)
		if p.yMax == 0 {
			p.yMax = 1
		}
		title = pr.Name + ": tier in use (top = tier 0, highest precision)"
		if perLayer(pr) {
			title = pr.Name + ": per-layer bits/weight, placed between the tiers' (top = tier 0)"
		}
		for i, t := range r.Tiers {
			yLabels = append(yLabels, fmt.Sprintf("%d %s", i, t.Type))
		}
	case "memory":
		p.yMax = sc.memMax
		title = pr.Name + ": memory MiB"
	case "kl":
		p.yMax = sc.klMax
		title = pr.Name + ": KL(tier 0 ‖ run) per token, nats"
		if pr.Quality == nil {
			title += " (not measured)"
		}
	}
	fmt.Fprintf(&p.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="10">`+"\n", svgW, svgH, svgW, svgH)
	fmt.Fprintf(&p.b, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="14" font-size="12">%s</text>`+"\n", padL, html.EscapeString(title))
	if r.Simulated {
		fmt.Fprintf(&p.b, `<text x="%d" y="14" font-size="11" fill="#b00020" text-anchor="end">SIMULATED</text>`+"\n", svgW-padR)
	}
	// Axes and grid.
	fmt.Fprintf(&p.b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", padL, padT, plotW, plotH)
	for i := 0; i <= 4; i++ {
		xv := sc.xMax * float64(i) / 4
		fmt.Fprintf(&p.b, `<text x="%.1f" y="%d" text-anchor="middle">%.1fs</text>`+"\n", p.x(xv), svgH-padB+12, xv/1000)
	}
	fmt.Fprintf(&p.b, `<text x="%d" y="%d" text-anchor="end" fill="#666">time since engine start</text>`+"\n", svgW-padR, svgH-4)
	if kind == "tier" {
		for i, l := range yLabels {
			yv := p.yMax - float64(i) // tier 0 on top
			if len(yLabels) == 1 {
				yv = p.yMax
			}
			fmt.Fprintf(&p.b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", padL-3, p.y(yv)+3, html.EscapeString(l))
		}
	} else {
		for i := 0; i <= 4; i++ {
			yv := p.yMax * float64(i) / 4
			fmt.Fprintf(&p.b, `<text x="%d" y="%.1f" text-anchor="end">%g</text><line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eee"/>`+"\n",
				padL-3, p.y(yv)+3, yv, padL, padL+plotW, p.y(yv), p.y(yv))
		}
	}
	// Pressure events: hogs, thermal steps, the OOM kill.
	for _, ev := range pr.Events {
		color := ""
		switch {
		case strings.HasPrefix(ev.What, "hog"):
			color = "#ff9800"
		case strings.HasPrefix(ev.What, "thermal"):
			color = "#e53935"
		case strings.Contains(ev.What, "OOM-killed"):
			color = "#000"
		case strings.HasPrefix(ev.What, "policy") && (strings.Contains(ev.What, "tier ") || strings.Contains(ev.What, "layer bits [")):
			color = "#8e24aa"
		}
		if color != "" && ev.TMs >= 0 {
			fmt.Fprintf(&p.b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="%s" stroke-dasharray="4,3"><title>%s</title></line>`+"\n",
				p.x(ev.TMs), p.x(ev.TMs), padT, padT+plotH, color, html.EscapeString(ev.What))
		}
	}
	switch kind {
	case "tps":
		p.line(tpsSeries(pr.Timeline), "#1e88e5", false)
	case "tier":
		var pts [][2]float64
		for _, t := range pr.Timeline {
			y := float64(t.Tier)
			if t.Bits > 0 {
				y = tierPosition(r.Tiers, t.Bits)
			}
			pts = append(pts, [2]float64{t.TMs, p.yMax - y})
		}
		p.line(pts, "#8e24aa", true)
	case "kl":
		var pts [][2]float64
		if q := pr.Quality; q != nil {
			for i, t := range pr.Timeline {
				if i < q.Tokens {
					pts = append(pts, [2]float64{t.TMs, t.KL})
				}
			}
		}
		p.line(pts, "#6d4c41", false)
	case "memory":
		var rss, pss, cg [][2]float64
		for _, m := range pr.Samples {
			if m.RSSMB > 0 {
				rss = append(rss, [2]float64{m.TMs, m.RSSMB})
				pss = append(pss, [2]float64{m.TMs, m.PSSMB})
			}
			if m.CgroupMB > 0 {
				cg = append(cg, [2]float64{m.TMs, m.CgroupMB})
			}
		}
		p.line(rss, "#1e88e5", false)
		p.line(pss, "#43a047", false)
		p.line(cg, "#ff9800", false)
		legend = [][2]string{{"RSS", "#1e88e5"}, {"PSS", "#43a047"}, {"cgroup (engine+hogs)", "#ff9800"}}
		if r.Memory != nil {
			l := float64(r.Memory.LimitMB)
			fmt.Fprintf(&p.b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#b00020"/><text x="%d" y="%.1f" fill="#b00020" text-anchor="end">limit %d MiB</text>`+"\n",
				padL, padL+plotW, p.y(l), p.y(l), padL+plotW-2, p.y(l)-3, r.Memory.LimitMB)
		}
	}
	for i, l := range legend {
		x := padL + 6 + i*110
		fmt.Fprintf(&p.b, `<rect x="%d" y="%d" width="10" height="3" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", x, padT+8, l[1], x+13, padT+11, html.EscapeString(l[0]))
	}
	p.b.WriteString("</svg>\n")
	return p.b.String()
}

// perLayer says whether pr ran with per-layer weight sets (its tokens
// carry bits/weight).
func perLayer(pr *PolicyResult) bool {
	for _, t := range pr.Timeline {
		if t.Bits > 0 {
			return true
		}
	}
	return false
}

// tierPosition places bits on the tier axis: i where bits equals tier i's
// bits/weight, linear in between, clamped to the ladder.
func tierPosition(tiers []Tier, bits float64) float64 {
	if len(tiers) == 0 || bits >= tiers[0].BitsPerWeight {
		return 0
	}
	for i := 1; i < len(tiers); i++ {
		hi, lo := tiers[i-1].BitsPerWeight, tiers[i].BitsPerWeight
		if bits >= lo && hi > lo {
			return float64(i-1) + (hi-bits)/(hi-lo)
		}
	}
	return float64(len(tiers) - 1)
}
