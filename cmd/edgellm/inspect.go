package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/edgellm/edgellm/internal/gguf"
	"github.com/spf13/pflag"
)

func init() {
	register(&command{
		Name:    "inspect",
		Summary: "describe a GGUF model: version, hyper-parameters, tokenizer, every tensor, totals",
		Usage:   "MODEL",
		Flags:   func(fs *pflag.FlagSet) { addJSONFlag(fs) },
		Run:     runInspect,
	})
}

type inspectOptions struct {
	JSON bool `koanf:"json"`
}

// inspectReport is the --json document. Field names are stable.
type inspectReport struct {
	File         string          `json:"file"`
	FileSize     int64           `json:"file_size"`
	Version      uint32          `json:"gguf_version"`
	Alignment    int64           `json:"alignment"`
	DataOffset   int64           `json:"data_offset"`
	PageSize     int             `json:"page_size"`
	Architecture string          `json:"architecture"`
	Name         string          `json:"name,omitempty"`
	FileType     *uint64         `json:"file_type,omitempty"`
	HParams      []inspectKV     `json:"hparams"` // <arch>.* keys, file order, prefix kept
	Tokenizer    inspectTok      `json:"tokenizer"`
	Metadata     []inspectKV     `json:"metadata"` // every KV; arrays summarised
	Tensors      []inspectTensor `json:"tensors"`
	Types        []inspectType   `json:"types"`
	Params       int64           `json:"params"`
	TensorBytes  int64           `json:"tensor_bytes"`
	NotPageAlign int             `json:"tensors_not_page_aligned"`
}

type inspectKV struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value,omitempty"` // scalars and strings
	Len   *int   `json:"len,omitempty"`   // arrays
}

type inspectTok struct {
	Model     string `json:"model,omitempty"`
	Pre       string `json:"pre,omitempty"`
	VocabSize int    `json:"vocab_size"`
	BOS       *int64 `json:"bos_token_id,omitempty"`
	EOS       *int64 `json:"eos_token_id,omitempty"`
	UNK       *int64 `json:"unk_token_id,omitempty"`
	PAD       *int64 `json:"pad_token_id,omitempty"`
	Merges    int    `json:"merges"`
}

type inspectTensor struct {
	Name        string  `json:"name"`
	Type        string  `json:"type"`
	Shape       []int64 `json:"shape"`  // ne[0] first
	Offset      int64   `json:"offset"` // absolute file offset
	PageAligned bool    `json:"page_aligned"`
	Bytes       int64   `json:"bytes"`
}

type inspectType struct {
	Type    string  `json:"type"`
	Count   int     `json:"count"`
	Bytes   int64   `json:"bytes"`
	Percent float64 `json:"percent_of_file"`
}

