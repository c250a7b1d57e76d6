#!/usr/bin/python3
"""PyTorch's numbers for the first-hour CLI tests (first_hour_test.go).

Run from the repository root with Debian's python3-torch 1.13:

    /usr/bin/python3 cmd/attnrun/cli/testdata/firsthour/gen.py

It writes, next to itself:

- randn_seed7.npy: torch.randn(2, 3, 4) after torch.manual_seed(7), what
  `attnrun input 2,3,4 --seed 7` and `run --random-input 2,3,4 --seed 7`
  must draw; randn_seed3_a.npy and randn_seed3_b.npy: torch.randn(1, 5, 8)
  then torch.randn(1, 7, 8) after torch.manual_seed(3), two --random-input
  flags in order.
- mha_weights.npy: the attention weights, per head, of the
  nn.MultiheadAttention that testdata/onnx/torch_mha_causal_self_* was
  exported from (seed 0, as testdata/torch/export_onnx.py builds it), on
  that export's test_data_set_0 input: `run FILE.onnx --attention mha`
  must give them from the graph's Softmax. The script first checks that
  the module reproduces the fixture's output, so the weights are the
  export's.
- quickstart_y.npy: the README quick start's model, the seeds'
  MultiHeadAttention(8, 8, 16, 2) after torch.manual_seed(123), on
  torch.randn(1, 6, 8) after torch.manual_seed(1): what `attnrun run
  model.yaml --seed 123 --input x.npy` prints there.
"""

import os
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "../../../../.."))
sys.path.insert(0, os.path.join(ROOT, "testdata/torch"))
import modules  # noqa: E402


def read_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return torch.from_numpy(numpy_helper.to_array(t).copy())


def main():
    torch.manual_seed(7)
    np.save(os.path.join(HERE, "randn_seed7.npy"), torch.randn(2, 3, 4).numpy())
    torch.manual_seed(3)
    np.save(os.path.join(HERE, "randn_seed3_a.npy"), torch.randn(1, 5, 8).numpy())
    np.save(os.path.join(HERE, "randn_seed3_b.npy"), torch.randn(1, 7, 8).numpy())

    fixture = os.path.join(ROOT, "testdata/onnx/torch_mha_causal_self_opset17_dynamic/test_data_set_0")
    torch.manual_seed(0)
    module = modules.TorchCausalSelfAttention(8, 2, 8).eval()
    x = read_pb(os.path.join(fixture, "input_0.pb"))
    with torch.no_grad():
        y, _ = module(x)
        assert torch.allclose(y, read_pb(os.path.join(fixture, "output_0.pb")), rtol=0, atol=0), "not the export's module"
        t = x.shape[1]
        _, weights = module.mha(x, x, x, attn_mask=module.mask[:t, :t], need_weights=True, average_attn_weights=False)
    np.save(os.path.join(HERE, "mha_weights.npy"), weights.numpy().astype(np.float32))
    print("mha_weights", tuple(weights.shape))

    torch.manual_seed(1)
    x = torch.randn(1, 6, 8)
    torch.manual_seed(123)
    first = modules.MultiHeadAttention(8, 8, 16, 2, 0.0).eval()
    with torch.no_grad():
        np.save(os.path.join(HERE, "quickstart_y.npy"), first(x).numpy())


if __name__ == "__main__":
    main()
