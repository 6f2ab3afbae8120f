package main

import (
	"fmt"
	"strings"

	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/internal/gguf"
)

// Defaults that fit the model. A default the user did not set must never be
// the reason a command fails on a model: where a default conflicts with the
// model it gives way (the smaller of the default and what the model
// allows); a value the user set explicitly (flag, environment or config
// file) that conflicts is an error naming both numbers.

// userSet reports whether key was set by a flag, the environment or a
// config file rather than left at its default.
func (c *cmdEnv) userSet(key string) bool {
	if c.Settings == nil {
		return false
	}
	_, src := c.Settings.Get(key)
	return src != "" && src != "default"
}

// ctxLimit is the largest context a command may use: the training context
// of the model (or of its draft, when that is smaller), and which model
// that is, for messages.
type ctxLimit struct {
	train int
	of    string // "the model", "the draft FILE"
}

func modelLimit(train int) ctxLimit { return ctxLimit{train, "the model"} }

// withDraft lowers l to the training context of a --draft model file
// (skip:N, self:TYPE and ngram drafts run in the target's context; a spec
// that does not parse is left to host.AttachDraft to report).
func (l ctxLimit) withDraft(draft string) (ctxLimit, error) {
	if draft == "" {
		return l, nil
	}
	path := host.DraftModelPath(draft)
	if path == "" {
		return l, nil
	}
	train, err := modelTrainCtx(path)
	if err != nil {
		return l, fmt.Errorf("--draft: %w", err)
	}
	if train > 0 && train < l.train {
		return ctxLimit{train, "the draft " + path}, nil
	}
	return l, nil
}

// fitCtx is the context length within lim by the one rule
// (host.SessionConfig.Fit): --ctx left at its default (host.DefaultNCtx)
// is min(default, lim.train); --ctx set above lim.train is a usage error
// naming both numbers.
func fitCtx(c *cmdEnv, ctx int, lim ctxLimit) (int, error) {
	if lim.train <= 0 {
		return 0, fmt.Errorf("the model states no training context length (GGUF <arch>.context_length): cannot choose --ctx")
	}
	asked := ctx
	if !c.userSet("ctx") {
		asked = 0 // the flag's default is host.DefaultNCtx: the rule's own
	}
	sc, err := host.SessionConfig{NCtx: asked}.Fit(lim.train)
	if err != nil {
		return 0, usagef("--ctx %d is above the training context %d of %s", ctx, lim.train, lim.of)
	}
	if asked == 0 && sc.NCtx < host.DefaultNCtx {
		c.Logf("context: %d tokens (the training context of %s; the default %d is above it)", sc.NCtx, lim.of, host.DefaultNCtx)
	}
	return sc.NCtx, nil
}

// fitNPredict is the number of tokens to generate: the default -n shrinks
// to what fits in the context after the prompt; an explicit -n is kept (the
// caller reports it if it does not fit).
func fitNPredict(c *cmdEnv, n, promptTokens, ctx int) int {
	if room := ctx - promptTokens; n > room && room >= 0 && !c.userSet("n-predict") {
		c.Logf("generating %d tokens (what fits in --ctx %d after the %d-token prompt; the default -n %d does not)", room, ctx, promptTokens, n)
		return room
	}
	return n
}

// modelTrainCtx is the training context the GGUF at path states
// (<arch>.context_length), read from its header before anything is loaded;
// 0 when it states none (the engines then refuse it with their own error).
func modelTrainCtx(path string) (int, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return 0, err
	}
	arch, err := f.GetString("general.architecture")
	if err != nil {
		return 0, nil
	}
	n, err := f.GetUint(arch + ".context_length")
	if err != nil {
		return 0, nil
	}
	return int(n), nil
}

// length is one part of a context to fit: its flag key (for userSet; ""
// for a part no flag sets, such as parity's one prompt token, which is
// fixed), its name in messages and a pointer to its value.
type length struct {
	key, flag string
	v         *int
}

func (c *cmdEnv) fixedLength(p length) bool { return p.key == "" || c.userSet(p.key) }

// fitLengths fits parts (a prompt and a generation, say) into ctx (a
// context already fitted to the model: fitCtx, or its training context for
// a command without --ctx). Parts the user
// set are kept; when they do not fit it is a usage error naming the
// numbers. Parts left at their defaults share what the explicit ones leave,
// in proportion to their defaults, each at least 1; a line on stderr says
// what they became.
func fitLengths(c *cmdEnv, ctx int, parts ...length) error {
	fixed, soft, names := 0, 0, make([]string, 0, len(parts))
	for _, p := range parts {
		if p.key == "" {
			names = append(names, p.flag) // a fixed part names its own number
		} else {
			names = append(names, fmt.Sprintf("%s %d", p.flag, *p.v))
		}
		if c.fixedLength(p) {
			fixed += *p.v
		} else {
			soft += *p.v
		}
	}
	if fixed+soft <= ctx {
		return nil
	}
	room := ctx - fixed
	if soft == 0 || room < len(parts) {
		return usagef("%s exceed the context %d", strings.Join(names, " + "), ctx)
	}
	var after []string
	left := room
	for i, p := range parts {
		if c.fixedLength(p) {
			continue
		}
		share := *p.v * room / soft
		if i == len(parts)-1 || share > left {
			share = left
		}
		*p.v = max(1, share)
		left -= *p.v
		after = append(after, fmt.Sprintf("%s %d", p.flag, *p.v))
	}
	c.Logf("lengths: %s (the defaults %s do not fit the context %d)", strings.Join(after, ", "), strings.Join(names, " + "), ctx)
	return nil
}

// fitSwap fits bench --swap's context to the first tier's training context
// and --ctx-tokens, plus the one check token, into it.
func (o *benchOptions) fitSwap(c *cmdEnv) error {
	train, err := modelTrainCtx(o.Tiers[0])
	if err != nil {
		return err
	}
	if o.Ctx, err = fitCtx(c, o.Ctx, modelLimit(train)); err != nil {
		return err
	}
	check := 1
	return fitLengths(c, o.Ctx, length{"ctx-tokens", "--ctx-tokens", &o.CtxTokens}, length{"", "1 check token", &check})
}