func runInspect(c *cmdEnv, args []string) error {
	var o inspectOptions
	if err := c.Decode(&o); err != nil {
		return err
	}
	if len(args) != 1 {
		return usagef("want one MODEL argument, got %d", len(args))
	}
	f, err := gguf.Open(args[0])
	if err != nil {
		return err
	}
	r := buildInspectReport(f, os.Getpagesize())
	if o.JSON {
		enc := json.NewEncoder(c.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	return printInspect(c.Stdout, r)
}

func kvEntry(kv gguf.KV) inspectKV {
	e := inspectKV{Key: kv.Key, Type: kv.Value.Type().String()}
	if kv.Value.IsArray() {
		n := kv.Value.Len()
		e.Type = "array[" + kv.Value.ElemType().String() + "]"
		e.Len = &n
	} else {
		e.Value = kv.Value.Interface()
	}
	return e
}

func buildInspectReport(f *gguf.File, pageSize int) *inspectReport {
	r := &inspectReport{
		File: f.Name, FileSize: f.FileSize, Version: f.Version, Alignment: f.Alignment,
		DataOffset: f.DataOffset, PageSize: pageSize, Architecture: f.Arch(),
		HParams: []inspectKV{}, Metadata: []inspectKV{}, Tensors: []inspectTensor{}, Types: []inspectType{},
	}
	r.Name, _ = f.GetString(gguf.KeyName)
	if ft, err := f.GetUint(gguf.KeyFileType); err == nil {
		r.FileType = &ft
	}
	for _, kv := range f.KV {
		e := kvEntry(kv)
		r.Metadata = append(r.Metadata, e)
		if r.Architecture != "" && strings.HasPrefix(kv.Key, r.Architecture+".") {
			r.HParams = append(r.HParams, e)
		}
	}
	// Tokenizer summary.
	t := &r.Tokenizer
	t.Model, _ = f.GetString("tokenizer.ggml.model")
	t.Pre, _ = f.GetString("tokenizer.ggml.pre")
	t.VocabSize, _ = f.GetArrayLen("tokenizer.ggml.tokens")
	t.Merges, _ = f.GetArrayLen("tokenizer.ggml.merges")
	id := func(key string) *int64 {
		if v, err := f.GetInt(key); err == nil {
			return &v
		}
		return nil
	}
	t.BOS, t.EOS = id("tokenizer.ggml.bos_token_id"), id("tokenizer.ggml.eos_token_id")
	t.UNK, t.PAD = id("tokenizer.ggml.unknown_token_id"), id("tokenizer.ggml.padding_token_id")

	// Tensors and totals by type.
	byType := map[gguf.Type]*inspectType{}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		pa := f.PageAlignedTo(ti, int64(pageSize))
		r.Tensors = append(r.Tensors, inspectTensor{Name: ti.Name, Type: ti.Type.String(), Shape: ti.Dims,
			Offset: f.AbsOffset(ti), PageAligned: pa, Bytes: ti.Size})
		if !pa {
			r.NotPageAlign++
		}
		tt := byType[ti.Type]
		if tt == nil {
			tt = &inspectType{Type: ti.Type.String()}
			byType[ti.Type] = tt
		}
		tt.Count++
		tt.Bytes += ti.Size
		r.TensorBytes += ti.Size
		r.Params += ti.Elements()
	}
	for _, tt := range byType {
		if f.FileSize > 0 {
			tt.Percent = float64(tt.Bytes) * 100 / float64(f.FileSize)
		}
		r.Types = append(r.Types, *tt)
	}
	sort.Slice(r.Types, func(i, j int) bool { return r.Types[i].Bytes > r.Types[j].Bytes })
	return r
}

func printInspect(w io.Writer, r *inspectReport) error {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("file          %s\n", r.File)
	p("size          %s (%d bytes)\n", humanBytes(r.FileSize), r.FileSize)
	p("gguf          version %d, alignment %d, data at offset %d\n", r.Version, r.Alignment, r.DataOffset)
	p("architecture  %s\n", r.Architecture)
	if r.Name != "" {
		p("name          %s\n", r.Name)
	}
	if r.FileType != nil {
		p("file type     %d\n", *r.FileType)
	}
	p("parameters    %d (%.2f M)\n", r.Params, float64(r.Params)/1e6)

	p("\nhyper-parameters\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, kv := range r.HParams {
		fmt.Fprintf(tw, "  %s\t%s\n", strings.TrimPrefix(kv.Key, r.Architecture+"."), kvText(kv))
	}
	tw.Flush()

	t := r.Tokenizer
	p("\ntokenizer\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  model\t%s\n  pre\t%s\n  vocab size\t%d\n  merges\t%d\n", orDash(t.Model), orDash(t.Pre), t.VocabSize, t.Merges)
	fmt.Fprintf(tw, "  bos / eos\t%s / %s\n  unk / pad\t%s / %s\n", idText(t.BOS), idText(t.EOS), idText(t.UNK), idText(t.PAD))
	tw.Flush()

	p("\ntensors (%d; offsets absolute; page = %d-byte page aligned)\n", len(r.Tensors), r.PageSize)
	// Names, types and shapes left-aligned, numbers right-aligned.
	nw, tyw, sw := len("name"), len("type"), len("shape")
	for _, ti := range r.Tensors {
		nw, tyw, sw = max(nw, len(ti.Name)), max(tyw, len(ti.Type)), max(sw, len(shapeText(ti.Shape)))
	}
	p("  %-*s  %-*s  %-*s  %12s  %4s  %12s\n", nw, "name", tyw, "type", sw, "shape", "offset", "page", "bytes")
	for _, ti := range r.Tensors {
		p("  %-*s  %-*s  %-*s  %12d  %4s  %12d\n", nw, ti.Name, tyw, ti.Type, sw, shapeText(ti.Shape), ti.Offset, yesNo(ti.PageAligned), ti.Bytes)
	}

	p("\ntotals by type\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "type\ttensors\tbytes\t%% of file\t\n")
	for _, tt := range r.Types {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t\n", tt.Type, tt.Count, tt.Bytes, tt.Percent)
	}
	fmt.Fprintf(tw, "all\t%d\t%d\t%.1f\t\n", len(r.Tensors), r.TensorBytes, pct(r.TensorBytes, r.FileSize))
	tw.Flush()
	if r.NotPageAlign > 0 {
		p("\nnote: %d of %d tensors do not start on a %d-byte page (fine for ggml; mmap residency is tracked per page)\n",
			r.NotPageAlign, len(r.Tensors), r.PageSize)
	}
	return nil
}

func kvText(kv inspectKV) string {
	if kv.Len != nil {
		return fmt.Sprintf("[%d × %s]", *kv.Len, strings.TrimSuffix(strings.TrimPrefix(kv.Type, "array["), "]"))
	}
	if s, ok := kv.Value.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(kv.Value)
}

func shapeText(d []int64) string {
	s := make([]string, len(d))
	for i, v := range d {
		s[i] = fmt.Sprint(v)
	}
	return "[" + strings.Join(s, " ") + "]"
}

func idText(p *int64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func pct(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) * 100 / float64(b)
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
