package policy

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// semver is a parsed MAJOR.MINOR.PATCH[-PRE][+BUILD] version.
type semver struct {
	core [3]int
	pre  string
}

var gitDescribeSuffix = regexp.MustCompile(`^[0-9]+-g[0-9a-f]+(-dirty)?$`)

// parseSemver parses "v1.2.3", "1.2", "1.2.3-rc.1+meta" (missing minor or
// patch count as 0).
func parseSemver(s string) (semver, error) {
	var v semver
	t := strings.TrimPrefix(s, "v")
	if i := strings.IndexByte(t, '+'); i >= 0 {
		t = t[:i]
	}
	if i := strings.IndexByte(t, '-'); i >= 0 {
		t, v.pre = t[:i], t[i+1:]
	}
	parts := strings.Split(t, ".")
	if t == "" || len(parts) > 3 {
		return v, fmt.Errorf("%q is not a semantic version (want MAJOR.MINOR.PATCH)", s)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, fmt.Errorf("%q is not a semantic version (want MAJOR.MINOR.PATCH)", s)
		}
		v.core[i] = n
	}
	return v, nil
}

// compare returns -1, 0 or +1. A pre-release sorts before its release, except
// a `git describe` suffix ("3-gabc123"), which is a build after the tag.
func (a semver) compare(b semver) int {
	for i := range a.core {
		if a.core[i] != b.core[i] {
			if a.core[i] < b.core[i] {
				return -1
			}
			return 1
		}
	}
	ra, rb := a.preRank(), b.preRank()
	switch {
	case ra != rb:
		if ra < rb {
			return -1
		}
		return 1
	case ra == 0 && a.pre != b.pre: // both pre-releases: compare as text
		return strings.Compare(a.pre, b.pre)
	}
	return 0
}

// preRank: 0 pre-release, 1 release, 2 after the release (git describe).
func (a semver) preRank() int {
	switch {
	case a.pre == "":
		return 1
	case gitDescribeSuffix.MatchString(a.pre):
		return 2
	}
	return 0
}

// engineSatisfies reports whether engine version ours meets min. An engine
// version that is not semver ("dev", a bare commit hash) is a development
// build from the tree and satisfies every minimum; the caller logs it.
func engineSatisfies(ours, min string) (ok, devBuild bool, err error) {
	m, err := parseSemver(min)
	if err != nil {
		return false, false, err
	}
	o, err := parseSemver(ours)
	if err != nil {
		return true, true, nil
	}
	return o.compare(m) >= 0, false, nil
}
