// Package serve is `edgellm serve`: an OpenAI-compatible HTTP server over one
// host.Engine and one session, with the policy in its decode loop.
//
// Requests queue for the engine (bounded: 429 with Retry-After past it); one
// worker goroutine owns the session and runs them one at a time through
// host.Generate with the request's context, so a client that disconnects
// stops its generation before the next decode step. The policy Adapter is
// the session's for the server's lifetime: its decisions apply between
// decode steps of whatever request runs, and each response lists the ones
// taken during it in its "edgellm" extension object.
package serve

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/edgellm/edgellm/host"
)

// Config configures a Server. Nothing in a request can change it.
type Config struct {
	// ModelID is the model's name in /v1/models and responses.
	ModelID string
	// ChatTemplate is the model's tokenizer.chat_template ("" if none).
	ChatTemplate string
	// Queue is how many requests may wait while one runs; more get 429.
	Queue int
	// RequestTimeout bounds a request from its arrival to its last token.
	RequestTimeout time.Duration
	// MaxBodyBytes bounds a request body.
	MaxBodyBytes int64
	// DefaultMaxTokens is max_tokens when a request does not say.
	DefaultMaxTokens int
	// APIKey, when set, is the bearer token every /v1 request and /metrics
	// must carry.
	APIKey string
	// CORSOrigin, when set, is sent as Access-Control-Allow-Origin.
	CORSOrigin string
	// Sampling holds what requests do not set (top-k, min-p, penalties).
	Sampling host.SamplingParams
	// KVType is the session's KV cache type, shown until a policy sets one.
	KVType string
	// NCtx is the session's context length.
	NCtx int
	// Engine and policy descriptions for /health.
	EngineName, PolicyDesc string
	// OnToken, if set, is called on the engine goroutine after each
	// generated token has been handed to its request, with the number of
	// tokens generated since the server started (across requests); the
	// next policy call and decode step wait for it to return, and an error
	// ends the request. `serve --gate-at` (the scenario runner's token
	// gate) and tests use it to act at a token position.
	OnToken func(n int, tok int32) error
}

// Server is the HTTP side; Run starts its engine worker.
type Server struct {
	cfg      Config
	vocab    host.Vocab
	nCtx     int
	chat     *ChatFormatter
	worker   *worker
	hub      *hub
	ids      atomic.Uint64
	rejected atomic.Int64
	started  time.Time
	mux      *http.ServeMux
}

// New makes a server over sess (created with cfg.NCtx) and an optional
// policy adapter attached to it. Call Run to start serving the queue.
func New(cfg Config, eng host.Engine, sess host.Session, a *host.Adapter) *Server {
	if cfg.Queue <= 0 {
		cfg.Queue = 8
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 5 * time.Minute
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.DefaultMaxTokens <= 0 {
		cfg.DefaultMaxTokens = 256
	}
	h := newHub()
	s := &Server{cfg: cfg, vocab: eng.Vocab(), nCtx: cfg.NCtx, chat: NewChatFormatter(cfg.ChatTemplate), hub: h, started: time.Now(),
		worker: &worker{sess: sess, vocab: eng.Vocab(), adapter: a, nLayer: eng.Info().NLayer, queue: make(chan *job, cfg.Queue), hub: h, onToken: cfg.OnToken}}
	if a != nil {
		s.worker.stats.Current = a.Current()
		s.worker.stats.Revision = uint64(a.Revision())
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v1/completions", s.auth(s.completion(false)))
	s.mux.HandleFunc("POST /v1/chat/completions", s.auth(s.completion(true)))
	s.mux.HandleFunc("GET /v1/models", s.auth(s.models))
	s.mux.HandleFunc("GET /metrics", s.auth(s.metrics))
	s.mux.HandleFunc("GET /health", s.health)
	s.mux.HandleFunc("GET /events", s.auth(s.events))
	s.mux.HandleFunc("GET /", s.page)
	return s
}

// Run serves the queue until ctx ends; the worker owns the session meanwhile.
func (s *Server) Run(ctx context.Context) { s.worker.run(ctx) }

// GeneratedTokens is how many tokens the server has generated since it
// started, across requests.
func (s *Server) GeneratedTokens() int { return s.worker.snapshot().GeneratedTokens }

// ServeHTTP adds CORS headers when configured and routes the request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if o := s.cfg.CORSOrigin; o != "" {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", o)
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
		h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		if r.Method == http.MethodOptions {
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// auth requires the bearer token when an API key is configured, compared in
// constant time.
func (s *Server) auth(next http.HandlerFunc) http.HandlerFunc {
	if s.cfg.APIKey == "" {
		return next
	}
	want := []byte(s.cfg.APIKey)
	return func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="edgellm"`)
			writeError(w, &APIError{Status: http.StatusUnauthorized, Type: "authentication_error", Code: "invalid_api_key",
				Message: "missing or wrong bearer token (the server was started with --api-key)"})
			return
		}
		next(w, r)
	}
}

func (s *Server) nextID() string { return strconv.FormatUint(s.ids.Add(1), 36) }

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{"object": "list", "data": []map[string]any{{
		"id": s.cfg.ModelID, "object": "model", "created": s.started.Unix(), "owned_by": "edgellm"}}})
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	st := s.worker.snapshot()
	writeJSON(w, map[string]any{"status": "ok", "model": s.cfg.ModelID, "engine": s.cfg.EngineName,
		"policy": s.cfg.PolicyDesc, "busy": st.Busy, "queued": len(s.worker.queue), "queue_capacity": cap(s.worker.queue),
		"uptime_s": int(time.Since(s.started).Seconds())})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
