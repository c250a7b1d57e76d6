"""Hugging Face's greedy decoding of the committed decoder fixtures: goldens for `attnrun generate`.

Run with the reference virtualenv (scripts/install-reference-tools.sh), from
the repository root:

    ~/.cache/attnrun/venv/bin/python testdata/generate/gen.py

For each decoder of testdata/pytorch2 (GPT-2, Llama, Qwen3, Mistral, Gemma-2), the model
is rebuilt exactly as testdata/pytorch2/gen.py builds it (the same config
class, torch.manual_seed(seed) right before), checked against the committed
fixture (PyTorch's logits of its test_data_set_1, empty cache), and then
asked for model.generate(do_sample=False) on a few prompts. goldens.json
records, per model and prompt: the prompt ids, the eos id generate used (the
config's), the ids it returned after the prompt, and the logits of each
generated step (output_scores: the raw logits, greedy decoding processes
none), for attnrun's incremental logits to be compared with.

OPT, which has no fixture, is built from its config class with the same
sizes (LAYERS_ONLY) and checked as layers only.

It also writes each model as attnrun layers, by hand (what lifting the
graph must arrive at): <model>.yaml, and <model>.npz with Hugging Face's
weights under attnrun's names (GPT-2's Conv1D weights transposed to (out,
in) and its fused c_attn split into q_proj, k_proj and v_proj; a tied
lm_head left out, as Hugging Face's safetensors files leave it out).
"""

import json
import os
import sys

import numpy as np
import onnx
import torch
import transformers
from onnx import numpy_helper

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
PYTORCH2 = os.path.join(HERE, "..", "pytorch2")
sys.path.insert(0, PYTORCH2)
from hf_cases import hf_cases  # noqa: E402

# Model -> the implementation of its committed fixture (transformers refuses
# sdpa for Gemma-2).
MODELS = {"gpt2": "sdpa", "llama": "sdpa", "qwen3": "sdpa", "mistral": "sdpa", "gemma2": "eager", "opt": "sdpa"}

# Models with no ONNX fixture in testdata/pytorch2, built here from their
# config class (the same sizes) and checked as attnrun layers only: OPT, for
# its learned positions offset by 2 rows.
LAYERS_ONLY = {"opt": (transformers.OPTForCausalLM, transformers.OPTConfig,
                       dict(vocab_size=32, hidden_size=64, num_hidden_layers=2, ffn_dim=64, num_attention_heads=4,
                            max_position_embeddings=32, word_embed_proj_dim=64, init_std=0.05))}
PROMPTS = [[1, 2, 3], [5], [7, 30, 11, 0, 19, 4]]
NEW_TOKENS = 20
SEED = 0  # the seed of the committed fixtures (fixtures/manifest.json)


