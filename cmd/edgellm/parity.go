package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/internal/parity"
)

func init() {
	register(&command{
		Name:    "parity",
		Summary: "compare the native engine's logits with llama.cpp's on the same model and tokens",
		Usage:   "[-m MODEL] [--kv-type T [--same-kv]] [-n N] [--repack] [--json]",
		Flags: func(fs *pflag.FlagSet) {
			addModelFlag(fs)
			addKVTypeFlag(fs)
			addThreadsFlag(fs)
			addJSONFlag(fs)
			fs.IntP("n", "n", 256, "greedy steps to compare")
			addAttentionFlag(fs)
			fs.Bool("repack", false, "repack the weights of both engines (like with like: the same interleaved kernels on both sides)")
			fs.Bool("same-kv", false, "give llama.cpp the native engine's quantized KV type too (default: compare against F16 KV); needs flash attention")
			addVerboseFlag(fs)
		},
		Run: runParity,
	})
}

type parityOptions struct {
	Model     string `koanf:"model"`
	KVType    string `koanf:"kv-type"`
	Threads   int    `koanf:"threads"`
	JSON      bool   `koanf:"json"`
	N         int    `koanf:"n"`
	Attention string `koanf:"attention"`
	Repack    bool   `koanf:"repack"`
	SameKV    bool   `koanf:"same-kv"`
	Verbose   bool   `koanf:"verbose"`
}

func runParity(c *cmdEnv, args []string) error {
	var o parityOptions
	if err := c.Decode(&o); err != nil {
		return err
	}
	if len(args) > 0 {
		return usagef("unexpected arguments %q", args)
	}
	if o.N < 1 {
		return usagef("--n %d: want at least 1", o.N)
	}
	kv, err := host.ParseKVType(o.KVType)
	if err != nil {
		return usagef("--kv-type: %v", err)
	}
	att, err := host.ParseAttention(o.Attention)
	if err != nil {
		return usagef("--attention: %v", err)
	}
	host.SetLog(c.Stderr, logLevel(o.Verbose))
	path, label, err := resolveModel(c, o.Model)
	if err != nil {
		return err
	}
	train, err := modelTrainCtx(path)
	if err != nil {
		return err
	}
	if train > 0 { // one prompt token (BOS), then -n greedy steps
		prompt := 1
		if err := fitLengths(c, train, length{"", "1 prompt token", &prompt}, length{"n", "-n", &o.N}); err != nil {
			return err
		}
	}
	r, err := parity.Parity(path, parity.Options{N: o.N, Threads: o.Threads, KVType: kv, Attention: att, Repack: o.Repack, SameKV: o.SameKV})
	if err != nil {
		return err
	}
	rp := ""
	if o.Repack {
		rp = ", weights repacked in both engines"
	}
	attn := fmt.Sprintf("%s attention in both engines", r.Attention)
	if att == host.AttentionEdgellm {
		attn = "edgellm attention in the native engine, flash in llama.cpp"
	}
	c.Logf("parity: %s, %d greedy steps, native KV %s, %s%s", label, o.N, kv, attn, rp)
	if o.JSON {
		enc := json.NewEncoder(c.Stdout)
		return enc.Encode(r)
	}
	fmt.Fprintf(c.Stdout, "n %d  top1_agreement %.4f  max_abs_logit_diff %.4g  kl_mean %.4g  kl_max %.4g  (native KV %s vs llama.cpp KV %s)\n",
		r.N, r.Top1Agreement, r.MaxAbsLogitDiff, r.KLMean, r.KLMax, r.KVType, r.RefKVType)
	return nil
}
