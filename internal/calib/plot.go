package calib

import (
	"fmt"
	"math"
	"strings"
)

// SVG draws the proof: KL against the base (log scale) over average bits
// per weight, one line each for the calibrated, uniform and median random
// assignments. Self-contained (no scripts, no external fonts).
func (p *Proof) SVG(title string) string {
	const w, h, left, right, top, bottom = 720, 440, 70, 20, 40, 60
	type series struct {
		name, color string
		pts         [][2]float64
	}
	ss := []series{{name: "calibrated (a)", color: "#1f77b4"}, {name: "uniform, nearest bits (b)", color: "#d62728"},
		{name: "median of 20 random (c)", color: "#2ca02c"}}
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	add := func(i int, e Eval) {
		y := math.Log10(max(e.KL, 1e-6))
		ss[i].pts = append(ss[i].pts, [2]float64{e.AvgBits, y})
		xmin, xmax, ymin, ymax = min(xmin, e.AvgBits), max(xmax, e.AvgBits), min(ymin, y), max(ymax, y)
	}
	for _, pt := range p.Points {
		add(0, pt.Calibrated)
		add(1, pt.Uniform)
		add(2, Eval{AvgBits: pt.Calibrated.AvgBits, KL: pt.Random.KL})
	}
	if len(p.Points) == 0 {
		xmin, xmax, ymin, ymax = 0, 1, -3, 0
	}
	ymin, ymax = math.Floor(ymin), math.Ceil(ymax)
	if ymax == ymin {
		ymax++
	}
	xmin, xmax = math.Floor(xmin), math.Ceil(xmax)
	if xmax == xmin {
		xmax++
	}
	px := func(x float64) float64 { return left + (x-xmin)/(xmax-xmin)*(w-left-right) }
	py := func(y float64) float64 { return top + (ymax-y)/(ymax-ymin)*(h-top-bottom) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="14">%s</text>`+"\n", left, esc(title))
	for y := ymin; y <= ymax; y++ {
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">1e%d</text>`+"\n",
			left, w-right, py(y), py(y), left-6, py(y)+4, int(y))
	}
	step := math.Max(1, math.Round((xmax-xmin)/10))
	for x := xmin; x <= xmax+1e-9; x += step {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#ddd"/><text x="%.1f" y="%d" text-anchor="middle">%g</text>`+"\n",
			px(x), px(x), top, h-bottom, px(x), h-bottom+16, x)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">average bits per weight (layers)</text>`+"\n", (left+w-right)/2, h-bottom+36)
	fmt.Fprintf(&b, `<text transform="translate(16 %d) rotate(-90)" text-anchor="middle">mean KL against F32 (nats, log scale)</text>`+"\n", (top+h-bottom)/2)
	for i, s := range ss {
		var pts []string
		for _, q := range s.pts {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(q[0]), py(q[1])))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", s.color, strings.Join(pts, " "))
		for _, q := range s.pts {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", px(q[0]), py(q[1]), s.color)
		}
		ly := top + 14 + 16*i
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2"/><text x="%d" y="%d">%s</text>`+"\n",
			w-right-230, w-right-210, ly, ly, s.color, w-right-204, ly+4, esc(s.name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// Table is the proof as a Markdown table.
func (p *Proof) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "base (F32) perplexity %.4f over %d scored positions; (a) by the %s allocator\n\n", p.BasePPL, p.Scored, p.Allocator)
	b.WriteString("| budget | (a) calibrated bits | (a) KL | (a) ppl | (b) uniform bits | (b) KL | (b) ppl | (c) random KL median | (c) ppl median |")
	measured := p.Allocator != AllocAdditive
	if measured {
		b.WriteString(" additive bits | additive KL |")
	}
	b.WriteString("\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	if measured {
		b.WriteString("---:|---:|")
	}
	b.WriteString("\n")
	for _, pt := range p.Points {
		fmt.Fprintf(&b, "| %.2f | %.2f | %.5f | %.4f | %.2f | %.5f | %.4f | %.5f | %.4f |", pt.Budget,
			pt.Calibrated.AvgBits, pt.Calibrated.KL, pt.Calibrated.PPL, pt.Uniform.AvgBits, pt.Uniform.KL, pt.Uniform.PPL,
			pt.Random.KL, pt.Random.PPL)
		if a := pt.Additive; a != nil {
			fmt.Fprintf(&b, " %.2f | %.5f |", a.AvgBits, a.KL)
		}
		b.WriteString("\n")
	}
	return b.String()
}
