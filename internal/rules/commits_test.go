package rules

import (
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"
)

// subjectsSince is the last commit before the subject rule: history up to it
// is kept as it is (git keeps it); every commit after it follows the rule.
const subjectsSince = "6d77608"

// maxSubject is the longest commit subject allowed (detail goes in the body).
const maxSubject = 72

// TestCommitSubjects holds every commit after subjectsSince to a subject of
// at most maxSubject characters. It skips, saying why, outside a git
// checkout (a module downloaded by go get) or in a shallow clone without
// the base commit.
func TestCommitSubjects(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	root := moduleRoot(t)
	if err := exec.Command("git", "-C", root, "rev-parse", "--verify", "-q", subjectsSince+"^{commit}").Run(); err != nil {
		t.Skipf("no git history with %s here (not a checkout, or a shallow clone)", subjectsSince)
	}
	out, err := exec.Command("git", "-C", root, "log", "--format=%h %s", subjectsSince+"..HEAD").Output()
	if err != nil {
		t.Fatalf("git log: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		hash, subject, _ := strings.Cut(line, " ")
		if n := utf8.RuneCountInString(subject); n > maxSubject {
			t.Errorf("commit %s: subject of %d characters (at most %d; detail goes in the body): %q", hash, n, maxSubject, subject)
		}
	}
}
