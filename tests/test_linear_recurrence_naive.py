"""The float64 references of ONNX opset 27's linear-recurrence family (models/ops/linear_recurrence/naive.py).

Each is checked against an independent reference: ONNX Runtime running the standard's own function body
(a one-node opset-27 model on the CPU provider), rnnx's existing normalised causal linear attention
reference, and torch's conv1d.
"""

from __future__ import annotations

import itertools
from typing import Optional

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper

from rnnx.models.ops.causal_conv_with_state.naive import causal_conv_with_state_naive
from rnnx.models.ops.causal_linear_attention import naive as katharopoulos_reference
from rnnx.models.ops.linear_recurrence.checks import DELTA_RULES, GATED_RULES, UPDATE_RULES
from rnnx.models.ops.linear_recurrence.naive import katharopoulos_as_linear, linear_recurrence_naive

#: float32 tolerance of ONNX Runtime's fp32 run of the body against the fp64 loop, on well-scaled inputs
#: (unit keys, decays exp(-softplus) <= 1, beta in (0, 1)).
RTOL = ATOL = 1e-5
B, T, D_K, D_V = 2, 6, 4, 3
LA_INPUTS = ("query", "key", "value", "past_state", "decay", "beta")


def _one_node_model(op: str, names: list[Optional[str]], arrays: dict[str, np.ndarray], **attrs) -> bytes:
    """A one-node opset-27 model: ``names`` are the node's inputs in order, None for an absent optional."""
    node_inputs = [n or "" for n in names]
    while node_inputs and not node_inputs[-1]:
        node_inputs.pop()
    node = helper.make_node(op, node_inputs, ["output", "present_state"], **attrs)
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(arrays[n].shape)) for n in names if n]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("output", "present_state")]
    graph = helper.make_graph([node], op, inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 27)]).SerializeToString()


def _run_ort(model: bytes, arrays: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: arrays[i.name] for i in session.get_inputs()})


def _linear_attention_inputs(
    rule: str, decay_kind: Optional[str], beta_kind: Optional[str], h_q: int, h_kv: int, past: bool, seed: int
) -> dict[str, torch.Tensor]:
    """Float32 inputs that keep the recurrence bounded: L2-normalised keys, log decays -softplus(x)."""
    g = torch.Generator().manual_seed(seed)
    x = {
        "query": torch.randn(B, T, h_q * D_K, generator=g),
        "key": F.normalize(torch.randn(B, T, h_kv, D_K, generator=g), dim=-1).reshape(B, T, h_kv * D_K),
        "value": torch.randn(B, T, h_kv * D_V, generator=g),
    }
    if past:
        x["past_state"] = 0.5 * torch.randn(B, h_kv, D_K, D_V, generator=g)
    if decay_kind is not None:
        width = h_kv if decay_kind == "head" else h_kv * D_K
        x["decay"] = -F.softplus(torch.randn(B, T, width, generator=g))
    if beta_kind is not None:
        x["beta"] = torch.sigmoid(torch.randn(B, T, h_kv if beta_kind == "head" else 1, generator=g))
    return x


def _cases():
    for rule in UPDATE_RULES:
        decays = ("head", "key") if rule in GATED_RULES else (None,)
        betas = ("head", "shared") if rule in DELTA_RULES else (None,)
        for decay, beta, heads, past, scale in itertools.product(
            decays, betas, ((2, 2), (4, 2)), (False, True), (0.0, 0.7)
        ):
            state = "past" if past else "nopast"
            name = f"{rule}-decay_{decay}-beta_{beta}-hq{heads[0]}_hkv{heads[1]}-{state}-scale{scale}"
            yield pytest.param(rule, decay, beta, heads, past, scale, id=name)


