"""Hugging Face's greedy decoding of the committed decoder fixtures: goldens for `attnrun generate`.

Run with the reference virtualenv (scripts/install-reference-tools.sh), from
the repository root:

    ~/.cache/attnrun/venv/bin/python testdata/generate/gen.py

For each decoder of testdata/pytorch2 (GPT-2, Llama, Qwen3, sdpa), the model
is rebuilt exactly as testdata/pytorch2/gen.py builds it (the same config
class, torch.manual_seed(seed) right before), checked against the committed
fixture (PyTorch's logits of its test_data_set_1, empty cache), and then
asked for model.generate(do_sample=False) on a few prompts. goldens.json
records, per model and prompt: the prompt ids, the eos id generate used (the
config's), the ids it returned after the prompt, and the logits of each
generated step (output_scores: the raw logits, greedy decoding processes
none), for attnrun's incremental logits to be compared with.
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

MODELS = ["gpt2", "llama", "qwen3"]
PROMPTS = [[1, 2, 3], [5], [7, 30, 11, 0, 19, 4]]
NEW_TOKENS = 20
SEED = 0  # the seed of the committed fixtures (fixtures/manifest.json)


def fixture_check(module, name):
    """The rebuilt model must give the committed fixture's logits."""
    folder = os.path.join(PYTORCH2, "fixtures", f"{name}_sdpa_ts17", "test_data_set_1")
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
        raise SystemExit(f"{name}: the rebuilt model's logits differ from the committed fixture's")


def main():
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    cases = {c.name: c for c in hf_cases()}
    goldens = {"generator": "testdata/generate/gen.py", "torch": torch.__version__,
               "transformers": transformers.__version__, "seed": SEED, "max_new_tokens": NEW_TOKENS,
               "models": {}}
    for name in MODELS:
        torch.manual_seed(SEED)
        module = cases[f"{name}_sdpa"].build().eval()
        fixture_check(module, name)
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
        goldens["models"][name] = {"fixture": f"{name}_sdpa", "eos_token_id": eos, "runs": runs}
    with open(os.path.join(HERE, "goldens.json"), "w") as f:
        json.dump(goldens, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
