"""The converted transformers layers (Gated DeltaNet, the Mamba-2 mixer) exported with rnnx's ops on every target.

Each layer (random weights, fp32) is exported once per target with dynamic batch and length, through the same
translation table and ``finalize`` as ``export-model``, and run on stock ONNX Runtime (the function bodies:
com.microsoft ops on ``onnxruntime``, the Scan form on ``tensorrt``, the inlined opset-27 standard ops on ``onnx``)
at T = 7 and T = 300 from that one file, from a non-zero state, against the layer's own torch forward (itself
equal to transformers', tests/test_transformers_layers.py). The ``onnxruntime`` file also runs on rnnx's native
kernels (the op library registered), and the portable file on ``onnx.reference.ReferenceEvaluator``.
Tolerance: max |ONNX - torch| / max |torch| below 1e-4 per output.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from rnnx.export.onnx_ops import TARGETS, custom_op_schemas, finalize, translation_table
from rnnx.models.gated_deltanet import ConvRecurrentState, GatedDeltaNet
from rnnx.models.mamba2 import Mamba2Mixer
from rnnx.runtime import ortops
from rnnx.runtime.contract import ops as spec
from rnnx.runtime.contract.targets import target as target_record

REL = 1e-4
HIDDEN = 64
#: Nodes of the Gated DeltaNet layer's onnxruntime file after ONNX Runtime's optimizer (measured 2026-11-27, 36 before
#: qk_l2_norm and grouped value; issue 39 asks at most 25).
GDN_NODES = 24


class LayerWithState(torch.nn.Module):
    """(x, conv state, recurrent state) -> (y, conv state, recurrent state): the layer as an exportable graph."""

    def __init__(self, layer: torch.nn.Module) -> None:
        super().__init__()
        self.layer = layer

    def forward(self, x, conv, recurrent):
        y, state = self.layer(x, ConvRecurrentState(conv, recurrent))
        return y, state.conv, state.recurrent


def _layer(kind: str) -> LayerWithState:
    torch.manual_seed(0)
    if kind == "gated_deltanet":  # 2 key heads serving 4 value heads, as Qwen3.5's tiny config
        layer = GatedDeltaNet(HIDDEN, num_key_heads=2, num_value_heads=4, key_head_dim=16, value_head_dim=16)
    else:  # 8 heads of 16, state 16, 2 groups
        layer = Mamba2Mixer(HIDDEN, num_heads=8, head_dim=16, state_size=16, n_groups=2)
    with torch.no_grad():
        for name, p in layer.named_parameters():
            p.copy_(torch.randn_like(p) * (0.5 if name in ("A_log", "dt_bias", "D") else 0.2))
    return LayerWithState(layer.eval()).eval()


def _inputs(module: LayerWithState, batch: int, steps: int, seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    state = module.layer.init_state(batch)
    return (
        torch.randn(batch, steps, HIDDEN, generator=g),
        torch.randn(state.conv.shape, generator=g),
        torch.randn(state.recurrent.shape, generator=g) * 0.1,
    )


@pytest.fixture(scope="module", params=["gated_deltanet", "mamba2"])
def exported(request, tmp_path_factory) -> tuple[LayerWithState, dict[str, Path]]:
    module = _layer(request.param)
    example = _inputs(module, 2, 7, seed=1)
    B, T = torch.export.Dim("B"), torch.export.Dim("T")
    folder = tmp_path_factory.mktemp(request.param)
    paths = {}
    for target in TARGETS:
        with custom_op_schemas():
            program = torch.onnx.export(
                module, example, dynamo=True, custom_translation_table=translation_table(target),
                dynamic_shapes=({0: B, 1: T}, {0: B}, {0: B}), verbose=False,
            )  # fmt: skip
        paths[target] = folder / f"{target}.onnx"
        onnx.save(finalize(program.model_proto, target), paths[target])
    return module, paths


def _rel(got: np.ndarray, want: torch.Tensor) -> float:
    want64 = want.double().numpy()
    return float(np.abs(got.astype(np.float64) - want64).max() / np.abs(want64).max())


def _check(run, module: LayerWithState, batch: int, steps: int) -> None:
    args = _inputs(module, batch, steps, seed=steps)
    with torch.no_grad():
        want = module(*args)
    got = run({name: a.numpy() for name, a in zip(("x", "conv", "recurrent"), args)})
    for g, w in zip(got, want):
        assert g.shape == tuple(w.shape) and _rel(g, w) < REL


@pytest.mark.parametrize("target", TARGETS)
def test_one_file_runs_every_length_on_stock_onnxruntime(exported, target):
    module, paths = exported
    model = onnx.load(paths[target])
    family = {spec.LINEAR_RECURRENCE.onnx_name, spec.CAUSAL_CONV_WITH_STATE.onnx_name}
    rnnx_nodes = {n.op_type for n in model.graph.node if n.domain == spec.ONNX_DOMAIN}
    assert rnnx_nodes == (family if target_record(target).custom_domain else set())
    session = ort.InferenceSession(str(paths[target]), providers=["CPUExecutionProvider"])
    for batch, steps in ((2, 7), (3, 300), (1, 1)):
        _check(lambda feeds: session.run(None, feeds), module, batch, steps)


def test_onnxruntime_file_on_rnnx_native_kernels(exported):
    module, paths = exported
    options = ort.SessionOptions()
    options.register_custom_ops_library(str(ortops.build()))
    session = ort.InferenceSession(str(paths["onnxruntime"]), options, providers=["CPUExecutionProvider"])
    for batch, steps in ((2, 7), (3, 300)):
        _check(lambda feeds: session.run(None, feeds), module, batch, steps)


def test_portable_file_on_the_reference_evaluator(exported):
    module, paths = exported
    evaluator = onnx.reference.ReferenceEvaluator(str(paths["onnx"]))
    _check(lambda feeds: evaluator.run(None, feeds), module, 2, 7)


@pytest.mark.parametrize("exported", ["gated_deltanet"], indirect=True)
def test_gated_deltanet_graph_size_on_onnxruntime(exported, tmp_path):
    """The Gated DeltaNet layer's ``onnxruntime`` file after ONNX Runtime's optimizer, rnnx's op library registered:
    at most :data:`GDN_NODES` nodes (the q / k norms and the head grouping inside the op), with one node per rnnx op,
    the four input projections as one MatMul and nothing between the convolution's split and the recurrence."""
    module, paths = exported
    assert isinstance(module.layer, GatedDeltaNet)
    options = ort.SessionOptions()
    options.register_custom_ops_library(str(ortops.build()))
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(str(paths["onnxruntime"]), options, providers=["CPUExecutionProvider"])
    ops = [n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node]
    assert ops.count(spec.LINEAR_RECURRENCE.onnx_name) == ops.count(spec.CAUSAL_CONV_WITH_STATE.onnx_name) == 1
    assert ops.count("MatMul") == 2  # the fused input projection and the output projection
    assert not {"Expand", "ReduceSum", "Sqrt", "Div"} & set(ops)  # no q / k norm or head repeat outside the op
    assert len(ops) <= GDN_NODES, (len(ops), sorted(ops))
