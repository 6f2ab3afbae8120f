package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/edgellm/edgellm/cmd/edgellm/internal/serve"
	"github.com/edgellm/edgellm/host"
	"github.com/spf13/pflag"
)

func init() {
	register(&command{
		Name:    "serve",
		Summary: "an OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions) with the policy live",
		Usage:   "[-m MODEL] [--policy P] [--sensors S] [--addr 127.0.0.1:8080]",
		Flags: func(fs *pflag.FlagSet) {
			addModelFlag(fs)
			fs.String("addr", "127.0.0.1:8080", "listen address (loopback by default: say 0.0.0.0:PORT to serve the network)")
			fs.String("api-key", "", "require 'Authorization: Bearer KEY' on /v1 and /metrics (settings key api-key)")
			fs.String("cors-origin", "", "send Access-Control-Allow-Origin with this value and accept browser requests from it ('' = CORS off)")
			fs.StringSlice("allow-origin", nil, "also accept browser requests from these origins (scheme://host[:port]; '*' = any); others get 403")
			fs.StringSlice("allow-host", nil, "also accept these Host header names (IP addresses and localhost always are; '*' = any: no DNS-rebinding guard)")
			fs.Bool("insecure-no-api-key", false, "allow serving beyond loopback without --api-key (refused otherwise)")
			fs.Int("queue", 8, "requests that may wait while one runs; more get 429 with Retry-After")
			fs.Duration("request-timeout", 5*time.Minute, "per-request time limit, queue wait included")
			fs.Int64("max-body", 1<<20, "largest request body in bytes")
			fs.Int("default-max-tokens", 256, "max_tokens when a request does not set it (capped by the context)")
			addSamplingFlags(fs)
			addThreadsFlag(fs)
			addCtxFlag(fs)
			addKVTypeFlag(fs)
			addAttentionFlag(fs)
			addEngineFlag(fs)
			addTierFlags(fs)
			addPolicyFlags(fs)
			addLayerSetFlags(fs)
			fs.Bool("no-mmap", false, "read weights into anonymous memory instead of mapping the file")
			addServeHookFlags(fs)
			addVerboseFlag(fs)
		},
		Run: runServe,
	})
}

type serveOptions struct {
	Addr             string        `koanf:"addr"`
	APIKey           string        `koanf:"api-key"`
	CORSOrigin       string        `koanf:"cors-origin"`
	AllowOrigins     []string      `koanf:"allow-origin"`
	AllowHosts       []string      `koanf:"allow-host"`
	InsecureNoKey    bool          `koanf:"insecure-no-api-key"`
	Queue            int           `koanf:"queue"`
	RequestTimeout   time.Duration `koanf:"request-timeout"`
	MaxBody          int64         `koanf:"max-body"`
	DefaultMaxTokens int           `koanf:"default-max-tokens"`
}

type serveRunOptions struct {
	runOptions   `koanf:",squash"`
	serveOptions `koanf:",squash"`
}

