package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// Extension is the "edgellm" object every completion response carries (in
// the final chunk when streaming): which chat template built the prompt,
// the policy decisions taken while the request ran, and the prefill the
// KV prefix reuse saved.
type Extension struct {
	ChatTemplate string     `json:"chat_template,omitempty"`
	Decisions    []Decision `json:"decisions"`
	ReusedTokens int        `json:"reused_prompt_tokens"`
	// ReuseLost are prompt tokens shared with the previous request that
	// were prefilled again because the policy's KV window had evicted
	// positions they need; ReuseNote says so in words.
	ReuseLost     int     `json:"reuse_lost_tokens,omitempty"`
	ReuseNote     string  `json:"reuse_note,omitempty"`
	QueueMs       float64 `json:"queue_ms"`
	TTFTMs        float64 `json:"ttft_ms"`
	DecodeTPS     float64 `json:"decode_tps"`
	StoppedReason string  `json:"-"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type choice struct {
	Index        int      `json:"index"`
	Text         *string  `json:"text,omitempty"`
	Message      *Message `json:"message,omitempty"`
	Delta        *Message `json:"delta,omitempty"`
	FinishReason *string  `json:"finish_reason"`
	Logprobs     any      `json:"logprobs"`
}

type response struct {
	ID      string     `json:"id"`
	Object  string     `json:"object"`
	Created int64      `json:"created"`
	Model   string     `json:"model"`
	Choices []choice   `json:"choices"`
	Usage   *usage     `json:"usage,omitempty"`
	Edge    *Extension `json:"edgellm,omitempty"`
}

// completion handles POST /v1/completions and /v1/chat/completions.
func (s *Server) completion(chat bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// JSON only: a browser sends text/plain or form bodies cross-origin
		// without a preflight; application/json needs one.
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			writeError(w, &APIError{Status: http.StatusUnsupportedMediaType, Type: "invalid_request_error", Code: "unsupported_media_type",
				Message: fmt.Sprintf("Content-Type %q: the body must be application/json", r.Header.Get("Content-Type"))})
			return
		}
		// A body that trickles in must not hold the handler: a read deadline
		// for all of it, cleared before generation (SSE writes have their own).
		rc := http.NewResponseController(w)
		rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout))
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
		rc.SetReadDeadline(time.Time{})
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				writeError(w, badRequest("", "request body is over %d bytes (--max-body)", mbe.Limit))
				return
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				writeError(w, &APIError{Status: http.StatusRequestTimeout, Type: "invalid_request_error", Code: "body_timeout",
					Message: fmt.Sprintf("the request body did not arrive within %s", s.cfg.BodyTimeout)})
				return
			}
			writeError(w, badRequest("", "reading the body: %v", err))
			return
		}
		req, err := DecodeRequest(body, chat)
		if err != nil {
			writeError(w, toAPIError(err))
			return
		}
		s.serve(w, r, req)
	}
}

// serve tokenizes, checks the context, queues the job and writes the answer.
// The engine never writes to the socket: it appends to the output's
// buffer; this goroutine writes it out with a write deadline.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, req *Request) {
	ext := &Extension{Decisions: []Decision{}}
	prompt, tmpl, err := s.promptTokens(req)
	if err != nil {
		writeError(w, toAPIError(err))
		return
	}
	ext.ChatTemplate = tmpl
	nPredict := req.MaxTokens
	room := s.nCtx - len(prompt)
	switch {
	case room < 1:
		writeError(w, badRequest("prompt", "the prompt is %d tokens; the context is %d (it must leave room for at least 1 generated token)", len(prompt), s.nCtx))
		return
	case nPredict == 0:
		nPredict = min(room, s.cfg.DefaultMaxTokens)
	case nPredict > room:
		writeError(w, badRequest("max_tokens", "the prompt is %d tokens and max_tokens is %d: together over the context of %d tokens", len(prompt), nPredict, s.nCtx))
		return
	}
	sp := s.cfg.Sampling
	sp.Temp, sp.TopP = req.Temperature, req.TopP
	if req.HasSeed {
		sp.Seed = req.Seed
	} else {
		sp.Seed = uint64(time.Now().UnixNano())
	}
	if err := sp.Validate(); err != nil {
		writeError(w, badRequest("", "%v", err))
		return
	}
	tctx, tcancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer tcancel()
	ctx, cancel := context.WithCancelCause(tctx)
	defer cancel(nil)
	out := newOutput(s, w, req, len(prompt), cancel)
	j := &job{ctx: ctx, prompt: prompt, nPredict: nPredict, sampling: sp, emit: out.token,
		started: make(chan struct{}), done: make(chan jobResult, 1)}
	queued := time.Now()
	if !s.worker.queue.push(j) {
		s.rejected.Add(1)
		writeError(w, &APIError{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: "queue_full",
			Message: fmt.Sprintf("the queue is full (%d requests waiting, --queue %d): retry later", s.worker.queue.len(), s.worker.queue.cap), RetryAfter: 1})
		return
	}
	var res jobResult
	select {
	case <-j.started:
		ext.QueueMs = ms(time.Since(queued))
		res = out.pump(j.done)
	case <-ctx.Done():
		// Gone while queued (client left, timeout, shutdown): its slot is
		// freed now. If the worker took it meanwhile, it sees ctx at once.
		if s.worker.queue.remove(j) {
			s.worker.count(func(st *workerStats) { st.Cancelled++ })
			res = jobResult{err: ctx.Err()}
		} else {
			res = out.pump(j.done)
		}
	}
	if ext.QueueMs == 0 {
		ext.QueueMs = ms(time.Since(queued))
	}
	ext.Decisions = append(ext.Decisions, res.decisions...)
	ext.ReusedTokens, ext.ReuseLost, ext.ReuseNote = res.reused, res.reuseLost, res.reuseNote
	ext.TTFTMs = ms(res.stats.FirstToken)
	ext.DecodeTPS = res.stats.DecodeTPS()
	if res.err != nil && errors.Is(context.Cause(ctx), ErrShutdown) {
		res.err = &APIError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "server_shutdown",
			Message: fmt.Sprintf("the server is shutting down: generation stopped after %d tokens", res.stats.GeneratedTokens)}
	}
	if res.err != nil && errors.Is(context.Cause(ctx), errSlowClient) {
		return // the client cannot take more: nothing else is written
	}
	if res.err != nil && errors.Is(tctx.Err(), context.DeadlineExceeded) && r.Context().Err() == nil {
		res.err = badRequest("", "the request ran over the %s timeout (--request-timeout) after %d generated tokens", s.cfg.RequestTimeout, res.stats.GeneratedTokens)
	}
	out.finish(res, ext)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// errSlowClient cuts off a streaming client that does not take its output
// as fast as the engine makes it: its buffer is over Config.StreamBuffer,
// or one write did not finish within Config.WriteTimeout.
var errSlowClient = errors.New("the client does not read its stream fast enough")

// output turns tokens into text (holding back possible stop sequences) and
// writes it: SSE chunks while streaming, one JSON object at the end
// otherwise. token runs on the worker goroutine and only appends to a
// bounded buffer; pump and finish run on the handler's goroutine and do
// all the writing, each write under a deadline.
type output struct {
	s      *Server
	w      http.ResponseWriter
	rc     *http.ResponseController
	req    *Request
	id     string
	nPrmt  int
	filter stopFilter
	text   strings.Builder
	piece  []byte
	n      int
	chunks int                     // chunks made (worker side)
	cancel context.CancelCauseFunc // ends the job (errSlowClient)

	mu     sync.Mutex
	buf    []byte        // SSE bytes not yet written
	bufErr error         // set once the client is cut off
	more   chan struct{} // signalled when buf grows

	sent bool // stream headers written (handler side)
	wErr error
}

func newOutput(s *Server, w http.ResponseWriter, req *Request, nPrompt int, cancel context.CancelCauseFunc) *output {
	prefix := "cmpl-"
	if req.Chat {
		prefix = "chatcmpl-"
	}
	return &output{s: s, w: w, rc: http.NewResponseController(w), req: req, nPrmt: nPrompt, id: prefix + s.nextID(),
		filter: stopFilter{stops: req.Stop}, cancel: cancel, more: make(chan struct{}, 1)}
}

func (o *output) token(tok int32) error {
	o.piece = o.s.vocab.Piece(o.piece[:0], tok)
	p := o.piece
	if o.n == 0 && len(p) > 0 && p[0] == ' ' && (o.req.Chat || o.req.Prompt == "") {
		p = p[1:] // the reply's leading space (the worker keeps the token itself for prefix reuse)
	}
	o.n++
	safe := o.filter.push(string(p))
	o.text.WriteString(safe)
	if o.req.Stream && safe != "" {
		if err := o.queue(o.event(safe, nil, nil, nil)); err != nil {
			return err
		}
	}
	if o.filter.hit {
		return errStopSequence
	}
	return nil
}

// queue appends one SSE event to the buffer for pump to write; past
// Config.StreamBuffer unwritten bytes the client is cut off.
func (o *output) queue(b []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.bufErr != nil {
		return o.bufErr
	}
	if len(o.buf)+len(b) > o.s.cfg.StreamBuffer {
		o.bufErr = fmt.Errorf("%w: %d bytes unread (--stream-buffer %d)", errSlowClient, len(o.buf), o.s.cfg.StreamBuffer)
		o.cancel(errSlowClient)
		return o.bufErr
	}
	o.buf = append(o.buf, b...)
	select {
	case o.more <- struct{}{}:
	default:
	}
	return nil
}

// pump writes buffered events as they come until the job is done, and
// returns its result.
func (o *output) pump(done <-chan jobResult) jobResult {
	for {
		select {
		case res := <-done:
			o.drain()
			return res
		case <-o.more:
			o.drain()
		}
	}
}

// drain writes what the buffer holds.
func (o *output) drain() {
	o.mu.Lock()
	b := o.buf
	o.buf = nil
	o.mu.Unlock()
	if len(b) > 0 {
		o.write(b)
	}
}

// write sends b under the write deadline (stream headers first); a failed
// or timed-out write cuts the client off and ends its job.
func (o *output) write(b []byte) {
	if o.wErr != nil {
		return
	}
	if !o.sent {
		h := o.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		o.sent = true
		o.rc.SetWriteDeadline(time.Now().Add(o.s.cfg.WriteTimeout))
		o.w.WriteHeader(http.StatusOK)
	}
	o.rc.SetWriteDeadline(time.Now().Add(o.s.cfg.WriteTimeout))
	_, err := o.w.Write(b)
	if err == nil {
		err = o.rc.Flush()
	}
	if err != nil {
		o.wErr = err
		o.mu.Lock()
		if o.bufErr == nil {
			o.bufErr = fmt.Errorf("%w: %v", errSlowClient, err)
		}
		o.mu.Unlock()
		o.cancel(errSlowClient)
	}
}

func (o *output) object() string {
	switch {
	case o.req.Chat && o.req.Stream:
		return "chat.completion.chunk"
	case o.req.Chat:
		return "chat.completion"
	}
	return "text_completion"
}

func (o *output) choiceOf(text string, finish *string, first bool) choice {
	c := choice{FinishReason: finish}
	switch {
	case !o.req.Chat:
		c.Text = &text
	case o.req.Stream:
		c.Delta = &Message{Content: text}
		if first {
			c.Delta.Role = "assistant"
		}
	default:
		c.Message = &Message{Role: "assistant", Content: text}
	}
	return c
}

// event formats one SSE chunk.
func (o *output) event(text string, finish *string, u *usage, ext *Extension) []byte {
	resp := response{ID: o.id, Object: o.object(), Created: time.Now().Unix(), Model: o.s.cfg.ModelID, Usage: u, Edge: ext,
		Choices: []choice{o.choiceOf(text, finish, o.chunks == 0)}}
	if u != nil && finish == nil {
		resp.Choices = []choice{}
	}
	o.chunks++
	b, _ := json.Marshal(resp)
	return fmt.Appendf(nil, "data: %s\n\n", b)
}

// finish writes the end of the response (the job is done: the handler's
// goroutine owns the output now).
func (o *output) finish(res jobResult, ext *Extension) {
	o.drain()
	if rest := o.filter.flush(); rest != "" && !o.filter.hit {
		o.text.WriteString(rest)
		if o.req.Stream {
			o.write(o.event(rest, nil, nil, nil))
		}
	}
	finish := "length"
	if res.stats.StoppedAtEOG || o.filter.hit {
		finish = "stop"
	}
	u := &usage{PromptTokens: o.nPrmt, CompletionTokens: res.stats.GeneratedTokens, TotalTokens: o.nPrmt + res.stats.GeneratedTokens}
	if res.err != nil {
		e, ok := res.err.(*APIError)
		if !ok {
			e = &APIError{Status: http.StatusInternalServerError, Type: "server_error", Message: res.err.Error()}
			if errors.Is(res.err, context.Canceled) {
				e.Status, e.Type, e.Message = 499, "cancelled", "the client went away"
			}
		}
		if o.sent {
			b, _ := json.Marshal(struct {
				Error *APIError `json:"error"`
			}{e})
			o.write(fmt.Appendf(nil, "data: %s\n\ndata: [DONE]\n\n", b))
			return
		}
		writeError(o.w, e)
		return
	}
	if o.req.Stream {
		var cu *usage
		if !o.req.IncludeUsage {
			cu = u // the final chunk carries usage either way; include_usage adds OpenAI's own usage-only chunk
		}
		b := o.event("", &finish, cu, ext)
		if o.req.IncludeUsage {
			b = append(b, o.event("", nil, u, nil)...)
		}
		o.write(append(b, "data: [DONE]\n\n"...))
		return
	}
	resp := response{ID: o.id, Object: o.object(), Created: time.Now().Unix(), Model: o.s.cfg.ModelID, Usage: u, Edge: ext,
		Choices: []choice{o.choiceOf(o.text.String(), &finish, false)}}
	o.w.Header().Set("Content-Type", "application/json")
	o.rc.SetWriteDeadline(time.Now().Add(o.s.cfg.WriteTimeout))
	json.NewEncoder(o.w).Encode(resp)
}
