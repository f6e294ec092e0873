"""Node counts of exported graphs, as ONNX Runtime runs them: a regression guard for the lean graphs.

At small sizes a decode step pays per node (about half a microsecond of dispatch each on a CPU), so the
number of nodes ONNX Runtime runs after its own optimizer is part of the latency. These are counts, not
timings (docs/benchmarks.md has the times): for each family the ORT-optimized graph, with rnnx's op
library registered and on stock ONNX Runtime (the ops' function bodies), may not grow past the counts
recorded when the graphs were made lean (issue 30), and the plumbing the packed attention layout removed
(transposes and reshapes around the attention) must not come back.

Families: both demos (the shared exports), a fast-transformers causal-linear encoder converted with
``rnnx.models.convert`` (the paper's image model at 2 layers), and a bidirectional SRU tagger (what
``convert`` makes of an ``sru.SRU`` tagger: an ``rnnx.models.SRU``, built here directly).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch
from torch import nn

from rnnx.export import export
from rnnx.export.graph_nodes import optimized_node_counts
from rnnx.models import SRU
from rnnx.runtime import ortops
from rnnx.runtime.contract.ops import ALL_OPS

pytestmark = pytest.mark.skipif(ortops.find_library() is None, reason="rnnx's ONNX Runtime op library is not built")

RNNX_OPS = {op.onnx_name for op in ALL_OPS}
#: (native ops, stock ONNX Runtime) node budgets, the counts measured when the graphs were made lean; the
#: counts before (issue 30's "before" column, docs/benchmarks.md) are in the comments.
BUDGETS = {
    "linear_transformer_copy": (34, 71),  # before: 75 / 128
    "srupp_linear_copy": (49, 168),  # before: 99 / 256
    "fast_transformers": (29, 61),  # the paper model at 2 layers: 55 / 105 before; 10 a layer (11 on 3-D rows)
    "sru_tagger": (18, 42),  # before: 21 / 73 (one zeros for every layer's c0; the two-direction body without Squeeze)
}
#: Ops a lean graph has no use for around its attention: heads stay packed from projection to projection, and pads
#: are masked inside the ops (one Where per graph turns the pad mask into the positions' keep mask).
PLUMBING = {"Transpose", "Reshape", "Squeeze", "Shape"}


def _counts(export_dir: Path) -> tuple[Counter, Counter]:
    return optimized_node_counts(export_dir, native_ops=True), optimized_node_counts(export_dir, native_ops=False)


def _check(family: str, native: Counter, stock: Counter, layers: int) -> None:
    total_native, total_stock = sum(native.values()), sum(stock.values())
    budget_native, budget_stock = BUDGETS[family]
    assert total_native <= budget_native, f"{family}: {total_native} nodes with native ops > {budget_native}: {native}"
    assert total_stock <= budget_stock, f"{family}: {total_stock} nodes on stock ONNX Runtime > {budget_stock}: {stock}"
    assert sum(native[op] for op in RNNX_OPS) == layers * len([op for op in RNNX_OPS if native[op]]), native


@pytest.mark.parametrize("name,layers", [("linear_transformer_copy", 2), ("srupp_linear_copy", 4)])
def test_demo_graphs_stay_lean(demo_exports, name: str, layers: int) -> None:
    native, stock = _counts(demo_exports[(name, "onnxruntime")])
    _check(name, native, stock, layers)
    if name == "linear_transformer_copy":  # every residual sum and its norm is one fused node
        assert not PLUMBING & set(native) and "LayerNormalization" not in native and native["Where"] <= 1, native
        assert native["SkipLayerNormalization"] == 2 * layers + 1 and native["CausalLinearAttention"] == layers


def test_converted_fast_transformers_graph_stays_lean(tmp_path: Path) -> None:
    builders = pytest.importorskip("fast_transformers.builders", reason="pytorch-fast-transformers is not installed")
    from rnnx.models import convert

    torch.manual_seed(0)
    encoder = builders.TransformerEncoderBuilder.from_kwargs(
        n_layers=2, n_heads=4, query_dimensions=8, value_dimensions=8, feed_forward_dimensions=64,
        attention_type="causal-linear",
    ).get().eval()  # fmt: skip

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed, self.encoder, self.head = nn.Embedding(10, 32), convert(encoder), nn.Linear(32, 10)

        def init_state(self, batch: int):
            return self.encoder.init_state(batch)

        def forward(self, tokens: torch.Tensor, state):
            y, state = self.encoder.forward_state(self.embed(tokens), state)
            return self.head(y), state

    out = export(Model().eval(), (torch.randint(0, 10, (2, 4)),), tmp_path / "ft", target="onnxruntime", check=False)
    native, stock = _counts(out.out_dir)
    _check("fast_transformers", native, stock, 2)
    # one q/k/v projection per layer; on rows every projection is a Gemm with its bias, the ReLU fused into one
    assert native["Split"] == 2 and native["FusedGemm"] == 2, native
    assert native["Gemm"] + native["FusedGemm"] + native["MatMul"] == 2 * 4 + 1, native
    # reshapes only where rows meet the attention (2 a layer) and at the encoder's ends; no transpose / squeeze / Where
    assert native["Reshape"] == 2 * 2 + 2 and not {"Transpose", "Squeeze", "Where"} & set(native), native


def test_sru_tagger_graph_stays_lean(tmp_path: Path) -> None:
    class Tagger(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed, self.rnn, self.head = nn.Embedding(20, 16), SRU(16, 32, 2, bidirectional=True), nn.Linear(64, 2)

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            h, _ = self.rnn(self.embed(tokens).transpose(0, 1))
            return self.head(h.transpose(0, 1))

    torch.manual_seed(0)
    out = export(
        Tagger().eval(), (torch.randint(0, 20, (2, 7)),), tmp_path / "tagger", target="onnxruntime", check=False
    )
    native, stock = _counts(out.out_dir)
    _check("sru_tagger", native, stock, 2)
    assert native["MatMul"] == 3 and native["SRUScan"] == 2, native


def test_residual_sum_and_norm_fuse_into_one_node_with_the_same_numbers() -> None:
    """``fuse_skip_layer_norm`` on a pre-norm residual block (the sum read again by the next residual, a bias Add
    before it): one SkipLayerNormalization whose fourth output is the sum, the bias folded in, and ONNX Runtime
    gives the outputs of the unfused graph (fp32, 1e-5)."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from rnnx.export.onnx_ops import fuse_skip_layer_norm

    rng = np.random.default_rng(0)
    D = 8
    inits = [
        numpy_helper.from_array(rng.standard_normal((D, D)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal(D).astype(np.float32), "b"),
        numpy_helper.from_array(rng.standard_normal(D).astype(np.float32), "gamma"),
        numpy_helper.from_array(rng.standard_normal(D).astype(np.float32), "beta"),
    ]
    nodes = [
        helper.make_node("MatMul", ["y", "W"], ["mm"]),
        helper.make_node("Add", ["mm", "b"], ["biased"]),
        helper.make_node("Add", ["x", "biased"], ["sum"]),
        helper.make_node("LayerNormalization", ["sum", "gamma", "beta"], ["normed"], axis=-1, epsilon=1e-5),
        helper.make_node("Add", ["sum", "normed"], ["next"]),  # the residual stream reads the sum again
    ]
    value = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, ["B", "L", D])  # noqa: E731
    graph = helper.make_graph(
        nodes,
        "block",
        [value("x"), value("y")],
        [value("next")],
        inits,
        value_info=[value(n) for n in ("mm", "biased", "sum", "normed")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    fused = onnx.ModelProto()
    fused.CopyFrom(model)
    assert fuse_skip_layer_norm(fused) == 1
    ops = [n.op_type for n in fused.graph.node]
    assert ops == ["MatMul", "SkipLayerNormalization", "Add"], ops
    skip = fused.graph.node[1]
    assert list(skip.input) == ["x", "mm", "gamma", "beta", "b"] and list(skip.output) == ["normed", "", "", "sum"]
    feeds = {
        "x": rng.standard_normal((2, 3, D)).astype(np.float32),
        "y": rng.standard_normal((2, 3, D)).astype(np.float32),
    }
    run = lambda m: ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]  # noqa: E731
    np.testing.assert_allclose(run(fused), run(model), rtol=1e-5, atol=1e-5)
    assert fuse_skip_layer_norm(fused) == 0  # nothing left to fuse
