// Package logitlog records the logits a run sampled each token from, next to
// the prompt and the tokens, so that the run's quality can be measured
// offline against another model on the same tokens: the scenario runner
// teacher-forces a policy's tokens through the highest tier and reports the
// KL divergence (cmd/edgellm/internal/scenario, quality.go).
//
// The file is little-endian:
//
//	header: "EDGLOGT1" | u32 n_vocab | u32 n_prompt | i32 prompt[n_prompt]
//	record: f32 logits[n_vocab] | i32 token          (one per generated token)
//
// Each record is written with one system call as soon as its token is known,
// so a process killed mid-run (the OOM killer) leaves every finished record
// readable; Read drops a trailing partial record and says so.
package logitlog
