package update

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/theupdateframework/go-tuf/v2/metadata"
)

// A fetcher is go-tuf's fetcher.Fetcher for one update check: every read
// is bounded by the length go-tuf asks for (its per-role limit or the
// target's signed length) and by the check's context (its deadline stops
// a slow-retrieval attack), and it counts the bytes it read.
type fetcher struct {
	ctx  context.Context
	dir  string       // directory transport: the repository's root
	http *http.Client // HTTP transport
	read *atomic.Int64
}

// DownloadFile implements go-tuf's fetcher.Fetcher.
func (f *fetcher) DownloadFile(u string, maxLength int64, _ time.Duration) ([]byte, error) {
	if err := f.ctx.Err(); err != nil {
		return nil, fmt.Errorf("update check: %w", err)
	}
	if maxLength < 0 {
		return nil, fmt.Errorf("fetch %s: negative length limit", u)
	}
	if f.dir != "" {
		return f.readFile(u, maxLength)
	}
	req, err := http.NewRequestWithContext(f.ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	res, err := f.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, &metadata.ErrDownloadHTTP{StatusCode: res.StatusCode, URL: u}
	}
	if res.ContentLength > maxLength {
		return nil, &metadata.ErrDownloadLengthMismatch{Msg: fmt.Sprintf("%s: %d bytes, limit %d", u, res.ContentLength, maxLength)}
	}
	return f.readBounded(u, res.Body, maxLength, res.ContentLength)
}

// readBounded reads at most maxLength+1 bytes from rd (an error past
// maxLength), allocating no more than it reads plus the buffer's growth.
func (f *fetcher) readBounded(u string, rd io.Reader, maxLength, hint int64) ([]byte, error) {
	n := hint
	if n < 0 || n > maxLength {
		n = min(maxLength, 64<<10)
	}
	buf := make([]byte, 0, n+1)
	lr := io.LimitReader(rd, maxLength+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		m, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		f.read.Add(int64(m))
		if err == io.EOF {
			break
		}
		if err != nil {
			if cerr := f.ctx.Err(); cerr != nil {
				return nil, fmt.Errorf("fetch %s: %w", u, cerr)
			}
			return nil, fmt.Errorf("fetch %s: %w", u, err)
		}
	}
	if int64(len(buf)) > maxLength {
		return nil, &metadata.ErrDownloadLengthMismatch{Msg: fmt.Sprintf("%s: more than %d bytes", u, maxLength)}
	}
	return buf, nil
}

// readFile is the directory transport: u must name a file under f.dir; it
// is opened only if it is a regular file (no FIFO, device, socket or
// symlink), without blocking, and read within maxLength.
func (f *fetcher) readFile(u string, maxLength int64) ([]byte, error) {
	rel, ok := strings.CutPrefix(u, f.dir+"/")
	if !ok || rel == "" || strings.Contains(rel, "..") || strings.ContainsRune(rel, 0) {
		return nil, fmt.Errorf("fetch %s: outside the repository %s", u, f.dir)
	}
	path := filepath.Join(f.dir, filepath.FromSlash(rel))
	data, err := ReadRegularFile(path, maxLength)
	if errors.Is(err, os.ErrNotExist) {
		return nil, &metadata.ErrDownloadHTTP{StatusCode: http.StatusNotFound, URL: u}
	}
	if err != nil {
		return nil, err
	}
	f.read.Add(int64(len(data)))
	return data, nil
}

// ErrNotRegular: a path that had to be a regular file is not one.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge: a file is over its size limit.
var ErrTooLarge = errors.New("file over its size limit")

// ReadRegularFile reads path if it is a regular file of at most max bytes.
// It opens with O_NONBLOCK|O_NOFOLLOW (a FIFO planted there cannot block
// the open, a symlink is refused), checks the opened file with fstat, and
// reads at most max+1 bytes, so a file that grows while read is refused
// rather than read without end.
func ReadRegularFile(path string, max int64) ([]byte, error) {
	fh, err := openNoBlock(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, fi.Mode().Type())
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s: %w (%d bytes, limit %d)", path, ErrTooLarge, fi.Size(), max)
	}
	buf := make([]byte, 0, fi.Size()+1)
	lr := io.LimitReader(fh, max+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		m, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if int64(len(buf)) > max {
		return nil, fmt.Errorf("%s: %w (grew past %d bytes while read)", path, ErrTooLarge, max)
	}
	return buf, nil
}
