package scenario

import "fmt"

// Serve, when a scenario has it, runs each policy as `edgellm serve`
// instead of `edgellm run`: the runner is also the server's client, sending
// a steady stream of completion requests (Spec.Prompt, greedy, MaxTokens
// each; one at a time, the next as soon as one ends) until the server has
// generated Spec.N tokens, then stops the server with SIGINT. Token
// positions (hogs' and thermal steps' at_token, the token gate, the
// timeline) count the server's tokens across requests.
type Serve struct {
	MaxTokens int `yaml:"max_tokens"` // per request
}

func (sv *Serve) validate(s *Spec) error {
	if sv.MaxTokens < 1 || sv.MaxTokens > s.N {
		return fmt.Errorf("serve.max_tokens %d: want 1–%d (n)", sv.MaxTokens, s.N)
	}
	return nil
}

// ServeOutcome is what the client saw of a server run.
type ServeOutcome struct {
	Addr      string `json:"addr"`
	Requests  int    `json:"requests"`  // sent
	Completed int    `json:"completed"` // answered 200 with their tokens
	Failed    int    `json:"failed"`    // any other answer, or the connection broke
	Tokens    int    `json:"tokens"`    // completion tokens the answers reported
	// FirstError is the first failed request's error ("" if none).
	FirstError string `json:"first_error,omitempty"`
}
