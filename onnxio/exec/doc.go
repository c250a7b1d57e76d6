// Package exec runs ONNX graphs in pure Go: the graphs torch.onnx.export
// writes for attention modules, their masks and their blocks, on attnrun's
// float32 kernels.
//
// New prepares a decoded model once: it resolves the operator sets,
// checks every node's op, arity and attributes against what the executor
// implements at that opset, converts initializers and Constant nodes,
// orders the nodes topologically (naming the node and input when something
// is missing, and the nodes of a cycle) and plans when each intermediate
// tensor can be dropped. Run then executes the graph as often as needed,
// from any number of goroutines:
//
//	m, err := onnxio.ReadModel("attention.onnx")
//	if err != nil { ... }
//	g, err := exec.New(m)
//	if err != nil { ... } // e.g. node "/attn/Foo": op "Foo" (opset 17) is not supported; supported: ...
//	out, err := g.RunContext(ctx, map[string]*tensor.Dense{"x": x})
//
// # Semantics
//
// Ops follow the ONNX specification per opset, as ONNX's reference
// implementation and its backend node tests define it: numpy broadcasting;
// Softmax coerced to 2-D before opset 13 and along one axis from 13;
// Unsqueeze, Squeeze, ReduceSum and Split with axes or sizes as attributes
// or inputs depending on the opset (ReduceMean and ReduceMax switch at 18);
// Reshape with 0, -1 and allowzero; Slice with negative starts, ends and
// steps and the spec's clamping; Dropout as at inference. Element types are
// float32, float64, int64, int32, int16, int8, uint64, uint32, uint16,
// uint8 and bool; float16, bfloat16 and strings are refused when a graph is
// prepared. MatMul and Gemm on float32 run on kernels.Gemm, Softmax along
// the last axis on kernels.SoftmaxRows; elementwise functions of float32
// are computed in float64 and rounded once.
//
// # Domains and subgraphs
//
// Besides the default domain, nodes of ai.onnx.preview (FlexAttention) run
// when the model imports that domain. GRAPH attributes are prepared like
// the model's graph, as subgraphs the op runs (FlexAttention's score_mod and
// prob_mod, the branches of If, the bodies of Loop and Scan); a subgraph may
// read values of the graphs around it, which become inputs of the node that
// holds it, and may leave the types of its inputs and outputs out.
// Default-domain opsets run up to 28, which adds LinearAttention (27) and
// SwiGLU (28).
//
// Model-local functions (ModelProto.functions) are expanded when the graph
// is prepared: a node naming one by domain, op type and overload is
// replaced by the function's body, its attribute references resolved and
// its values renamed for that call site; the expanded nodes run at the
// opsets the function imports, and errors name them "call > domain.Function
// > node".
//
// # Attention fusion
//
// New also rewrites the scaled dot-product attention chain PyTorch exports
// (MatMul(Q, Kᵀ), a causal Where or Add mask, a scale by Div or Mul,
// Softmax over the last axis, MatMul with V, and the Transposes around
// them) into one node running kernels.AttendBatch, which never forms the
// T×T scores. Each run checks what the graph cannot tell in advance — the
// scale is a positive scalar, the mask is exactly causal or hides nothing,
// the shapes line up — and runs the original nodes when a check fails.
// Likewise Add(MatMul(x, W), b) with a bias vector b becomes one GEMM that
// starts from the bias rows.
//
// SupportedOps lists the operators; the package's conformance test runs
// ONNX's own backend tests for each of them (libonnx-testdata) and prints a
// per-op table of results with -v.
//
// # Errors
//
// Problems with the graph are reported by New, problems with the inputs by
// Run, both with the name of the node, input or output concerned. Run
// checks each input's element type, rank, fixed dimensions and symbolic
// dimensions (one size per name across inputs); an op that fails names its
// node and says why (shapes that do not broadcast, an impossible Reshape, a
// Gather index out of range); and a panic inside an op is recovered into
// such an error.
//
// # Memory and time
//
// Files come from strangers, so every tensor whose size derives from the
// file or the inputs (initializers, op outputs, broadcast results,
// ConstantOfShape, Expand, Tile, Range, the scratch of Attention) is
// reserved from a memory budget before it is allocated: Options.MaxMemory
// (default budget.DefaultLimit, 4 GiB) given to NewWithOptions bounds the
// initializers and constants together, and, separately for each run, the
// values the run holds at once. Values are released as soon as their last
// reader has run; views (Reshape, Squeeze, Identity) share their input's
// reservation. A request over the budget is an error matching
// budget.ErrExceeded that names the node, op, element type, shape and
// bytes. Shape arithmetic from data (Slice steps, Split sizes, Range
// counts, Reshape and Tile products) is exact for every int64, and an
// empty tensor's other dimensions may multiply to at most 2^32.
//
// RunContext takes a context.Context: it is checked between nodes, inside
// products (every few milliseconds of kernels.GemmContext work) and
// between chunks of fused attention, so a deadline stops even a graph of a
// few bytes that multiplies two 4096×4096 matrices.
//
// # Tensors
//
// Run takes and returns *tensor.Dense. Inputs are read in place and never
// modified; outputs are fresh copies the caller owns. gorgonia's Dense
// cannot represent tensors with zero elements, so a graph output with none
// is an error from Run (intermediate values may be empty).
package exec
