package native

import (
	"fmt"
	"math"

	"github.com/edgellm/edgellm/kernels"
)

// The llama forward pass as one ggml graph for a batch of tokens, after
// llama.cpp's llm_build_llama (src/models/llama.cpp) and Karpathy's llama2.c:
//
//	x = embd[tokens]
//	for each layer:
//	    h = rmsnorm(x) * attn_norm
//	    q, k, v = Wq h, Wk h, Wv h            ; RoPE(q), RoPE(k) at the token positions
//	    K[slot], V[slot] = k, v               ; set_rows into the KV arena
//	    a = softmax(q Kᵀ / √d + mask) V       ; grouped-query: n_head/n_head_kv q heads per kv head
//	    x = x + Wo a
//	    x = x + Wdown (silu(Wgate h') * Wup h'), h' = rmsnorm(x) * ffn_norm
//	logits = Wout (rmsnorm(x) * out_norm)     ; only for the requested rows
//
// Inputs are tensors the graph allocator places and the session fills before
// each compute; the graph itself is reused while its shape key is unchanged
// (see RATIONALE.md).

// graphKey is everything that changes a graph's shape or its weights.
type graphKey struct {
	nTok, nKV, nOut int
	selGen          uint64 // weight-set selection generation
	repackGen       uint64 // Engine.repackGen: which tensors are repacked
	// Per-layer windows (ring.go): ringGen is the generation of the
	// layer→ring map; nKV is ring 0's attended length, nKVRing[r-1] ring r's.
	ringGen uint64
	nKVRing [maxRings - 1]int32
}

// nKVOf is ring r's attended KV length.
func (k *graphKey) nKVOf(r int) int {
	if r == 0 {
		return k.nKV
	}
	return int(k.nKVRing[r-1])
}

func (k *graphKey) setNKV(r, n int) {
	if r == 0 {
		k.nKV = n
	} else {
		k.nKVRing[r-1] = int32(n)
	}
}

// graph is a built, allocated graph and its input/output tensors.
type graph struct {
	key    graphKey
	ctx    *kernels.GGMLContext
	g      *kernels.Graph
	tokens kernels.Tensor // I32 [n_tok]
	pos    kernels.Tensor // I32 [n_tok]
	// Per KV ring (one per distinct layer window, ring.go):
	slots [maxRings]kernels.Tensor // I64 [n_tok]: KV slot of each token
	mask  [maxRings]kernels.Tensor // F16 [n_kv_r, n_tok]: 0 visible, -inf hidden
	// maskSWA is ring r's mask narrowed to the trained window, for the
	// sliding layers (Config.IsSWA; zero without them), family.go.
	maskSWA [maxRings]kernels.Tensor
	// ringOf is each layer's ring, set by the session before build (nil:
	// every layer on ring 0).
	ringOf []uint8
	outIDs kernels.Tensor // I32 [n_out] batch rows that produce logits; zero when all
	outPos kernels.Tensor // I32 [n_out] their positions (the last layer's q)
	// ownKernels (Options.Kernels "edgellm"): weight matmuls go through
	// matmul to edgellm's kernels where they apply.
	ownKernels bool
	// ownAttn (SessionConfig.Attention edgellm): flash attention runs
	// edgellm's kernel (kernels.AttnEdgellm) where it applies.
	ownAttn bool
	// untrimmed: the last layer computes q, attention and the output
	// projection for every row and then keeps the rows that want logits
	// (llama.cpp's order, which TestLastLayerTrim compares against);
	// false (every session graph): only for those rows.
	untrimmed bool
	logits    kernels.Tensor // F32 [n_vocab, n_out]

	// own are the q4x4 copies the ownKernels matmuls read (nil: none).
	own *ownLayouts

	// layerEnd[il] is the number of graph nodes up to the end of layer il
	// (nodes [layerEnd[il-1], layerEnd[il]) are layer il's; before layer 0
	// come layerStart embedding nodes): per-layer latency, latency.go.
	layerEnd   []int
	layerStart int
}

// ringUsed reports which rings the first nLayers layers use.
func (g *graph) ringUsed(nLayers int) [maxRings]bool {
	var used [maxRings]bool
	if g.ringOf == nil {
		used[0] = true
		return used
	}
	for _, r := range g.ringOf[:min(nLayers, len(g.ringOf))] {
		used[r] = true
	}
	return used
}

// graphNodes bounds the nodes (and tensors) of one graph.
func graphNodes(nLayer int) int { return 64*nLayer + 128 }

// newGraph makes the session's graphs (its own, draft passes', verify
// sizes', measured ones): each uses the engine's kernel choice.
func (s *Session) newGraph() (*graph, error) {
	g, err := newGraph(s.cfg.NLayer)
	if err == nil {
		g.ownKernels = s.eng.opts.Kernels == KernelsEdgellm
		g.ownAttn = s.ownAttn
		g.own = s.eng.own
	}
	return g, err
}