def fixture_check(module, fixture):
    """The rebuilt model must give the committed fixture's logits."""
    folder = os.path.join(PYTORCH2, "fixtures", f"{fixture}_ts17", "test_data_set_1")
    inputs = []
    k = 0
    while os.path.exists(os.path.join(folder, f"input_{k}.pb")):
        t = onnx.TensorProto()
        with open(os.path.join(folder, f"input_{k}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        inputs.append(torch.from_numpy(numpy_helper.to_array(t).copy()))
        k += 1
    want = onnx.TensorProto()
    with open(os.path.join(folder, "output_0.pb"), "rb") as f:
        want.ParseFromString(f.read())
    with torch.no_grad():
        got = module(*inputs)[0]
    if not torch.equal(got, torch.from_numpy(numpy_helper.to_array(want).copy())):
        raise SystemExit(f"{fixture}: the rebuilt model's logits differ from the committed fixture's")


def write_gemma2(c, sd, layer, weights):
    """Gemma-2: embeddings scaled by √hidden (float32, as Gemma rounds its
    normalizer), (1 + weight) RMSNorms (written as norm.rms with 1 + w, the
    same float32 product), four norms a block, attention softcapping and a
    sliding window on the sliding layers, tied head, final softcapping."""
    d, v, eps = c.hidden_size, c.vocab_size, c.rms_norm_eps
    theta = c.rope_parameters["rope_theta"]
    normalizer = float(torch.tensor(d ** 0.5, dtype=torch.float32))
    layer(f"  - {{name: embed_tokens, type: nn.embedding, num_embeddings: {v}, embedding_dim: {d}, scale: {normalizer}}}")
    weights["embed_tokens.weight"] = sd["model.embed_tokens.weight"]

    def norm(name, inputs=""):
        layer(f"  - {{name: {name}, type: norm.rms, d: {d}, eps: {eps}{inputs}}}")

    prev = "embed_tokens"
    for i in range(c.num_hidden_layers):
        h, p = f"model.layers.{i}.", f"l{i}_"
        window = f", window: {c.sliding_window}" if c.layer_types[i] == "sliding_attention" else ""
        norm(f"{p}input_layernorm")
        layer(f"  - {{name: {p}self_attn, type: attention.sdpa, d: {d}, num_heads: {c.num_attention_heads}, "
              f"num_kv_heads: {c.num_key_value_heads}, head_dim: {c.head_dim}, causal: true, rope: half, "
              f"rope_base: {theta}, out_name: o_proj, out_bias: false, scale: {c.query_pre_attn_scalar ** -0.5}, "
              f"softcap: {c.attn_logit_softcapping}{window}}}")
        norm(f"{p}post_attention_layernorm")
        layer(f"  - {{name: {p}res_1, type: nn.add, inputs: [{prev}, {p}post_attention_layernorm]}}")
        norm(f"{p}pre_feedforward_layernorm")
        layer(f"  - {{name: {p}mlp, type: nn.mlp, d: {d}, d_hidden: {c.intermediate_size}, gated: true, "
              "activation: gelu_tanh, bias: false}")
        norm(f"{p}post_feedforward_layernorm")
        layer(f"  - {{name: {p}res_2, type: nn.add, inputs: [{p}res_1, {p}post_feedforward_layernorm]}}")
        prev = f"{p}res_2"
        for key, value in sd.items():
            if key.startswith(h):
                module, param = key[len(h):].split(".", 1)
                weights[f"{p}{module}.{param}"] = 1 + value if module.endswith("layernorm") else value
    norm("norm")
    layer(f"  - {{name: lm_head, type: nn.linear, d_in: {d}, d_out: {v}, bias: false, tied_weight: embed_tokens.weight}}")
    layer(f"  - {{name: softcap, type: activation.softcap, cap: {c.final_logit_softcapping}}}")
    weights["norm.weight"] = 1 + sd["model.norm.weight"]


def write_opt(c, sd, layer, weights):
    """OPT: learned positions with OPT's offset of 2 rows, pre-norm blocks
    with a ReLU MLP (fc1, fc2), a final LayerNorm, the head tied to the
    token embedding (padding_idx 1)."""
    d, v, eps = c.hidden_size, c.vocab_size, 1e-5
    layer(f"  - {{name: embed_tokens, type: nn.embedding, num_embeddings: {v}, embedding_dim: {d}, "
          f"padding_idx: {c.pad_token_id}}}")
    layer(f"  - {{name: embed_positions, type: position.learned, context_length: {c.max_position_embeddings}, "
          f"d: {d}, offset: 2}}")
    src = "model.decoder."
    weights["embed_tokens.weight"] = sd[src + "embed_tokens.weight"]
    weights["embed_positions.weight"] = sd[src + "embed_positions.weight"]
    prev = "embed_positions"
    for i in range(c.num_hidden_layers):
        h, p = f"{src}layers.{i}.", f"l{i}_"
        layer(f"  - {{name: {p}self_attn_layer_norm, type: norm.layer, d: {d}, eps: {eps}}}")
        layer(f"  - {{name: {p}self_attn, type: attention.sdpa, d: {d}, num_heads: {c.num_attention_heads}, "
              "causal: true, qkv_bias: true}")
        layer(f"  - {{name: {p}res_1, type: nn.add, inputs: [{prev}, {p}self_attn]}}")
        layer(f"  - {{name: {p}final_layer_norm, type: norm.layer, d: {d}, eps: {eps}}}")
        layer(f"  - {{name: {p}mlp, type: nn.mlp, d: {d}, d_hidden: {c.ffn_dim}, activation: relu}}")
        layer(f"  - {{name: {p}res_2, type: nn.add, inputs: [{p}res_1, {p}mlp]}}")
        prev = f"{p}res_2"
        for key, value in sd.items():
            if key.startswith(h):
                module, param = key[len(h):].split(".", 1)
                if module in ("fc1", "fc2"):
                    module, param = "mlp", f"{module}.{param}"
                weights[f"{p}{module}.{param}"] = value
    layer(f"  - {{name: final_layer_norm, type: norm.layer, d: {d}, eps: {eps}}}")
    layer(f"  - {{name: lm_head, type: nn.linear, d_in: {d}, d_out: {v}, bias: false, tied_weight: embed_tokens.weight}}")
    weights["final_layer_norm.weight"] = sd[src + "final_layer_norm.weight"]
    weights["final_layer_norm.bias"] = sd[src + "final_layer_norm.bias"]


def write_layers(name, model):
    """<name>.yaml and <name>.npz: the model as attnrun layers."""
    c = model.config
    sd = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    lines = [f"name: {name}_layers",
             f"description: Hugging Face's tiny {name} of testdata/pytorch2 as attnrun layers (written by gen.py)",
             "inputs:", "  - {name: input_ids, dtype: int64}", "layers:"]
    weights = {}
    layer = lines.append
    d, v = c.hidden_size, c.vocab_size
    if name == "gpt2":
        layer(f"  - {{name: wte, type: nn.embedding, num_embeddings: {v}, embedding_dim: {d}}}")
        layer(f"  - {{name: wpe, type: position.learned, context_length: {c.n_positions}, d: {d}}}")
        weights["wte.weight"] = sd["transformer.wte.weight"]
        weights["wpe.weight"] = sd["transformer.wpe.weight"]
        prev = "wpe"
        for i in range(c.n_layer):
            h, p = f"transformer.h.{i}.", f"h{i}_"
            layer(f"  - {{name: {p}ln_1, type: norm.layer, d: {d}, eps: {c.layer_norm_epsilon}}}")
            layer(f"  - {{name: {p}attn, type: attention.sdpa, d: {d}, num_heads: {c.n_head}, causal: true, qkv_bias: true}}")
            layer(f"  - {{name: {p}res_1, type: nn.add, inputs: [{prev}, {p}attn]}}")
            layer(f"  - {{name: {p}ln_2, type: norm.layer, d: {d}, eps: {c.layer_norm_epsilon}}}")
            layer(f"  - {{name: {p}mlp, type: nn.mlp, d: {d}, d_hidden: {c.n_inner}, activation: gelu_tanh}}")
            layer(f"  - {{name: {p}res_2, type: nn.add, inputs: [{p}res_1, {p}mlp]}}")
            prev = f"{p}res_2"
            for ln in ("ln_1", "ln_2"):
                weights[f"{p}{ln}.weight"], weights[f"{p}{ln}.bias"] = sd[h + ln + ".weight"], sd[h + ln + ".bias"]
            qkv_w, qkv_b = sd[h + "attn.c_attn.weight"].T, sd[h + "attn.c_attn.bias"]  # Conv1D: (in, out)
            for k, proj in enumerate(("q_proj", "k_proj", "v_proj")):
                weights[f"{p}attn.{proj}.weight"] = qkv_w[k * d:(k + 1) * d]
                weights[f"{p}attn.{proj}.bias"] = qkv_b[k * d:(k + 1) * d]
            weights[f"{p}attn.out_proj.weight"] = sd[h + "attn.c_proj.weight"].T
            weights[f"{p}attn.out_proj.bias"] = sd[h + "attn.c_proj.bias"]
            weights[f"{p}mlp.fc1.weight"], weights[f"{p}mlp.fc1.bias"] = sd[h + "mlp.c_fc.weight"].T, sd[h + "mlp.c_fc.bias"]
            weights[f"{p}mlp.fc2.weight"], weights[f"{p}mlp.fc2.bias"] = sd[h + "mlp.c_proj.weight"].T, sd[h + "mlp.c_proj.bias"]
        layer(f"  - {{name: ln_f, type: norm.layer, d: {d}, eps: {c.layer_norm_epsilon}}}")
        layer(f"  - {{name: lm_head, type: nn.linear, d_in: {d}, d_out: {v}, bias: false, tied_weight: wte.weight}}")
        weights["ln_f.weight"], weights["ln_f.bias"] = sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"]
    elif name == "gemma2":
        write_gemma2(c, sd, layer, weights)
    elif name == "opt":
        write_opt(c, sd, layer, weights)
    else:  # Llama, Qwen3 and Mistral
        eps, theta = c.rms_norm_eps, c.rope_parameters["rope_theta"]
        qk_norm = ", qk_norm: rms" if name == "qwen3" else ""
        if getattr(c, "sliding_window", None):
            qk_norm += f", window: {c.sliding_window}"
        layer(f"  - {{name: embed_tokens, type: nn.embedding, num_embeddings: {v}, embedding_dim: {d}}}")
        weights["embed_tokens.weight"] = sd["model.embed_tokens.weight"]
        prev = "embed_tokens"
        for i in range(c.num_hidden_layers):
            h, p = f"model.layers.{i}.", f"l{i}_"
            layer(f"  - {{name: {p}input_layernorm, type: norm.rms, d: {d}, eps: {eps}}}")
            layer(f"  - {{name: {p}self_attn, type: attention.sdpa, d: {d}, num_heads: {c.num_attention_heads}, "
                  f"num_kv_heads: {c.num_key_value_heads}, head_dim: {c.head_dim}, causal: true, rope: half, "
                  f"rope_base: {theta}, out_name: o_proj, out_bias: false{qk_norm}}}")
            layer(f"  - {{name: {p}res_1, type: nn.add, inputs: [{prev}, {p}self_attn]}}")
            layer(f"  - {{name: {p}post_attention_layernorm, type: norm.rms, d: {d}, eps: {eps}}}")
            layer(f"  - {{name: {p}mlp, type: nn.mlp, d: {d}, d_hidden: {c.intermediate_size}, gated: true, "
                  "activation: silu, bias: false}")
            layer(f"  - {{name: {p}res_2, type: nn.add, inputs: [{p}res_1, {p}mlp]}}")
            prev = f"{p}res_2"
            for key, value in sd.items():
                if key.startswith(h):
                    module, param = key[len(h):].split(".", 1)  # self_attn.q_proj.weight
                    weights[f"{p}{module}.{param}"] = value
        layer(f"  - {{name: norm, type: norm.rms, d: {d}, eps: {eps}}}")
        layer(f"  - {{name: lm_head, type: nn.linear, d_in: {d}, d_out: {v}, bias: false}}")
        weights["norm.weight"], weights["lm_head.weight"] = sd["model.norm.weight"], sd["lm_head.weight"]
    with open(os.path.join(HERE, f"{name}.yaml"), "w") as f:
        f.write("\n".join(lines) + "\n")
    np.savez(os.path.join(HERE, f"{name}.npz"), **{k: np.ascontiguousarray(w, dtype=np.float32) for k, w in weights.items()})


def main():
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    cases = {c.name: c for c in hf_cases()}
    goldens = {"generator": "testdata/generate/gen.py", "torch": torch.__version__,
               "transformers": transformers.__version__, "seed": SEED, "max_new_tokens": NEW_TOKENS,
               "models": {}}
    for name, impl in MODELS.items():
        fixture = f"{name}_{impl}"
        torch.manual_seed(SEED)
        if name in LAYERS_ONLY:
            fixture = None
            model_class, config_class, config = LAYERS_ONLY[name]
            model = model_class(config_class(attn_implementation=impl, **config)).eval()
        else:
            module = cases[fixture].build().eval()
            fixture_check(module, fixture)
            model = module.model
        eos = model.generation_config.eos_token_id
        runs = []
        for prompt in PROMPTS:
            ids = torch.tensor([prompt], dtype=torch.int64)
            with torch.no_grad():
                out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW_TOKENS,
                                     do_sample=False, output_logits=True, return_dict_in_generate=True,
                                     pad_token_id=eos if eos is not None else 0)
            new = out.sequences[0, len(prompt):].tolist()
            logits = [step[0].tolist() for step in out.logits]
            runs.append({"prompt": prompt, "new_ids": new, "logits": logits})
            print(f"{name} {prompt} -> {new}")
        goldens["models"][name] = {"fixture": fixture, "eos_token_id": eos, "runs": runs}
        write_layers(name, model)
    with open(os.path.join(HERE, "goldens.json"), "w") as f:
        json.dump(goldens, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
