package calib

import (
	"fmt"
	"math"
	"slices"
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
	ss := []series{{name: "calibrated (a)", color: "#1f77b4"}, {name: "uniform assignments", color: "#d62728"},
		{name: "median at exactly (a)'s bits", color: "#2ca02c"}, {name: "best at exactly (a)'s bits", color: "#9467bd"}}
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	add := func(i int, bits, kl float64) {
		y := math.Log10(max(kl, 1e-6))
		ss[i].pts = append(ss[i].pts, [2]float64{bits, y})
		xmin, xmax, ymin, ymax = min(xmin, bits), max(xmax, bits), min(ymin, y), max(ymax, y)
	}
	seen := map[float64]bool{}
	for _, pt := range p.Points {
		if seen[pt.Calibrated.AvgBits] {
			continue
		}
		seen[pt.Calibrated.AvgBits] = true
		add(0, pt.Calibrated.AvgBits, pt.Calibrated.KL)
		if pt.EqualMedian != nil {
			add(2, pt.Calibrated.AvgBits, *pt.EqualMedian)
		}
		add(3, pt.Calibrated.AvgBits, pt.EqualBest.KL)
	}
	for _, lv := range p.Levels {
		add(1, lv.AvgBits, lv.Uniform.KL)
	}
	if len(p.Levels) == 0 {
		for _, pt := range p.Points {
			if pt.Uniform != nil {
				add(1, pt.Uniform.AvgBits, pt.Uniform.KL)
			}
		}
	}
	for i := range ss {
		slices.SortFunc(ss[i].pts, func(x, y [2]float64) int { return cmpFloat(x[0], y[0]) })
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

// Table is the proof as Markdown: one row per budget, then (when the space
// was evaluated whole) the uniform levels.
func (p *Proof) Table() string {
	var b strings.Builder
	how := fmt.Sprintf("%d random assignments at exactly (a)'s bits", RandomDraws)
	if p.Exhaustive {
		how = fmt.Sprintf("all %d assignments enumerated, every one at the bits compared evaluated (%d runs)", p.Assignments, p.Evaluated)
	}
	fmt.Fprintf(&b, "base (F32) perplexity %.4f over %d scored positions in chunks of %d tokens (%d blocks of %d for the bootstrap, %d replicates); (a) by the %s allocator; %s\n\n",
		p.BasePPL, p.Scored, p.Chunk, p.Blocks, BlockLen, BootstrapReps, p.Allocator, how)
	b.WriteString("| budget | (a) bits | (a) KL | equal-bits n | (a) rank | equal-bits best KL | equal-bits median KL | (a) − median [95% CI] | uniform at (a)'s bits | (a) − uniform [95% CI] | uniform interpolated KL |")
	measured := p.Allocator != AllocAdditive
	if measured {
		b.WriteString(" additive bits | additive KL |")
	}
	b.WriteString("\n|---:|---:|---:|---:|---:|---:|---:|---|---|---|---:|")
	if measured {
		b.WriteString("---:|---:|")
	}
	b.WriteString("\n")
	for _, pt := range p.Points {
		med, vsMed := "—", "only assignment"
		if pt.VsMedian != nil {
			med, vsMed = fmt.Sprintf("%.5f", *pt.EqualMedian), pt.VsMedian.String()
		}
		uni, vsUni := "none", "—"
		switch {
		case pt.Uniform != nil && pt.VsUniform == nil:
			uni, vsUni = fmt.Sprintf("%.5f", pt.Uniform.KL), "(a) is uniform"
		case pt.Uniform != nil:
			uni, vsUni = fmt.Sprintf("%.5f", pt.Uniform.KL), pt.VsUniform.String()
		}
		interp := "—"
		if pt.UniformInterp != nil {
			interp = fmt.Sprintf("%.5f", *pt.UniformInterp)
		}
		fmt.Fprintf(&b, "| %.2f | %.2f | %.5f | %d | %d | %.5f | %s | %s | %s | %s | %s |", pt.Budget, pt.Calibrated.AvgBits, pt.Calibrated.KL,
			pt.EqualN, pt.Rank, pt.EqualBest.KL, med, vsMed, uni, vsUni, interp)
		if a := pt.Additive; a != nil {
			fmt.Fprintf(&b, " %.2f | %.5f |", a.AvgBits, a.KL)
		}
		b.WriteString("\n")
	}
	if len(p.Levels) > 0 {
		b.WriteString("\nAt the bits of each uniform assignment, does any assignment at exactly those bits beat it (the bound on every allocator)?\n\n")
		b.WriteString("| uniform | bits | uniform KL | assignments at these bits | uniform's rank | best KL | best | best − uniform [95% CI] |\n|---|---:|---:|---:|---:|---:|---|---|\n")
		for _, lv := range p.Levels {
			vs := "uniform is the best"
			if lv.N == 1 {
				vs = "only assignment"
			} else if lv.BestVsUniform != nil {
				vs = lv.BestVsUniform.String()
			}
			fmt.Fprintf(&b, "| %s | %.2f | %.5f | %d | %d | %.5f | %v | %s |\n", lv.Set, lv.AvgBits, lv.Uniform.KL, lv.N, lv.Rank, lv.Best.KL, lv.Best.Sets, vs)
		}
	}
	return b.String()
}

// String is "diff [lo, hi]" with a verdict: "below" when the whole
// interval is below zero, "above" when above, else "within noise".
func (iv *Interval) String() string {
	v := "within noise"
	switch {
	case iv.Hi < 0:
		v = "below"
	case iv.Lo > 0:
		v = "above"
	}
	return fmt.Sprintf("%+.5f [%+.5f, %+.5f] %s", iv.Diff, iv.Lo, iv.Hi, v)
}