func newGraph(nLayer int) (*graph, error) {
	n := graphNodes(nLayer)
	ctx, err := kernels.NewGGMLContext(n, n)
	if err != nil {
		return nil, err
	}
	return &graph{ctx: ctx, layerEnd: make([]int, 0, nLayer)}, nil
}

func (g *graph) Close() error { return g.ctx.Close() }

// build records the forward graph for key into g. layers gives each layer's
// weights (the selected set); w supplies the embedding and head.
func (g *graph) build(key graphKey, cfg *Config, w *Weights, layers []*LayerWeights, kv *KVArena, flash bool) error {
	c := g.ctx
	c.Reset()
	g.key = graphKey{}
	nTok := int64(key.nTok)
	hd, nh, nhkv := int64(cfg.HeadDim), int64(cfg.NHead), int64(cfg.NHeadKV)
	embdKV := int64(cfg.NEmbdKV())

	input := func(typ kernels.GGMLType, name string, ne ...int64) kernels.Tensor {
		t, err := c.NewTensor(typ, ne...)
		if err != nil {
			return kernels.Tensor{}
		}
		t.SetName(name)
		t.SetInput()
		return t
	}
	g.tokens = input(kernels.GGMLTypeI32, "inp_tokens", nTok)
	g.pos = input(kernels.GGMLTypeI32, "inp_pos", nTok)
	// Inputs only for the rings this graph's layers use: a skip:N draft
	// pass runs the first N layers, and a ring of deeper layers only would
	// be an input outside the graph, never allocated (ringUsed).
	used := g.ringUsed(len(layers))
	for r := range maxRings {
		g.slots[r], g.mask[r], g.maskSWA[r] = kernels.Tensor{}, kernels.Tensor{}, kernels.Tensor{}
		if !used[r] {
			continue
		}
		sfx := ""
		if r > 0 {
			sfx = fmt.Sprintf("_r%d", r)
		}
		g.slots[r] = input(kernels.GGMLTypeI64, "inp_kv_slots"+sfx, nTok)
		g.mask[r] = input(kernels.GGMLTypeF16, "inp_kq_mask"+sfx, int64(key.nKVOf(r)), nTok)
		g.maskSWA[r] = kernels.Tensor{}
		if cfg.NSWA > 0 {
			g.maskSWA[r] = input(kernels.GGMLTypeF16, "inp_kq_mask_swa"+sfx, int64(key.nKVOf(r)), nTok)
		}
	}
	g.outIDs, g.outPos = kernels.Tensor{}, kernels.Tensor{}
	if key.nOut < key.nTok {
		// the last nOut rows of the batch (Session.decode)
		g.outIDs = input(kernels.GGMLTypeI32, "inp_out_ids", int64(key.nOut))
		if !g.untrimmed {
			g.outPos = input(kernels.GGMLTypeI32, "inp_out_pos", int64(key.nOut))
		}
	}
	if g.g == nil {
		g.g = new(kernels.Graph)
	}
	if err := c.InitGraph(g.g, graphNodes(cfg.NLayer)); err != nil {
		return err
	}
	gr := g.g
	for r := range maxRings {
		if !g.maskSWA[r].Nil() {
			// Both masks of a ring are filled every step: keep both in the
			// graph (allocated) even when only sliding or only global
			// layers use the ring, or a draft pass runs none of one kind.
			gr.Expand(g.mask[r])
			gr.Expand(g.maskSWA[r])
		}
	}

	fam := cfg.Fam
	rope := kernels.RopeParams{NDims: cfg.HeadDim, Mode: fam.RopeMode, NCtxOrig: cfg.NCtxOrig,
		FreqBase: cfg.RopeBase, FreqScale: cfg.RopeScale, AttnFactor: cfg.RopeAttnFactor, BetaFast: 32, BetaSlow: 1}
	freqs := w.RopeFreqs // llama-3 rope_freqs
	if cfg.LongRoPE {
		// Phi-3 LongRoPE: the long factors for a context past the original
		// one (llama.cpp's get_rope_factors with n_ctx_seq = the session's).
		freqs = w.RopeShort
		if kv.NSlots > cfg.NCtxOrig {
			freqs = w.RopeLong
		}
	}
	// The attention scale goes into the softmax (llama, Qwen) or onto q
	// before it (Gemma, Phi-3), as each family's llama.cpp graph does.
	kqScale := cfg.AttnScale
	if fam.QPreScale {
		kqScale = 1
	}
	last := func(il int) bool { return il == len(layers)-1 && !g.outIDs.Nil() }
	norm := func(t, wt kernels.Tensor) kernels.Tensor { return c.Mul(c.RMSNorm(t, cfg.NormEps), wt) }

	nOut := int64(key.nOut)
	x := c.GetRows(w.TokEmbd, g.tokens) // [n_embd, n_tok]
	if fam.EmbdScale {
		x = c.Scale(x, float32(math.Sqrt(float64(cfg.NEmbd))))
	}
	gr.Expand(x)
	g.layerStart, g.layerEnd = gr.NNodes(), g.layerEnd[:0]
	for il, l := range layers {
		// this layer's KV ring: its slots, mask and attended length; a
		// trained sliding layer's mask also hides what is past its window
		r := 0
		if g.ringOf != nil {
			r = int(g.ringOf[il])
		}
		slots, mask, nKV := g.slots[r], g.mask[r], int64(key.nKVOf(r))
		if cfg.IsSWA(il) {
			mask = g.maskSWA[r]
		}
		// In the last layer only the rows that want logits go on past
		// storing K and V: their q, attention and output projection (each
		// row's arithmetic is the same as in the whole batch; llama.cpp
		// trims after the output projection, computing nTok-nOut rows of
		// q, attention and Wo for nothing).
		nQ, posQ, hq := nTok, g.pos, func(h kernels.Tensor) kernels.Tensor { return h }
		if last(il) && !g.untrimmed {
			nQ, posQ = nOut, g.outPos
			hq = func(h kernels.Tensor) kernels.Tensor { return c.GetRows(h, g.outIDs) }
			// the mask rows of the last nOut tokens
			mask = c.View(mask, (nTok-nOut)*mask.Nb(1), []int64{nKV, nOut}, []int64{mask.Nb(1)})
		}

		// attention rmsnorm
		h := norm(x, l.AttnNorm)

		// q, k, v projections (fused: views of one product), biases, per-head
		// q/k norms, RoPE
		var q, k, v kernels.Tensor
		if fam.FusedQKV {
			qkv := g.matmul(c, l.Wqkv, h) // [(n_head+2 n_head_kv) hd, n_tok]
			f32 := int64(4)
			q = c.View(qkv, 0, []int64{hd, nh, nTok}, []int64{hd * f32, qkv.Nb(1)})
			if nQ < nTok {
				q = c.View(qkv, 0, []int64{hd * nh, nTok}, []int64{qkv.Nb(1)})
				q = c.Reshape(hq(q), hd, nh, nQ)
			}
			k = c.View(qkv, hd*nh*f32, []int64{hd, nhkv, nTok}, []int64{hd * f32, qkv.Nb(1)})
			// v stays a strided view: set_rows reads it row by row (no
			// copy, as llama.cpp's cpy_v)
			v = c.View(qkv, (hd*nh+embdKV)*f32, []int64{embdKV, nTok}, []int64{qkv.Nb(1)})
		} else {
			q, k, v = g.matmul(c, l.Wq, hq(h)), g.matmul(c, l.Wk, h), g.matmul(c, l.Wv, h)
			if !l.Bq.Nil() {
				q = c.Add(q, l.Bq)
			}
			if !l.Bk.Nil() {
				k = c.Add(k, l.Bk)
			}
			if !l.Bv.Nil() {
				v = c.Add(v, l.Bv) // [embd_kv, n_tok]
			}
			q = c.Reshape(q, hd, nh, nQ)
			k = c.Reshape(k, hd, nhkv, nTok)
		}
		if fam.QKNorm {
			q, k = norm(q, l.QNorm), norm(k, l.KNorm)
		}
		rope.FreqBase, rope.FreqScale = cfg.ropeOf(il)
		q = c.RopeExt(q, posQ, freqs, &rope)
		k = c.RopeExt(k, g.pos, freqs, &rope)
		if fam.QPreScale {
			q = c.Scale(q, cfg.AttnScale)
		}

		// store k and v at the tokens' slots (quantizing for Q8_0/Q4_0)
		gr.Expand(c.SetRows(kv.K[il], c.Reshape(k, embdKV, nTok), slots))
		gr.Expand(c.SetRows(kv.V[il], v, slots))

		// attend over the first nKV slots
		kc, vc := g.cacheView(kv, il, cfg, nKV)
		qp := c.Permute(q, 0, 2, 1, 3) // [hd, n_q, n_head]
		var a kernels.Tensor
		if flash {
			if kc.Type() == kernels.GGMLTypeF32 {
				kc, vc = c.Cast(kc, kernels.GGMLTypeF16), c.Cast(vc, kernels.GGMLTypeF16)
			}
			if g.ownAttn { // edgellm's attention where eligible (F16 cache), else ggml's
				a = c.AttnEdgellm(qp, kc, vc, mask, kqScale, cfg.AttnSoftcap)
			} else {
				a = c.FlashAttnExtCap(qp, kc, vc, mask, kqScale, cfg.AttnSoftcap) // [hd, n_head, n_q]
			}
			c.SetPrecF32(a)
			a = c.Reshape(a, hd*nh, nQ)
		} else {
			kq := c.MulMat(kc, qp) // [n_kv, n_q, n_head]
			c.SetPrecF32(kq)
			if cfg.AttnSoftcap != 0 { // Gemma 2: cap·tanh(kq/cap)
				kq = c.Scale(c.Tanh(c.Scale(kq, 1/cfg.AttnSoftcap)), cfg.AttnSoftcap)
			}
			kq = c.SoftMaxExt(kq, mask, kqScale)
			if vc.Type() != kernels.GGMLTypeF32 && vc.Type() != kernels.GGMLTypeF16 {
				vc = c.Cast(vc, kernels.GGMLTypeF32)
			}
			vt := c.Cont(c.Transpose(vc)) // [n_kv, hd, n_head_kv]
			kqv := c.MulMat(vt, kq)       // [hd, n_q, n_head]
			a = c.Cont(c.Permute(kqv, 0, 2, 1, 3), hd*nh, nQ)
		}
		a = g.matmul(c, l.Wo, a)

		if last(il) {
			if g.untrimmed {
				a = c.GetRows(a, g.outIDs)
			}
			x = c.GetRows(x, g.outIDs) // the residual of those rows
		}
		if fam.PostNorms {
			a = norm(a, l.PostAttnNorm)
		}
		x = c.Add(a, x)

		// gated feed-forward: SwiGLU, GeGLU (Gemma) or SwiGLU over a fused
		// gate-up product (Phi-3)
		h = norm(x, l.FFNNorm)
		var f kernels.Tensor
		switch {
		case fam.FusedGateUp:
			f = c.SwiGLU(g.matmul(c, l.WUp, h))
		case fam.GeGLU:
			f = c.GeGLUSplit(g.matmul(c, l.WGate, h), g.matmul(c, l.WUp, h))
		default:
			f = c.SwiGLUSplit(g.matmul(c, l.WGate, h), g.matmul(c, l.WUp, h))
		}
		ffn := g.matmul(c, l.WDown, f)
		if fam.PostNorms {
			ffn = norm(ffn, l.PostFFNNorm)
		}
		x = c.Add(ffn, x)
		gr.Expand(x)
		g.layerEnd = append(g.layerEnd, gr.NNodes())
	}
	x = c.Mul(c.RMSNorm(x, cfg.NormEps), w.OutNorm)
	g.logits = g.matmul(c, w.Output, x) // [n_vocab, n_out]
	if cfg.FinalSoftcap != 0 {          // Gemma 2: cap·tanh(logits/cap)
		g.logits = c.Scale(c.Tanh(c.Scale(g.logits, 1/cfg.FinalSoftcap)), cfg.FinalSoftcap)
	}
	if err := c.Err(); err != nil {
		return err
	}
	g.logits.SetName("result_output")
	g.logits.SetOutput()
	if err := gr.Expand(g.logits); err != nil {
		return err
	}
	g.key = key
	return nil
}

