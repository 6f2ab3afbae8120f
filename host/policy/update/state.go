package update

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DescribeState prints a device state directory without changing it (it
// creates nothing): the last-good record and the trusted metadata
// versions.
func DescribeState(dir string) (string, error) {
	if _, err := os.Stat(dir); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", dir)
	if data, err := ReadRegularFile(filepath.Join(dir, lastGoodFile), 4<<10); err == nil {
		var rec lastGoodRecord
		if err := json.Unmarshal(data, &rec); err != nil {
			return "", fmt.Errorf("%w: %s: %v", ErrStateDamaged, filepath.Join(dir, lastGoodFile), err)
		}
		fmt.Fprintf(&b, "last-good\t%s revision %d sha256 %s accepted %s\n", rec.Name, rec.Revision, rec.SHA256[:min(16, len(rec.SHA256))], rec.AcceptedAt.Format(time.RFC3339))
	} else if errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(&b, "last-good\tnone\n")
	} else {
		return "", fmt.Errorf("%w: %v", ErrStateDamaged, err)
	}
	for _, role := range topRoles {
		p := filepath.Join(dir, metaDir, role+".json")
		data, err := ReadRegularFile(p, DefaultLimits().Targets)
		if errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(&b, "%s\tnone\n", role)
			continue
		}
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrStateDamaged, err)
		}
		var md struct {
			Signed struct {
				Version int64     `json:"version"`
				Expires time.Time `json:"expires"`
			} `json:"signed"`
		}
		if err := json.Unmarshal(data, &md); err != nil {
			return "", fmt.Errorf("%w: %s: %v", ErrStateDamaged, p, err)
		}
		fmt.Fprintf(&b, "%s\tversion %d expires %s\n", role, md.Signed.Version, md.Signed.Expires.Format(time.RFC3339))
	}
	return b.String(), nil
}

// ResetState moves a device state directory aside (DIR.reset-UNIXTIME) so
// that the next start is a first boot: the shipped root is trusted again
// and old, unexpired metadata would be accepted. It refuses while a
// process holds the directory.
func ResetState(dir string) (string, error) {
	lf, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|lockOpenFlags, 0)
	if errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			return "", nil
		}
	} else if err != nil {
		return "", err
	} else {
		defer lf.Close()
		if err := tryLock(lf); err != nil {
			return "", fmt.Errorf("%w: %s", ErrStateLocked, dir)
		}
	}
	aside := fmt.Sprintf("%s.reset-%d", filepath.Clean(dir), time.Now().Unix())
	return aside, os.Rename(dir, aside)
}
