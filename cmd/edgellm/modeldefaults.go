package main

import "fmt"

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
