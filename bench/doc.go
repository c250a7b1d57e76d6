// Package bench holds attnrun's side of the model-level benchmarks that
// scripts/bench_models.sh runs against ONNX Runtime, PyTorch and GoMLX:
// Go benchmarks of the graph executor on the models and data sets that
// testdata/bench_models/models_bench.py exports (a Llama-style decoder one
// token at a time over a KV cache, the real all-MiniLM-L6-v2). It has no
// API; the benchmarks skip unless ATTNRUN_BENCH_MODELS names the folder the
// export wrote.
//
// The GoMLX peer lives in bench/gomlx, a module of its own, so that
// attnrun's module does not depend on GoMLX.
package bench
