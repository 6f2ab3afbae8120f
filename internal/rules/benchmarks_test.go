package rules

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// benchmarksColumns are the columns every table of docs/BENCHMARKS.md
// carries (issue #32 point 2): each row says which command produced it, on
// which CPU, when, and whether the machine was quiet or loaded.
var benchmarksColumns = []string{"command", "cpu", "date", "quiet / loaded"}

// benchmarksIndex is the section that lists the questions; its table has
// one row per other section instead of the columns above.
const benchmarksIndex = "Current answers"

// mdSection is one `## ` section of a markdown file.
type mdSection struct {
	title string
	lines []string // the section's lines after its heading, outside code fences
}

// mdSections splits src into its `## ` sections; text before the first one
// and lines inside ``` fences are left out.
func mdSections(src string) []mdSection {
	var out []mdSection
	fenced := false
	for _, l := range strings.Split(src, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		if strings.HasPrefix(l, "## ") {
			out = append(out, mdSection{title: strings.TrimSpace(l[3:])})
			continue
		}
		if len(out) > 0 {
			out[len(out)-1].lines = append(out[len(out)-1].lines, l)
		}
	}
	return out
}

// mdTable is one markdown table: its header cells and its rows' cells.
type mdTable struct {
	header []string
	rows   [][]string
}

var mdSeparator = regexp.MustCompile(`^\|(\s*:?-{3,}:?\s*\|)+\s*$`)

// mdTables finds the tables in lines: a `|` line followed by a separator
// line, then every `|` line up to the first that is not one.
func mdTables(lines []string) []mdTable {
	var out []mdTable
	for i := 0; i+1 < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "|") || !mdSeparator.MatchString(strings.TrimSpace(lines[i+1])) {
			continue
		}
		t := mdTable{header: mdCells(lines[i])}
		j := i + 2
		for ; j < len(lines) && strings.HasPrefix(lines[j], "|"); j++ {
			t.rows = append(t.rows, mdCells(lines[j]))
		}
		out = append(out, t)
		i = j - 1
	}
	return out
}