// matmul is a weight matrix times activations: ggml's mul_mat, or with
// ownKernels edgellm's kernels (kernels.MulMatEdgellm, which itself keeps
// ggml's for what they do not take).
func (g *graph) matmul(c *kernels.GGMLContext, w, x kernels.Tensor) kernels.Tensor {
	if g.ownKernels {
		if p := g.own.lookup(w); p != nil {
			return c.MulMatEdgellmQ4x4(w, x, p)
		}
		return c.MulMatEdgellm(w, x)
	}
	return c.MulMat(w, x)
}

// cacheView returns K and V of layer il over slots [0, nKV) as
// [hd, n_kv, n_head_kv] tensors ready for attention. Per-head views when
// head_dim fills whole quantization blocks; otherwise whole rows are
// dequantized to F32 first.
func (g *graph) cacheView(kv *KVArena, il int, cfg *Config, nKV int64) (kernels.Tensor, kernels.Tensor) {
	c := g.ctx
	hd, nhkv := int64(cfg.HeadDim), int64(cfg.NHeadKV)
	embdKV := hd * nhkv
	view := func(t kernels.Tensor) kernels.Tensor {
		if kv.WholeRow {
			rows := c.View(t, 0, []int64{embdKV, nKV}, []int64{t.Nb(1)})
			return c.Permute(c.Reshape(c.Cast(rows, kernels.GGMLTypeF32), hd, nhkv, nKV), 0, 2, 1, 3)
		}
		v := c.View(t, 0, []int64{hd, nhkv, nKV}, []int64{t.Type().RowSize(hd), t.Nb(1)})
		return c.Permute(v, 0, 2, 1, 3)
	}
	return view(kv.K[il]), view(kv.V[il])
}
