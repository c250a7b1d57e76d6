"""What a fixture is made of: a module, its data sets, its interface.

hf_cases.py and torch_cases.py list Case values; gen.py exports each through
every exporter in EXPORTERS and writes the fixtures.
"""

import dataclasses
from typing import Callable

import torch


@dataclasses.dataclass
class Case:
    """One module to export, with the inputs it is checked on.

    build is called right after torch.manual_seed(seed), so the same seed
    gives the same weights. data_sets(module, generator) returns the data
    sets as {input name: tensor} dicts in the order of the module's forward
    arguments (a *args parameter takes the remaining ones); the first set is
    also the example the exporters trace with. axes names the dynamic axes of
    inputs and outputs; symbols in DERIVED are sums of others (a KV cache's
    total length), which torch.export infers instead of taking a name.
    """
    name: str
    source: str
    build: Callable[[], torch.nn.Module]
    data_sets: Callable[[torch.nn.Module, torch.Generator], list]
    outputs: list
    axes: dict
    # Exporter key ("ts17", "dynamo18", "dynamo23" or "*") -> why that export
    # is known to fail. gen.py asserts that it does fail.
    export_failures: dict = dataclasses.field(default_factory=dict)
    # Exporter key -> why that export only runs on the example's shapes.
    # gen.py asserts that ONNX Runtime fails the other data sets, then
    # writes test_data_set_0 alone.
    frozen_shapes: dict = dataclasses.field(default_factory=dict)
    # Why the case is left out of git, if it is: then only gen.py --all (the
    # live cross-check) writes it, and the committed manifest lists it.
    not_committed: str = ""
    # The exporter keys git holds, when not all of them (None): the other
    # exports are written by gen.py --all only, for subset_reason.
    committed_exporters: tuple = None
    subset_reason: str = ""
    # Why float32 itself strays from the exact result by more than the
    # 1e-5 / 1e-6 tolerance on this model, if it does: then gen.py also
    # computes a float64 reference, and attnrun passes when it is no further
    # from it than FLOAT64_FACTOR times the larger distance of the two
    # references, PyTorch float32 and ONNX Runtime, plus FLOAT64_SLACK (the
    # float64 rule, docs/crosscheck.md).
    float64_reference: str = ""
    # Optional (module, data sets, folder) -> {file: what it holds}: extra
    # reference files written beside the test-data sets.
    extra: Callable = None


@dataclasses.dataclass(frozen=True)
class Exporter:
    """One way of calling torch.onnx.export."""
    key: str
    dynamo: bool
    opset: int


EXPORTERS = [
    Exporter("ts17", dynamo=False, opset=17),      # the TorchScript exporter
    Exporter("dynamo18", dynamo=True, opset=18),   # torch.export, the default since 2.9
    Exporter("dynamo23", dynamo=True, opset=23),   # emits Attention, RMSNormalization, RotaryEmbedding
]

# The float64 rule: |attnrun - float64| <= FLOAT64_FACTOR * max(e_PyTorch,
# e_ORT) + FLOAT64_SLACK, elementwise, per output, e_X = max|X float32 -
# float64| over the data set.
FLOAT64_FACTOR = 2.0
FLOAT64_SLACK = 1e-6

# Axis symbols that are sums of other symbols (past_sequence + sequence).
DERIVED = {"total_sequence"}


def randint(gen, high, *shape):
    """Random int64 token ids in [0, high)."""
    return torch.randint(0, high, shape, generator=gen)


def randn(gen, *shape):
    """Standard normal float32 values."""
    return torch.randn(*shape, generator=gen)


def padding_mask(lengths, total):
    """An int64 (batch, total) attention_mask: 1 for the first lengths[b]
    positions of row b, 0 for the padding after them."""
    positions = torch.arange(total)
    return (positions.unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).to(torch.int64)