// runServe loads the model, opens the one session, attaches the policy and
// serves until interrupted.
func runServe(c *cmdEnv, args []string) error {
	var o serveRunOptions
	if err := c.Decode(&o); err != nil {
		return err
	}
	if len(args) > 0 {
		return usagef("unexpected argument %q", args[0])
	}
	if o.Queue < 1 || o.RequestTimeout <= 0 || o.MaxBody < 1 || o.DefaultMaxTokens < 1 {
		return usagef("--queue %d, --request-timeout %v, --max-body %d, --default-max-tokens %d: each must be > 0",
			o.Queue, o.RequestTimeout, o.MaxBody, o.DefaultMaxTokens)
	}
	ro := o.runOptions
	var err error
	if ro.kv, err = host.ParseKVType(ro.KVType); err != nil {
		return usagef("--kv-type: %v", err)
	}
	if ro.att, err = host.ParseAttention(ro.Attention); err != nil {
		return usagef("--attention: %v", err)
	}
	ro.sampling = ro.params()
	if err := ro.sampling.Validate(); err != nil {
		return usagef("%v", err)
	}
	host.SetLog(c.Stderr, logLevel(ro.Verbose))
	modelPath := ""
	if len(ro.Tiers) > 0 {
		modelPath = ro.Tiers[0]
	} else if modelPath, _, err = resolveModel(c, ro.Model); err != nil {
		return err
	} else {
		ro.Model = modelPath
	}
	eng, _, err := loadRunModel(c, &ro)
	if err != nil {
		return err
	}
	defer eng.Close()
	sc := host.SessionConfig{NCtx: ro.Ctx, Threads: ro.Threads, KVType: ro.kv, Attention: ro.att}
	sess, err := eng.NewSession(sc)
	if err != nil {
		return err
	}
	defer sess.Close()
	var adapter *host.Adapter
	desc := "none"
	if ro.policyOptions.enabled() {
		if adapter, err = startPolicy(c, ro.policyOptions, eng, sess, sc); err != nil {
			return err
		}
		defer stopPolicy(c, adapter)
		desc = ro.Policy + " (" + adapter.Describe() + ")"
	}
	hooks, err := openServeHooks(ro, eng)
	if err != nil {
		return err
	}
	tmpl := eng.Info().ChatTemplate
	cfg := serve.Config{
		ModelID: modelID(modelPath), ChatTemplate: tmpl, Queue: o.Queue, RequestTimeout: o.RequestTimeout,
		MaxBodyBytes: o.MaxBody, DefaultMaxTokens: o.DefaultMaxTokens, APIKey: o.APIKey, CORSOrigin: o.CORSOrigin,
		AllowOrigins: o.AllowOrigins, AllowHosts: o.AllowHosts, Logf: c.Logf,
		Sampling: ro.sampling, NCtx: min(ro.Ctx, eng.Info().NCtxTrain), EngineName: eng.Name(), PolicyDesc: desc,
		KVType: fmt.Sprint(ro.kv),
	}
	if hooks != nil {
		hooks.begin(adapter)
		cfg.OnToken = hooks.onToken
	}
	srv := serve.New(cfg, eng, sess, adapter)
	err = listenAndServe(c, o.serveOptions, srv, tmpl != "")
	if hooks != nil {
		if herr := hooks.end(srv.GeneratedTokens(), err); err == nil {
			err = herr
		}
	}
	return err
}

// listenAndServe serves until c.Ctx ends, then shuts down: requests in
// flight are cancelled (their contexts end) and the worker stops.
func listenAndServe(c *cmdEnv, o serveOptions, srv *serve.Server, hasTmpl bool) error {
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return fmt.Errorf("--addr %s: %w", o.Addr, err)
	}
	if host, _, _ := net.SplitHostPort(ln.Addr().String()); !net.ParseIP(host).IsLoopback() && o.APIKey == "" {
		if !o.InsecureNoKey {
			ln.Close()
			return usagef("--addr %s serves beyond loopback: set --api-key, or say --insecure-no-api-key to serve it unauthenticated", o.Addr)
		}
		c.Logf("warning: serving %s beyond loopback without --api-key (--insecure-no-api-key)", ln.Addr())
	}
	tmplNote := "the plain template (the model has no tokenizer.chat_template)"
	if hasTmpl {
		tmplNote = "the model's tokenizer.chat_template when llama.cpp recognises it, else the plain template"
	}
	c.Logf("serving on http://%s (chat: %s)", ln.Addr(), tmplNote)
	// Not a child of c.Ctx: SIGINT cancels c.Ctx with its own cause; this
	// one ends with ErrShutdown, which the streams in flight report.
	ctx, cancelCause := context.WithCancelCause(context.WithoutCancel(c.Ctx))
	cancel := func() { cancelCause(serve.ErrShutdown) }
	defer cancel()
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case <-c.Ctx.Done():
	case err = <-errc:
	}
	cancel()
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	hs.Shutdown(sctx)
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// modelID is the model's file name without .gguf.
func modelID(path string) string {
	return strings.TrimSuffix(filepath.Base(path), ".gguf")
}
