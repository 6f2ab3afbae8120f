package main

import (
	"fmt"
	"strings"

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

// fitCtx is the context length for a model trained with train tokens:
// min(default, train) when --ctx was not set, an error when --ctx was set
// above train.
func fitCtx(c *cmdEnv, ctx, train int) (int, error) {
	if train <= 0 {
		return 0, fmt.Errorf("the model states no training context length (GGUF <arch>.context_length): cannot choose --ctx")
	}
	if ctx <= train {
		return ctx, nil
	}
	if c.userSet("ctx") {
		return 0, usagef("--ctx %d is above the model's training context %d", ctx, train)
	}
	c.Logf("context: %d tokens (the model's training context; the default %d is above it)", train, ctx)
	return train, nil
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

// fitLengths fits parts (a prompt and a generation, say) into ctx, which
// is first fitted to the model's training context (fitCtx). Parts the user
// set are kept; when they do not fit it is a usage error naming the
// numbers. Parts left at their defaults share what the explicit ones leave,
// in proportion to their defaults, each at least 1; a line on stderr says
// what they became.
func fitLengths(c *cmdEnv, ctx *int, train int, parts ...length) error {
	var err error
	if *ctx, err = fitCtx(c, *ctx, train); err != nil {
		return err
	}
	fixed, soft, names := 0, 0, make([]string, 0, len(parts))
	for _, p := range parts {
		names = append(names, fmt.Sprintf("%s %d", p.flag, *p.v))
		if c.fixedLength(p) {
			fixed += *p.v
		} else {
			soft += *p.v
		}
	}
	if fixed+soft <= *ctx {
		return nil
	}
	room := *ctx - fixed
	if soft == 0 || room < len(parts) {
		return usagef("%s exceed the context %d", strings.Join(names, " + "), *ctx)
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
	c.Logf("lengths: %s (the defaults %s do not fit the context %d)", strings.Join(after, ", "), strings.Join(names, " + "), *ctx)
	return nil
}