// mdCells splits a table line on the pipes that are not escaped (`\|`).
func mdCells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(line); i++ {
		if line[i] == '\\' && i+1 < len(line) && line[i+1] == '|' {
			cur.WriteString(`\|`)
			i++
			continue
		}
		if line[i] == '|' {
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
			continue
		}
		cur.WriteByte(line[i])
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// mdAnchor is the anchor GitHub gives a heading: lower case, punctuation
// other than '-' and '_' dropped, spaces to '-'.
func mdAnchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var (
	mdAnchorLink = regexp.MustCompile(`\]\(#([^)]+)\)`)
	cmdKey       = regexp.MustCompile(`^\[([a-z])\]`)
)

// checkBenchmarks returns what is wrong with the shape of a BENCHMARKS.md:
// every section but the index holds exactly one table whose header has
// benchmarksColumns and whose rows fill them, every command key ([a]) a
// row uses is listed in the section, and the index has one row per other
// section, linking to it.
func checkBenchmarks(src string) []string {
	var bad []string
	secs := mdSections(src)
	anchors := map[string]string{} // anchor → title of the sections to index
	var index *mdTable
	for _, s := range secs {
		tables := mdTables(s.lines)
		if s.title == benchmarksIndex {
			if len(tables) != 1 {
				bad = append(bad, `"`+s.title+`": want exactly one table`)
				continue
			}
			index = &tables[0]
			continue
		}
		anchors[mdAnchor(s.title)] = s.title
		if len(tables) != 1 {
			bad = append(bad, `"`+s.title+`": `+strconv.Itoa(len(tables))+" tables, want exactly one (one current table per question)")
			continue
		}
		t := tables[0]
		col := map[string]int{}
		for i, h := range t.header {
			col[strings.ToLower(h)] = i
		}
		for _, c := range benchmarksColumns {
			if _, ok := col[c]; !ok {
				bad = append(bad, `"`+s.title+`": table has no "`+c+`" column`)
			}
		}
		listed := map[string]bool{}
		for _, l := range s.lines {
			if m := cmdKey.FindStringSubmatch(strings.TrimPrefix(strings.TrimSpace(l), "- ")); m != nil && strings.HasPrefix(strings.TrimSpace(l), "- [") {
				listed[m[1]] = true
			}
		}
		for ri, r := range t.rows {
			if len(r) != len(t.header) {
				bad = append(bad, `"`+s.title+`": row `+strconv.Itoa(ri+1)+" has "+strconv.Itoa(len(r))+" cells, the header "+strconv.Itoa(len(t.header)))
				continue
			}
			for _, c := range benchmarksColumns {
				if i, ok := col[c]; ok && strings.TrimSpace(r[i]) == "" {
					bad = append(bad, `"`+s.title+`": row `+strconv.Itoa(ri+1)+` has an empty "`+c+`" (write "not recorded")`)
				}
			}
			if i, ok := col["command"]; ok {
				for _, k := range regexp.MustCompile(`\[([a-z])\]`).FindAllStringSubmatch(r[i], -1) {
					if !listed[k[1]] {
						bad = append(bad, `"`+s.title+`": row `+strconv.Itoa(ri+1)+" uses command key ["+k[1]+"], not listed under the table")
					}
				}
			}
		}
	}
	if index == nil {
		return append(bad, `no "## `+benchmarksIndex+`" section with one table`)
	}
	seen := map[string]int{}
	for ri, r := range index.rows {
		links := mdAnchorLink.FindAllStringSubmatch(strings.Join(r, " "), -1)
		if len(links) != 1 {
			bad = append(bad, "index row "+strconv.Itoa(ri+1)+": "+strconv.Itoa(len(links))+" section links, want one")
			continue
		}
		a := links[0][1]
		if _, ok := anchors[a]; !ok {
			bad = append(bad, "index row "+strconv.Itoa(ri+1)+": #"+a+" is no section")
		}
		seen[a]++
	}
	for a, title := range anchors {
		if seen[a] != 1 {
			bad = append(bad, `index: "`+title+`" has `+strconv.Itoa(seen[a])+" rows, want one")
		}
	}
	return bad
}

// TestBenchmarksShape keeps docs/BENCHMARKS.md a list of questions with
// one current table each (issue #32 point 2): see checkBenchmarks.
func TestBenchmarksShape(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs", "BENCHMARKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range checkBenchmarks(string(src)) {
		t.Error("docs/BENCHMARKS.md: " + b)
	}
}

// TestBenchmarksShapeCatches runs the check on small files that break each
// rule once, so the test above cannot pass by checking nothing.
func TestBenchmarksShapeCatches(t *testing.T) {
	const good = "# B\n\n## Current answers\n\n| question | answer | section |\n|---|---|---|\n| q? | a | [Q one](#q-one) |\n\n" +
		"## Q one\n\nLead.\n\n| x | command | CPU | date | quiet / loaded |\n|---|---|---|---|---|\n| 1 | [a] | Xeon | 2026-11-26 | loaded |\n\n- [a] `edgellm bench`\n"
	if bad := checkBenchmarks(good); len(bad) != 0 {
		t.Fatalf("a well-formed file is refused: %v", bad)
	}
	table2 := "\n| y | command | CPU | date | quiet / loaded |\n|---|---|---|---|---|\n| 2 | [a] | Xeon | 2026-11-26 | loaded |\n"
	for name, src := range map[string]string{
		"two tables in a section": good + table2,
		"no table in a section":   good[:strings.Index(good, "| x |")],
		"no CPU column":           strings.Replace(good, "| CPU |", "| machine |", 1),
		"no quiet / loaded":       strings.Replace(good, "| quiet / loaded |\n", "| load |\n", 1),
		"empty date cell":         strings.Replace(good, "| 2026-11-26 |", "|  |", 1),
		"short row":               strings.Replace(good, "| 1 | [a] |", "| [a] |", 1),
		"unlisted command key":    strings.Replace(good, "| 1 | [a] |", "| 1 | [b] |", 1),
		"section not indexed":     good + "\n## Q two\n" + table2 + "\n- [a] x\n",
		"index links nowhere":     strings.Replace(good, "(#q-one)", "(#q-two)", 1),
		"question indexed twice":  strings.Replace(good, "| q? | a | [Q one](#q-one) |\n", "| q? | a | [Q one](#q-one) |\n| q2 | a | [Q one](#q-one) |\n", 1),
	} {
		if bad := checkBenchmarks(src); len(bad) == 0 {
			t.Errorf("%s: not caught", name)
		}
	}
}

// benchmarksCite matches a citation of a BENCHMARKS.md section by its
// quoted name: `BENCHMARKS "Memory"`, `docs/BENCHMARKS.md, "Memory"`,
// `docs/BENCHMARKS.md (section "Memory")`.
var benchmarksCite = regexp.MustCompile(`BENCHMARKS(?:\.md)?,?\s+(?:\(section\s+)?"([^"]{1,80})"`)

// benchmarksLink matches a link to a BENCHMARKS.md anchor.
var benchmarksLink = regexp.MustCompile(`BENCHMARKS\.md#([A-Za-z0-9_-]+)`)

// TestBenchmarksCitations: every place in the module that names a section
// of docs/BENCHMARKS.md by its title or links to its anchor names one that
// exists (a quoted name may be the start of the title).
func TestBenchmarksCitations(t *testing.T) {
	root := moduleRoot(t)
	src, err := os.ReadFile(filepath.Join(root, "docs", "BENCHMARKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	var titles []string
	anchors := map[string]bool{}
	for _, s := range mdSections(string(src)) {
		titles = append(titles, strings.ToLower(s.title))
		anchors[mdAnchor(s.title)] = true
	}
	comment := regexp.MustCompile(`\n\s*(//|#)?\s*`)
	n := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "node_modules" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, ".md") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), "BENCHMARKS") {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if filepath.ToSlash(rel) == "internal/rules/benchmarks_test.go" {
			return nil
		}
		text := comment.ReplaceAllString(string(b), " ")
		for _, m := range benchmarksCite.FindAllStringSubmatch(text, -1) {
			n++
			q := strings.ToLower(m[1])
			ok := false
			for _, title := range titles {
				ok = ok || strings.HasPrefix(title, q)
			}
			if !ok {
				t.Errorf("%s cites BENCHMARKS.md section %q, which does not exist", rel, m[1])
			}
		}
		for _, m := range benchmarksLink.FindAllStringSubmatch(text, -1) {
			n++
			if !anchors[m[1]] {
				t.Errorf("%s links BENCHMARKS.md#%s, which is no section", rel, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("found no citation of a BENCHMARKS.md section: the patterns are wrong")
	}
}
