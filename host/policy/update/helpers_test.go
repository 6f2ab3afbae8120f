package update

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgellm/edgellm/host/policy"
)

// clock is a settable test clock.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

func testPolicyConfig() policy.Config {
	return policy.NewConfig().WithCacheDir("-").WithLogger(slog.New(slog.DiscardHandler))
}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// variant is good_a.wasm with a custom section carrying n: a distinct,
// valid module per revision.
func variant(t testing.TB, n int) []byte {
	base := fixture(t, "good_a")
	content := append(binary.AppendUvarint(nil, 3), "rev"...)
	content = binary.AppendUvarint(content, uint64(n))
	sec := append([]byte{0}, binary.AppendUvarint(nil, uint64(len(content)))...)
	return append(append(append([]byte(nil), base...), sec...), content...)
}

// testRepo is an operator repository with a test clock.
type testRepo struct {
	*Repo
	clk *clock
}

func newRepo(t testing.TB, o InitOptions) *testRepo {
	t.Helper()
	clk := newClock()
	dir := t.TempDir()
	r, err := InitRepo(dir, FileKeyring{Dir: filepath.Join(dir, "keys")}, o, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	return &testRepo{Repo: r, clk: clk}
}

// publish adds wasm as the next revision of name and publishes.
func (r *testRepo) publish(t testing.TB, name string, wasm []byte) *Custom {
	t.Helper()
	c, err := AddModule(context.Background(), r.Repo, testPolicyConfig(), wasm, AddOptions{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Publish(Expiries{}); err != nil {
		t.Fatal(err)
	}
	return c
}

func (r *testRepo) rootBytes(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(r.RootPath())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// server serves a repository's published directory on 127.0.0.1, with
// per-path overrides an attacker controls.
type server struct {
	*httptest.Server
	mu        sync.Mutex
	dir       string
	overrides map[string]http.HandlerFunc
	bytes     atomic.Int64
}

func newServer(t testing.TB, dir string) *server {
	s := &server{dir: dir, overrides: map[string]http.HandlerFunc{}}
	fs := http.FileServer(http.Dir(dir))
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.mu.Lock()
		h := s.overrides[strings.TrimPrefix(req.URL.Path, "/")]
		s.mu.Unlock()
		cw := &countingWriter{ResponseWriter: w, n: &s.bytes}
		if h != nil {
			h(cw, req)
			return
		}
		fs.ServeHTTP(cw, req)
	}))
	t.Cleanup(s.Close)
	return s
}

// override serves h for path (relative to the repository root).
func (s *server) override(path string, h http.HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h == nil {
		delete(s.overrides, path)
		return
	}
	s.overrides[path] = h
}

// clear drops every override.
func (s *server) clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.overrides)
}

// serveBytes makes path answer with data.
func (s *server) serveBytes(path string, data []byte) {
	s.override(path, func(w http.ResponseWriter, _ *http.Request) { w.Write(data) })
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// device opens a client for repo (a URL or a directory) pinned to name.
func device(t testing.TB, repo string, root []byte, state, name string, clk *clock, mod func(*Options)) *Client {
	t.Helper()
	o := Options{Repo: repo, TrustedRoot: root, StateDir: state, Name: name, Now: clk.Now, Timeout: 10 * time.Second}
	if mod != nil {
		mod(&o)
	}
	c, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// accept runs a check and commits its result.
func accept(t testing.TB, c *Client) *Update {
	t.Helper()
	u, err := c.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(u); err != nil {
		t.Fatal(err)
	}
	return u
}

// copyDir copies a directory tree of regular files.
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(filepath.Join(dst, rel))
		if err != nil {
			return err
		}
		defer out.Close()
		_, err = io.Copy(out, in)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
