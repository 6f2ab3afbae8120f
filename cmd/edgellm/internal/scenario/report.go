package scenario

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// EncodeJSON writes the report as indented JSON.
func EncodeJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes one line per policy: the figures to compare.
func WriteTable(w io.Writer, r *Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "policy\tengine\toutcome\ttokens\tmean tok/s\tthrottled tok/s\tswaps\tpolicy failures\tOOM kills\tmean bpw\tKL vs tier 0 (mean/max)\ttop-1 vs tier 0\tpeak RSS MiB\tpeak PSS MiB\tpeak cgroup MiB")
	for _, p := range r.Policies {
		thr := "-"
		if p.MeanTPSThrottled > 0 {
			thr = fmt.Sprintf("%.1f", p.MeanTPSThrottled)
		}
		cg := "-"
		if p.PeakCgroupMB > 0 {
			cg = fmt.Sprintf("%.1f", p.PeakCgroupMB)
		}
		kl, top1 := "-", "-"
		if q := p.Quality; q != nil && q.Tokens > 0 {
			kl, top1 = fmt.Sprintf("%.4f/%.4f (%d tok)", q.MeanKL, q.MaxKL, q.Tokens), fmt.Sprintf("%.3f", q.Top1Agreement)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.1f\t%s\t%d\t%d\t%d\t%.2f\t%s\t%s\t%.1f\t%.1f\t%s\n", p.Name, p.Engine, p.Outcome, p.Tokens, p.MeanTPS, thr,
			p.TierSwaps, p.PolicyFailures, p.OOMKills, p.MeanBitsPerWeight, kl, top1, p.PeakRSSMB, p.PeakPSSMB, cg)
	}
	tw.Flush()
	writeCPUPhases(w, r)
}

// WriteReport writes report.json, one SVG per chart and policy, and
// report.html into dir, and returns the paths written.
func WriteReport(r *Report, dir string) ([]string, error) {
	var files []string
	write := func(name string, fill func(io.Writer) error) error {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			return fmt.Errorf("scenario: %w", err)
		}
		if err := fill(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		files = append(files, p)
		return nil
	}
	if err := write("report.json", func(w io.Writer) error { return EncodeJSON(w, r) }); err != nil {
		return files, err
	}
	sc := newScales(r)
	charts := map[string]map[string]string{} // policy -> chart -> file name
	for _, p := range r.Policies {
		charts[p.Name] = map[string]string{}
		for _, c := range chartKinds {
			name := fmt.Sprintf("%s-%s.svg", p.Name, c)
			svg := chartSVG(r, &p, c, sc)
			if err := write(name, func(w io.Writer) error { _, err := io.WriteString(w, svg); return err }); err != nil {
				return files, err
			}
			charts[p.Name][c] = name
		}
	}
	err := write("report.html", func(w io.Writer) error { return writeHTML(w, r, charts) })
	return files, err
}