@pytest.mark.parametrize("rule,decay_kind,beta_kind,heads,past,scale", list(_cases()))
def test_linear_attention_equals_the_standard_body_in_onnxruntime(rule, decay_kind, beta_kind, heads, past, scale):
    h_q, h_kv = heads
    x = _linear_attention_inputs(rule, decay_kind, beta_kind, h_q, h_kv, past, seed=len(rule) + 7 * h_q)
    arrays = {n: t.numpy() for n, t in x.items()}
    attrs = dict(q_num_heads=h_q, kv_num_heads=h_kv, update_rule=rule, scale=scale)
    model = _one_node_model("LinearAttention", [n if n in x else None for n in LA_INPUTS], arrays, **attrs)
    ort_out, ort_state = _run_ort(model, arrays)

    out, state = linear_recurrence_naive(**x, **attrs)
    assert out.shape == (B, T, h_q * D_V) and out.dtype == torch.float32
    assert state.shape == (B, h_kv, D_K, D_V) and state.dtype == torch.float64
    np.testing.assert_allclose(out.numpy(), ort_out, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(state.numpy(), ort_state, rtol=RTOL, atol=ATOL)
    assert np.abs(ort_out).max() > 0.1  # the comparison is not between two near-zero tensors


def test_grouped_query_heads_read_kv_head_h_over_group():
    """Pins the grouping convention apart from ONNX Runtime: with H_q = 2 H_kv, query heads 0 and 1 read kv
    head 0, so feeding kv head 1 garbage changes only query heads 2 and 3."""
    x = _linear_attention_inputs("linear", None, None, 4, 2, True, seed=3)
    out, _ = linear_recurrence_naive(**x, q_num_heads=4, kv_num_heads=2, update_rule="linear")
    x["value"] = x["value"].clone()
    x["value"][..., D_V:] += 10.0  # kv head 1's values
    out2, _ = linear_recurrence_naive(**x, q_num_heads=4, kv_num_heads=2, update_rule="linear")
    per_head, per_head2 = out.reshape(B, T, 4, D_V), out2.reshape(B, T, 4, D_V)
    torch.testing.assert_close(per_head[:, :, :2], per_head2[:, :, :2], rtol=0, atol=0)
    assert (per_head[:, :, 2:] - per_head2[:, :, 2:]).abs().max() > 1.0


@pytest.mark.parametrize(
    "rule,decay_kind,beta_kind",
    [("linear", None, None), ("gated", "key", None), ("delta", None, "head"), ("gated_delta", "head", "shared")],
)
def test_pad_rows_equal_each_row_run_alone(rule, decay_kind, beta_kind):
    """A right-padded batch (row 0 real for 6 steps, row 1 for 3) equals each row run alone on its length."""
    x = {n: t.double() for n, t in _linear_attention_inputs(rule, decay_kind, beta_kind, 4, 2, True, seed=11).items()}
    lengths = (T, 3)
    pad_mask = torch.arange(T)[None, :] >= torch.tensor(lengths)[:, None]  # (B, T), True = pad
    attrs = dict(q_num_heads=4, kv_num_heads=2, update_rule=rule)
    out, state = linear_recurrence_naive(**x, **attrs, pad_mask=pad_mask)
    for row, length in enumerate(lengths):
        alone = {n: t[row : row + 1] if n == "past_state" else t[row : row + 1, :length] for n, t in x.items()}
        out_row, state_row = linear_recurrence_naive(**alone, **attrs)
        torch.testing.assert_close(out[row : row + 1, :length], out_row, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(state[row : row + 1], state_row, rtol=1e-12, atol=1e-12)
    # the pad steps' outputs are read from the carried state: the same state, a new query
    S = state[1].repeat_interleave(2, dim=0)  # (H_q, d_k, d_v)
    q_pad = x["query"][1, 3:].reshape(T - 3, 4, D_K)
    expected = torch.einsum("thk,hkv->thv", q_pad, S).reshape(T - 3, 4 * D_V) / D_K**0.5
    torch.testing.assert_close(out[1, 3:], expected, rtol=1e-12, atol=1e-12)
    # and without the mask the padded row's state would differ, so the mask did something
    _, unmasked = linear_recurrence_naive(**x, **attrs)
    assert (unmasked[1] - state[1]).abs().max() > 1e-3


@pytest.mark.parametrize("with_state,with_pad", [(False, False), (True, True)])
def test_katharopoulos_is_the_linear_rule_plus_one_division(with_state, with_pad):
    g = torch.Generator().manual_seed(5)
    H, E, M = 2, 4, 3
    q, k = (torch.randn(B, T, H * E, generator=g, dtype=torch.float64) for _ in range(2))
    v = torch.randn(B, T, H * M, generator=g, dtype=torch.float64)
    S0 = torch.rand(B, H, E, M, generator=g, dtype=torch.float64) if with_state else None
    z0 = torch.rand(B, H, E, generator=g, dtype=torch.float64) if with_state else None
    mask_pad = (torch.arange(T)[None, :] >= torch.tensor([T, 4])[:, None]).to(torch.uint8) if with_pad else None
    out, S, z = katharopoulos_as_linear(q, k, v, H, S0, z0, mask_pad, eps=1e-6)
    ref_out, ref_S, ref_z = katharopoulos_reference.causal_linear_attention_packed(
        q, k, v, H, S0, z0, mask_pad, eps=1e-6
    )
    torch.testing.assert_close(out, ref_out, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(S, ref_S, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(z, ref_z, rtol=1e-6, atol=1e-6)


def _conv_inputs(K: int, C: int = 5, steps: int = T, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "input": torch.randn(B, C, steps, generator=g),
        "weight": torch.randn(C, 1, K, generator=g),
        "bias": torch.randn(C, generator=g),
        "past_state": torch.randn(B, C, K - 1, generator=g),
    }


@pytest.mark.parametrize("activation", ["none", "silu", "swish"])
@pytest.mark.parametrize("with_bias,with_past", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("K", [1, 4])
def test_causal_conv_equals_the_standard_body_in_onnxruntime(activation, with_bias, with_past, K):
    """K = 1 included: its state is (B, C, 0), an empty tensor ONNX Runtime accepts."""
    x = _conv_inputs(K, seed=K)
    names = ["input", "weight", "bias" if with_bias else None, "past_state" if with_past else None]
    x = {n: t for n, t in x.items() if n in names}
    arrays = {n: t.numpy() for n, t in x.items()}
    model = _one_node_model("CausalConvWithState", names, arrays, activation=activation)
    ort_out, ort_state = _run_ort(model, arrays)
    out, state = causal_conv_with_state_naive(**x, activation=activation)
    assert out.shape == x["input"].shape and state.shape == (B, 5, K - 1)
    np.testing.assert_allclose(out.numpy(), ort_out, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(state.numpy(), ort_state, rtol=0, atol=0)  # a copy of inputs
    # and torch's conv1d on the left-padded input, a second reference
    past = x.get("past_state", torch.zeros(B, 5, K - 1))
    y = F.conv1d(torch.cat([past, x["input"]], dim=2).double(), x["weight"].double(), groups=5)
    if with_bias:
        y = y + x["bias"].double()[:, None]
    y = y if activation == "none" else F.silu(y)
    torch.testing.assert_close(out, y.float(), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("activation", ["none", "silu"])
def test_causal_conv_chunked_calls_equal_one_call(activation):
    x = _conv_inputs(4, steps=7, seed=9)
    whole, whole_state = causal_conv_with_state_naive(**x, activation=activation)
    rest = {n: t for n, t in x.items() if n != "input" and n != "past_state"}
    out1, state1 = causal_conv_with_state_naive(
        x["input"][:, :, :2], past_state=x["past_state"], **rest, activation=activation
    )
    out2, state2 = causal_conv_with_state_naive(x["input"][:, :, 2:], past_state=state1, **rest, activation=activation)
    torch.testing.assert_close(torch.cat([out1, out2], dim=2), whole, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(state2, whole_state, rtol=0, atol=0)
    # one-token decode steps too
    state, outs = x["past_state"], []
    for t in range(7):
        o, state = causal_conv_with_state_naive(
            x["input"][:, :, t : t + 1], past_state=state, **rest, activation=activation
        )
        outs.append(o)
    torch.testing.assert_close(torch.cat(outs, dim=2), whole, rtol=1e-6, atol=1e-6)


def _assert_one_line_error(fn, *names: str) -> None:
    with pytest.raises(ValueError) as info:
        fn()
    message = str(info.value)
    assert "\n" not in message, message
    for name in names:
        assert name in message, message


def test_refusals_name_the_tensor():
    x = _linear_attention_inputs("gated", "head", None, 2, 2, True, seed=1)
    la = dict(q_num_heads=2, kv_num_heads=2)
    _assert_one_line_error(lambda: linear_recurrence_naive(**x, **la, update_rule="linear"), "decay", "linear")
    _assert_one_line_error(
        lambda: linear_recurrence_naive(x["query"], x["key"], x["value"], **la, update_rule="gated"), "decay"
    )
    beta = torch.rand(B, T, 2)
    _assert_one_line_error(lambda: linear_recurrence_naive(**x, beta=beta, **la, update_rule="gated"), "beta")
    wrong_state = x["past_state"][..., :-1]
    _assert_one_line_error(
        lambda: linear_recurrence_naive(x["query"], x["key"], x["value"], wrong_state, **la, update_rule="linear"),
        "past_state", str((B, 2, D_K, D_V)), str(tuple(wrong_state.shape)),
    )  # fmt: skip
    bad_decay = x["decay"][..., :1].expand(B, T, 3)
    _assert_one_line_error(
        lambda: linear_recurrence_naive(**{**x, "decay": bad_decay}, **la, update_rule="gated"), "decay"
    )
    _assert_one_line_error(
        lambda: linear_recurrence_naive(**x, q_num_heads=3, kv_num_heads=2, update_rule="gated"), "q_num_heads"
    )
    _assert_one_line_error(lambda: linear_recurrence_naive(**x, **la, update_rule="mamba"), "update_rule")
    conv = _conv_inputs(4)
    _assert_one_line_error(
        lambda: causal_conv_with_state_naive(**{**conv, "past_state": conv["past_state"][..., :2]}), "past_state"
    )
    _assert_one_line_error(lambda: causal_conv_with_state_naive(**conv, activation="relu"), "activation")


def test_the_standard_refuses_what_the_reference_refuses():
    """ONNX Runtime's shape inference refuses decay given to ``linear`` too: the refusal mirrors the standard."""
    x = {n: t.numpy() for n, t in _linear_attention_inputs("gated", "head", None, 2, 2, False, seed=1).items()}
    names = [n if n in x else None for n in LA_INPUTS]
    model = _one_node_model("LinearAttention", names, x, q_num_heads=2, kv_num_heads=2, update_rule="linear")
    with pytest.raises(Exception, match="forbids decay"):
        ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    assert onnx.defs.get_schema("LinearAttention", 27).since_version == 27


def test_causal_conv_pad_steps_are_skipped():
    """A pad step neither moves the window nor gets an output: a right-padded row equals the row alone, and
    a pad in the middle equals the row with that step removed."""
    x = _conv_inputs(4, steps=7, seed=11)
    rest = {n: t for n, t in x.items() if n not in ("input", "past_state")}
    pad = torch.zeros(B, 7, dtype=torch.bool)
    pad[0, 5:] = True  # right padding
    pad[1, 2] = True  # a hole
    out, state = causal_conv_with_state_naive(**x, activation="silu", pad_mask=pad)
    for row in range(B):
        keep = ~pad[row]
        alone, alone_state = causal_conv_with_state_naive(
            x["input"][row : row + 1][:, :, keep], past_state=x["past_state"][row : row + 1], **rest, activation="silu"
        )
        torch.testing.assert_close(out[row : row + 1][:, :, keep], alone, rtol=0, atol=0)
        torch.testing.assert_close(state[row : row + 1], alone_state, rtol=0, atol=0)
        assert torch.all(out[row][:, ~keep] == 0)
