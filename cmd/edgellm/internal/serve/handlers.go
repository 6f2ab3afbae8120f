package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Extension is the "edgellm" object every completion response carries (in
// the final chunk when streaming): which chat template built the prompt,
// the policy decisions taken while the request ran, and the prefill the
// KV prefix reuse saved.
type Extension struct {
	ChatTemplate  string     `json:"chat_template,omitempty"`
	Decisions     []Decision `json:"decisions"`
	ReusedTokens  int        `json:"reused_prompt_tokens"`
	QueueMs       float64    `json:"queue_ms"`
	TTFTMs        float64    `json:"ttft_ms"`
	DecodeTPS     float64    `json:"decode_tps"`
	StoppedReason string     `json:"-"`
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
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				writeError(w, badRequest("", "request body is over %d bytes (--max-body)", mbe.Limit))
				return
			}
			writeError(w, badRequest("", "reading the body: %v", err))
			return
		}
		req, err := DecodeRequest(body, chat)
		if err != nil {
			writeError(w, err.(*APIError))
			return
		}
		s.serve(w, r, req)
	}
}

// serve tokenizes, checks the context, queues the job and writes the answer.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, req *Request) {
	ext := &Extension{Decisions: []Decision{}}
	text := req.Prompt
	if req.Chat {
		text, ext.ChatTemplate = s.chat.Format(req.Messages)
	}
	prompt, err := s.vocab.Tokenize(text, true)
	if err != nil {
		writeError(w, badRequest("prompt", "tokenizing the prompt: %v", err))
		return
	}
	if len(prompt) == 0 {
		prompt = []int32{s.vocab.BOS()}
	}
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
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	out := newOutput(s, w, req, len(prompt))
	j := &job{ctx: ctx, prompt: prompt, nPredict: nPredict, sampling: sp, emit: out.token,
		started: make(chan struct{}), done: make(chan jobResult, 1)}
	queued := time.Now()
	select {
	case s.worker.queue <- j:
	default:
		s.rejected.Add(1)
		writeError(w, &APIError{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: "queue_full",
			Message: fmt.Sprintf("the queue is full (%d requests waiting, --queue %d): retry later", len(s.worker.queue), cap(s.worker.queue)), RetryAfter: 1})
		return
	}
	var res jobResult
	select {
	case res = <-j.done:
	case <-j.started:
		ext.QueueMs = ms(time.Since(queued))
		res = <-j.done
	case <-ctx.Done():
		// Gone while queued (client left, timeout, shutdown): the worker
		// checks ctx before it runs a job, so it will never emit for this one.
		select {
		case <-j.started:
			res = <-j.done
		default:
			res = jobResult{err: ctx.Err()}
		}
	}
	if ext.QueueMs == 0 {
		ext.QueueMs = ms(time.Since(queued))
	}
	ext.Decisions = append(ext.Decisions, res.decisions...)
	ext.ReusedTokens = res.reused
	ext.TTFTMs = ms(res.stats.FirstToken)
	ext.DecodeTPS = res.stats.DecodeTPS()
	if res.err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && r.Context().Err() == nil {
		res.err = badRequest("", "the request ran over the %s timeout (--request-timeout) after %d generated tokens", s.cfg.RequestTimeout, res.stats.GeneratedTokens)
	}
	out.finish(res, ext)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// output turns tokens into text (holding back possible stop sequences) and
// writes it: SSE chunks while streaming, one JSON object at the end
// otherwise. token runs on the worker goroutine, finish on the handler's
// after the job is done, so they never overlap.
type output struct {
	s      *Server
	w      http.ResponseWriter
	req    *Request
	id     string
	nPrmt  int
	filter stopFilter
	text   strings.Builder
	piece  []byte
	n      int
	sent   bool // stream headers written
	wErr   error
}

func newOutput(s *Server, w http.ResponseWriter, req *Request, nPrompt int) *output {
	prefix := "cmpl-"
	if req.Chat {
		prefix = "chatcmpl-"
	}
	return &output{s: s, w: w, req: req, nPrmt: nPrompt, id: prefix + s.nextID(), filter: stopFilter{stops: req.Stop}}
}

func (o *output) token(tok int32) error {
	o.piece = o.s.vocab.Piece(o.piece[:0], tok)
	p := o.piece
	if o.n == 0 && !o.req.Chat && o.req.Prompt == "" && len(p) > 0 && p[0] == ' ' {
		p = p[1:]
	}
	o.n++
	safe := o.filter.push(string(p))
	o.text.WriteString(safe)
	if o.req.Stream && safe != "" {
		if err := o.chunk(safe, nil, nil, nil); err != nil {
			return err
		}
	}
	if o.filter.hit {
		return errStopSequence
	}
	return nil
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

// chunk writes one SSE event.
func (o *output) chunk(text string, finish *string, u *usage, ext *Extension) error {
	if o.wErr != nil {
		return o.wErr
	}
	if !o.sent {
		h := o.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		o.w.WriteHeader(http.StatusOK)
	}
	resp := response{ID: o.id, Object: o.object(), Created: time.Now().Unix(), Model: o.s.cfg.ModelID, Usage: u, Edge: ext,
		Choices: []choice{o.choiceOf(text, finish, !o.sent)}}
	if u != nil && finish == nil {
		resp.Choices = []choice{}
	}
	o.sent = true
	b, _ := json.Marshal(resp)
	if _, err := fmt.Fprintf(o.w, "data: %s\n\n", b); err != nil {
		o.wErr = err
		return err
	}
	if f, ok := o.w.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

// finish writes the end of the response.
func (o *output) finish(res jobResult, ext *Extension) {
	if rest := o.filter.flush(); rest != "" && !o.filter.hit {
		o.text.WriteString(rest)
		if o.req.Stream {
			o.chunk(rest, nil, nil, nil)
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
			fmt.Fprintf(o.w, "data: %s\n\ndata: [DONE]\n\n", b)
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
		o.chunk("", &finish, cu, ext)
		if o.req.IncludeUsage {
			o.chunk("", nil, u, nil)
		}
		if o.wErr == nil {
			fmt.Fprint(o.w, "data: [DONE]\n\n")
		}
		return
	}
	resp := response{ID: o.id, Object: o.object(), Created: time.Now().Unix(), Model: o.s.cfg.ModelID, Usage: u, Edge: ext,
		Choices: []choice{o.choiceOf(o.text.String(), &finish, false)}}
	o.w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(o.w).Encode(resp)
}