func writeHTML(w io.Writer, r *Report, charts map[string]map[string]string) error {
	e := html.EscapeString
	var b strings.Builder
	title := "edgellm scenario " + r.Scenario
	if r.Simulated {
		title += " (SIMULATED pressure)"
	}
	fmt.Fprintf(&b, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>%s</title>\n", e(title))
	b.WriteString(`<style>body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
.sim{background:#fff3cd;border:2px solid #d39e00;padding:.6em;font-weight:bold}
.real{background:#e8f5e9;border:1px solid #43a047;padding:.6em}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:1em}
.col h2{margin:.2em 0}.bad{color:#b00020;font-weight:bold}.ok{color:#1b5e20;font-weight:bold}
ul.ev{font-size:85%;max-height:14em;overflow:auto}</style></head><body>
`)
	fmt.Fprintf(&b, "<h1>%s</h1>\n", e(title))
	if r.Simulated {
		fmt.Fprintf(&b, "<p class=\"sim\">SIMULATED pressure: %s. No memory limit, hog or CPU quota was applied; the policies read a synthetic sensor trace. OOM kills cannot happen and throughput is not throttled.</p>\n", e(r.Pressure))
	} else {
		fmt.Fprintf(&b, "<p class=\"real\">Pressure: %s.</p>\n", e(r.Pressure))
	}
	fmt.Fprintf(&b, "<p>Prompt %q, %d tokens, %d thread(s), ctx %d, temperature 0, engine %s. Sensors: %s.</p>\n", e(r.Prompt), r.N, r.Threads, r.Ctx, e(r.Engine), e(r.Sensors))
	b.WriteString("<table><tr><th>tier</th><th>file</th><th>type</th><th>MiB</th><th>bits/weight</th></tr>\n")
	for i, t := range r.Tiers {
		syn := ""
		if t.Synthetic {
			syn = " (SYNTHETIC weights)"
		}
		fmt.Fprintf(&b, "<tr><td>%d</td><td>%s%s</td><td>%s</td><td>%.1f</td><td>%.2f</td></tr>\n", i, e(filepath.Base(t.Path)), syn, e(t.Type), t.SizeMB, t.BitsPerWeight)
	}
	b.WriteString("</table>\n")
	if m := r.Memory; m != nil {
		fmt.Fprintf(&b, "<p>Memory: cgroup limit %d MiB", m.LimitMB)
		for _, h := range m.Hogs {
			if h.AtMs != nil {
				fmt.Fprintf(&b, "; hog %d MiB at %d ms", h.MB, *h.AtMs)
			} else {
				fmt.Fprintf(&b, "; hog %d MiB at token %d", h.MB, *h.AtToken)
			}
		}
		b.WriteString(".</p>\n")
	}
	if th := r.Thermal; th != nil {
		b.WriteString("<p>Thermal schedule:")
		for _, st := range th.Schedule {
			q := "no quota"
			if st.CPUs > 0 {
				q = fmt.Sprintf("%g CPU", st.CPUs)
			}
			fmt.Fprintf(&b, " token %d → %s, %s;", *st.AtToken, e(st.Status), q)
		}
		b.WriteString("</p>\n")
	}
	var sb strings.Builder
	WriteTable(&sb, r)
	b.WriteString("<table>")
	for i, line := range strings.Split(strings.TrimRight(sb.String(), "\n"), "\n") {
		cells := splitTableLine(line)
		tag := "td"
		if i == 0 {
			tag = "th"
		}
		b.WriteString("<tr>")
		for _, c := range cells {
			fmt.Fprintf(&b, "<%s>%s</%s>", tag, e(c), tag)
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</table>\n<div class=\"grid\">\n")
	for _, p := range r.Policies {
		cls := "ok"
		if !p.Completed {
			cls = "bad"
		}
		fmt.Fprintf(&b, "<div class=\"col\"><h2>%s</h2><p class=\"%s\">%s — %d tokens", e(p.Name), cls, e(p.Outcome), p.Tokens)
		if p.Error != "" && !p.Completed {
			fmt.Fprintf(&b, " (%s)", e(p.Error))
		}
		b.WriteString("</p>\n")
		if p.QualityError != "" {
			fmt.Fprintf(&b, "<p>KL against tier 0 not measured: %s</p>\n", e(p.QualityError))
		}
		for _, c := range chartKinds {
			fmt.Fprintf(&b, "<img src=\"%s\" alt=\"%s %s\" width=\"420\"><br>\n", e(charts[p.Name][c]), e(p.Name), c)
		}
		b.WriteString("<ul class=\"ev\">")
		for _, ev := range p.Events {
			fmt.Fprintf(&b, "<li>%.0f ms: %s</li>", ev.TMs, e(ev.What))
		}
		b.WriteString("</ul></div>\n")
	}
	b.WriteString("</div>\n</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// splitTableLine splits a tabwriter line (cells separated by ≥ 2 spaces).
func splitTableLine(line string) []string {
	var cells []string
	for _, c := range strings.Split(line, "  ") {
		if c = strings.TrimSpace(c); c != "" {
			cells = append(cells, c)
		}
	}
	return cells
}
