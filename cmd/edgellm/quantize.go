package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/edgellm/edgellm/host"
	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/edgellm/edgellm/kernels"
)

func init() {
	register(&command{
		Name:    "quantize",
		Summary: "quantize a GGUF model with llama.cpp (e.g. to a Q8_0 / Q5_K_S / Q4_K_M tier)",
		Usage:   "IN OUT TYPE",
		Flags: func(fs *pflag.FlagSet) {
			addThreadsFlag(fs)
			fs.Bool("pure", false, "quantize every tensor to TYPE (no llama.cpp mixes such as Q6_K output in Q4_K_M)")
			fs.Bool("allow-requantize", false, "allow re-quantizing tensors that are already quantized")
			addVerboseFlag(fs)
			addClampFlags(fs)
		},
		Run: runQuantize,
	})
}

type quantizeOptions struct {
	Threads         int  `koanf:"threads"`
	Pure            bool `koanf:"pure"`
	AllowRequantize bool `koanf:"allow-requantize"`
	Verbose         bool `koanf:"verbose"`
	clampOptions    `koanf:",squash"`
}

// runQuantize writes OUT; progress ("[ i/ n] tensor", one line per tensor as
// llama.cpp starts it) and a summary go to stderr. stdout stays empty.
func runQuantize(c *cmdEnv, args []string) error {
	var o quantizeOptions
	if err := c.Decode(&o); err != nil {
		return err
	}
	if len(args) != 3 {
		return usagef("want IN OUT TYPE, got %d argument(s); TYPE is one of %s", len(args), strings.Join(kernels.FileTypeNames(), ", "))
	}
	in, out, typ := args[0], args[1], args[2]
	ft, err := kernels.ParseFileType(typ)
	if err != nil {
		return usagef("TYPE %q: unknown (valid: %s)", typ, strings.Join(kernels.FileTypeNames(), ", "))
	}
	if o.Threads < 0 {
		return usagef("--threads %d: want ≥ 0", o.Threads)
	}
	inInfo, err := os.Stat(in)
	if err != nil {
		return fmt.Errorf("IN %s: %w", in, quantizeErrno(err))
	}
	host.SetLog(c.Stderr, logLevel(o.Verbose))
	if o.ClampOutliers {
		return runQuantizeClamped(c, o.clampOptions, in, out, typ)
	}
	width := 0
	start := time.Now()
	err = kernels.Quantize(in, out, kernels.QuantizeParams{
		FileType:        ft,
		Threads:         o.Threads,
		Pure:            o.Pure,
		AllowRequantize: o.AllowRequantize,
		Progress: func(i, n int, tensor string) {
			if width == 0 {
				width = len(fmt.Sprint(n))
			}
			c.Logf("[%*d/%*d] %s", width, i, width, n, tensor)
		},
	})
	if err != nil {
		return explainQuantizeError(err, in, ft.String())
	}
	outInfo, err := os.Stat(out)
	if err != nil {
		return err
	}
	c.Logf("quantized %s (%s) to %s: %s (%s, %.1f%%) in %s", in, quantizeMiB(inInfo.Size()), ft, out,
		quantizeMiB(outInfo.Size()), 100*float64(outInfo.Size())/float64(max(inInfo.Size(), 1)), time.Since(start).Round(time.Millisecond))
	return nil
}

// quantBlock is the row granularity of every quantized ggml type: legacy
// types quantize rows in blocks of 32, k-quants in 256 (llama.cpp falls a
// k-quant tensor whose rows are not a multiple of 256 back to a 32-block
// type, and fails when its rows are not a multiple of 32 either).
const quantBlock = 32

// explainQuantizeError names the tensor and the rule behind llama.cpp's bare
// "Unsupported tensor size encountered".
func explainQuantizeError(err error, in, typ string) error {
	if !strings.Contains(err.Error(), "Unsupported tensor size") {
		return err
	}
	f, ferr := gguf.Open(in)
	if ferr != nil {
		return err
	}
	for _, t := range f.Tensors {
		if len(t.Dims) >= 2 && t.Dims[0]%quantBlock != 0 {
			return fmt.Errorf("cannot quantize %s to %s: tensor %s has rows of %d elements, and %s quantizes rows in blocks of %d "+
				"(%d is not a multiple of %d): pad the model's rows (as shared/models/derived/stories260K-ff192 pads 172 to 192) or keep F16/F32",
				in, typ, t.Name, t.Dims[0], typ, quantBlock, t.Dims[0], quantBlock)
		}
	}
	return err
}

func quantizeMiB(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

// quantizeErrno drops *os.PathError's "stat PATH:" prefix (the caller names the file).
func quantizeErrno(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
