// Package lift turns ONNX graphs back into attnrun models: it recognizes
// the attention structures of a graph (a PyTorch export, typically) and
// rebuilds them as attnrun layers carrying the graph's weights, with a
// config that can be edited, run, exported and cross-checked like any
// other. It is what `attnrun import` runs.
//
//	m, err := onnxio.ReadModel("attention.onnx")
//	if err != nil { ... }
//	res, err := lift.Lift(m) // *lift.UnliftedError names what cannot be lifted
//	if err != nil { ... }
//	fmt.Print(res.Config)    // the model config, YAML
//	y, err := res.Model.Forward(nil, x)
//
// # Structure, not names
//
// PyTorch's exporter renames the transposed copy of an nn.Linear weight to
// onnx::MatMul_NN, folds or keeps shape arithmetic depending on the opset
// and on dynamic axes, and spells head splits with any mix of Reshape,
// Transpose, Slice and Gather. So nothing is recognized by name. Each
// Softmax is followed back to the product of queries and keys (through
// scaling by Div or Mul, and masks by Where or Add) and forward to the
// product with the values; each operand back to its projection (MatMul by
// a constant, with an Add of a bias, or Gemm; a packed in_proj sliced in
// three); the result forward through the heads' merge to an output
// projection. Residual Adds, Concat, learned position tables, the causal
// average, LayerNorm (LayerNormalization or its opset-13 decomposition),
// RMSNorm, the GELU (exact, with Erf, and its tanh approximation) and the
// MLP of a transformer block (two Linears around an activation, or
// Llama's gated three, as one nn.mlp) are recognized the same way, and so
// are the embeddings of whole models (Gather of a table by int64 ids).
//
// Masks are read as Hugging Face writes them: a mask fill of -inf, -1e9,
// finfo.min or -10000 (GPT-2's masked_bias); an attention_mask of 1s and
// 0s (int64, int32 or float32) added to the scores as (1 - m) * -10000,
// after a causal Where or not, becomes a mask.padding layer (shared by
// every attention that reads it) feeding attention.sdpa with mask: bool,
// mask_polarity: keep. Such inputs, and every int64 input, keep their type
// in the lifted config ({name, dtype: int64}).
//
// ONNX Runtime's own test graphs are read too: weights declared as graph
// inputs (param_inputs.go: parameters loaded from those inputs on every
// run), a Linear on the flattened (B·T, d) tokens, heads merged without an
// output projection (an identity out_proj), the sequence lengths of a 1-D
// mask_index (mask.lengths), an output laid out sequence-first
// (nn.transpose after the attention), float16 graphs whose Casts to and
// from float32 are read as copies (casts.go: the layers compute in
// float32, the self-check is at float16's precision), and outputs beside
// the model's that are other layers' outputs (BERT's pooled output:
// Output.Layer).
//
// A graph is read as ONNX Runtime runs it: nodes out of topological order
// in dependency order, a value name written twice as the last writer's
// value (graph.InOrder); two-operand Einsums that are matrix products
// (Keras and tf2onnx attention) as MatMul with Transpose and Reshape
// (einsum.go). Result.Notes says so; the self-check runs the graph as
// written.
//
// # An engine over patterns
//
// Those other layers are not recognized here: each layer registers its
// own lift pattern next to its code (layers/linear_lift.go,
// layers/mlp_lift.go, ...), through the public API of package
// onnxio/match that layers from other modules use too (see
// examples/cosine). Lift runs the attention recognizers on every Softmax
// and Attention node first, then offers every node no layer has claimed
// to the registered patterns anchored at its op, and builds the config
// from what they return as Go values, marshaled with package yaml. The
// structures both the lifter and the executor's fusions look for (the
// scores chain, the bias Add of a Linear) are read by package match; the
// graph index is package onnxio/graph's.
//
// ONNX's Attention op (opsets 23 and 24) lifts to attention.sdpa: its
// attributes give the heads (grouped-query attention included), is_causal,
// the scale and the softcap; Q, K and V are followed back to their
// projections (3-D, or 4-D through any head split), through
// RotaryEmbedding for RoPE and a per-head RMSNorm for qk_norm (3-D); Y
// forward to the output projection. Its
// attn_mask is read by evaluating it: what depends on no input must be a
// causal frontier, a sliding window and ALiBi; what depends on one graph
// input must be that input as a bool mask of either polarity or added to
// the scores, broadcast from the right as attention.sdpa reads its mask
// input (a mask the graph reshapes first is refused).
//
// The numbers a structure carries are read by running the graph with the
// executor (package exec) at one or two probe shapes: every value that
// depends only on constants and input shapes is evaluated, which folds a
// scale of Pow(Cast(Gather(Shape(k), 2)), 0.5) to √8 and a mask sliced
// from a buffer by the sequence length to the mask itself. Layouts are read
// by pushing an index tensor through a chain of layout nodes: element i of
// the result holds the index it was copied from, which says exactly which
// token and feature each head reads, however the exporter wrote it. A
// dynamic graph is probed at two sizes, so that a pattern that holds by
// coincidence at one size is caught.
//
// # Checked, or not lifted
//
// A lifted model is built with models.New and run against the graph on
// random inputs, every output compared; a lift that does not reproduce the
// graph is an error, never a result. A structure that looks like attention
// but misses a piece (no softmax, a mask that does not fit the scores or is
// not causal, a scale no attnrun layer applies, heads that are not slices
// of the projection) is reported with the reason; the nodes no layer
// computes are listed in an *UnliftedError and in Result.Unlifted. With
// Options.Partial they become onnx.subgraph layers (layers.Subgraph), pieces
// of the graph run by the executor inside the attnrun model, so the whole
// model runs and the rest is still lifted.
//
// # KV caches
//
// A decoder exported with its cache (Hugging Face's past_key_values.N.key
// and .value inputs, (B, heads, past, head_dim), and present.N outputs) is
// read as the decoder on a fresh sequence plus its cache: each past input
// whose data only a Concat along the sequence axis reads is taken out, the
// Concat becomes its new keys or values, and the graph's reads of the
// past's length see 0. The dimensions the probes give the inputs honour
// the ties the graph needs (an attention_mask over past_sequence +
// sequence keys: declared sums first, then small candidates checked
// against the declared outputs). Each present output becomes the keys or
// values of the attention layer that computes them (Output.Cache, with
// Output.Past naming its input), told apart by running; the model then
// runs as the graph does with RunCache: its layers' sessions resume from
// the past (models.Model.Resume), step the new tokens and return the
// extended cache (State.Cache). The self-check feeds a random past.
//
// GPT-2's exports pack the cache: one past input (2, B, heads, past,
// head_dim), read entry by entry (Gather, Split, Slice on axis 0), and one
// present output stacking the extended entries (Concat of Unsqueezes on
// axis 0), the keys often cached transposed (Concat on the last axis of
// Kᵀ). Such a graph is read as the same graph with one input and output
// per entry and the keys turned back (kvcache_packed.go); the present
// output then stacks its entries' caches (Output.Stack), any number of
// them from any layers, and RunCache slices the packed past into them, so
// the written file keeps the packed interface. A one-token decoder (input
// ids declared (batch, 1)) lifts causal: at one query the causal mask
// hides nothing, and only causal attention steps a cache.
//
// # attnrun files
//
// A file attnrun wrote carries its model config in metadata_props
// (export.MetadataConfig, format export.MetadataVersion) and its
// parameters as initializers under their model names; Lift and Load
// rebuild that model exactly instead of recognizing anything, and refuse a
// format version they do not know. Export writes a lifted model as such a
// file that replaces its source: the same declared inputs and outputs, the
// model exported as standard ops behind them, or (Annotate) the source graph
// with the parameters added when the export cannot compute every output.
//
// The layer types a lift produces must be registered: import package
// layers (the command line does).
package lift
