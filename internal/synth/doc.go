// Package synth writes synthetic llama-architecture GGUF models: random
// weights (a fixed seed gives a byte-identical file) in the shape of a real
// model, with a real tokenizer copied from a vocabulary GGUF. They stand in
// for models that cannot be downloaded here, for speed, memory and scaling
// work; they generate gibberish, never NaN or Inf. A family's shape also
// carries the family's chat format (Shape.Chat, chat.go): its
// tokenizer.chat_template and control tokens, added to the vocabulary.
//
//	err := synth.Write(ctx, synth.Options{Shape: synth.Shapes["tiny"], Type: gguf.Q4_0,
//		VocabPath: vocab, Seed: 1, Out: "tiny.gguf"}, nil)
//
// Memory is bounded: tensors are generated and quantized (through ggml, see
// kernels.QuantizeRows) in row chunks of at most ChunkElems elements per
// worker and streamed to a gguf.Writer; neither a tensor nor the model is ever
// held whole. Random values depend only on (seed, tensor, chunk), never on the
// number of workers. The output is written to OUT.tmp and renamed on success.
//
// Write is safe to call concurrently for different outputs.
package synth
