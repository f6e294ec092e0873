"""The linear-recurrence family as standard ONNX: ``rnnx::LinearRecurrence`` on ``ai.onnx::LinearAttention-27`` and
``rnnx::CausalConvWithState`` on ``ai.onnx::CausalConvWithState-27``, plus ordinary nodes for what the standard lacks.

One writer per op, :func:`linear_recurrence_nodes` and :func:`causal_conv_nodes`, emits the lowering either as a
model-local function's body (attributes by reference: the rnnx node's own) or inline in a graph (attribute values
given: the portable ``onnx`` target, which has no custom domain). What is added around the standard op:

* the pad mask (non-zero = pad, any dtype): LinearRecurrence multiplies key and decay by ``keep = not pad`` so a
  pad step neither writes nor decays the state (beta needs nothing: with a zero key the write is zero);
  CausalConvWithState moves each row's real steps to the front (ranks from two CumSums, a ScatterElements),
  convolves, gathers the outputs back (0 at pads) and reads the state after each row's last real step;
* rnnx's two extensions of the heads: ``qk_l2_norm`` divides each query and key head by sqrt(sum(x^2) + 1e-6)
  (in fp32), and grouped value (H_kv a multiple of H_q) repeats each query and key head H_kv / H_q times, so the
  standard op sees H_q = H_kv;
* the state in fp32 whatever the activation dtype: LinearAttention's state type is its own (type parameter S),
  and an absent past_state becomes fp32 zeros so the present state is fp32 too; CausalConvWithState's state
  has the activation type T, so the fp32 state is cast to T around it (exact: it holds past inputs, which
  were of type T).

Opset 27 has no fp64 LinearAttention / CausalConvWithState: fp64 activations are refused here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Optional, Union

import onnx
from onnx import helper
from onnxscript import ir
from onnxscript import opset18 as ox

from rnnx.runtime.contract import ops as spec

from .builder import NodeWriter
from .op_export import NodeContext, OpExport, check_every_input, input_elem_type, present_inputs
from .schemas import op_function
from .translate import bind_state_dtypes, custom_op, int32_mask, node_attributes

#: The default-domain opset that standardised both ops.
STANDARD_OPSET = 27
#: Domains of the op a lowering ends in: the standard's, or ONNX Runtime's contrib ops (the same inputs,
#: outputs and attributes, with native CPU kernels; checked equal by tests/test_recurrence_family_onnx.py).
STANDARD_DOMAIN = ""
MS_DOMAIN = "com.microsoft"
MS_DOMAIN_VERSION = 1
#: Not a domain: the lowering for default-domain opsets before 27 (19 at least: Equal on strings), standard ops
#: only: a ``Scan`` over time for the recurrence, taps gathered and summed for the convolution.
SCAN = "scan"
#: The lowest default-domain opset of the :data:`SCAN` lowering.
MIN_SCAN_OPSET = 19
_FP32 = onnx.TensorProto.FLOAT
#: Attribute values of an inline lowering, or None for a function body (attributes by reference).
AttributeValues = Optional[Mapping[str, Union[int, float, str]]]


def _attribute(name: str, values: AttributeValues, kind: int, ref: Optional[str] = None) -> onnx.AttributeProto:
    """Attribute ``name`` of a standard node: the given value, or a reference to the function's ``ref or name``."""
    if values is None:
        return onnx.AttributeProto(name=name, ref_attr_name=ref or name, type=kind)
    return helper.make_attribute(name, values[ref or name])


def _int_value(w: NodeWriter, name: str, values: AttributeValues) -> str:
    """A 0-D int64 constant of attribute ``name`` (its value, or the function's attribute)."""
    return w.attribute_int(name) if values is None else w.scalar_int(int(values[name]), name)


def _keep_mask(w: NodeWriter, mask: str) -> tuple[str, str]:
    """``(pad, keep)`` as bool (B, T) from a mask of any dtype, non-zero = pad."""
    pad = w.op("Cast", [mask], "pad", to=onnx.TensorProto.BOOL)
    return pad, w.op("Not", [pad], "keep")


@dataclass(frozen=True)
class HeadLayout:
    """What a ``LinearRecurrence`` node asks of its query and key heads, when known where the lowering is written
    (an inline lowering, or a function overload per layout): ``qk_l2_norm`` and ``grouped_value`` (H_kv > H_q).
    The ``None`` fields of :data:`DYNAMIC_HEADS` are decided by the node's attributes at run time instead (the one
    function of the TensorRT target's "any" body)."""

    qk_l2_norm: Optional[bool]
    grouped_value: Optional[bool]

    @staticmethod
    def of(values: Mapping[str, Union[int, float, str]]) -> HeadLayout:
        """The layout of a node with attribute ``values`` (``qk_l2_norm`` may be left out: the record's default)."""
        norm = values.get("qk_l2_norm", spec.LINEAR_RECURRENCE.attributes["qk_l2_norm"])
        return HeadLayout(bool(norm), int(values["kv_num_heads"]) > int(values["q_num_heads"]))

    @property
    def suffix(self) -> str:
        """The function overload's suffix: ``_qknorm`` and / or ``_gv``."""
        return ("_qknorm" if self.qk_l2_norm else "") + ("_gv" if self.grouped_value else "")


#: The layout of a node with neither extension, and the layout decided at run time.
PLAIN_HEADS = HeadLayout(False, False)
DYNAMIC_HEADS = HeadLayout(None, None)


def _l2_normalize_heads(w: NodeWriter, x: str, heads: str, dynamic_flag: Optional[str] = None) -> str:
    """x (B, T, H*d) with each of its ``heads`` (a 1-D int64 name) divided by sqrt(sum(x^2) + 1e-6), in fp32 and
    cast back; with ``dynamic_flag`` (0-D bool) only where the flag holds."""
    shape = w.op("Concat", [w.ints([0, 0]), heads, w.ints([-1])], "heads_shape", axis=0)
    xh = w.op("Reshape", [w.op("Cast", [x], to=_FP32), shape], "x_heads")
    sumsq = w.op("ReduceSum", [w.op("Mul", [xh, xh]), w.ints([-1])], "sumsq", keepdims=1)
    norm = w.op("Sqrt", [w.op("Add", [sumsq, w.scalar_float(spec.QK_L2_NORM_EPS)])], "norm")
    normalized = w.op("CastLike", [w.op("Reshape", [w.op("Div", [xh, norm]), w.op("Shape", [x])]), x], "normalized")
    return normalized if dynamic_flag is None else w.op("Where", [dynamic_flag, normalized, x], "maybe_normalized")


def _repeat_heads(w: NodeWriter, x: str, heads: str, repeats: str) -> str:
    """x (B, T, H*d) -> (B, T, H*R*d): each of its ``heads`` repeated ``repeats`` (1-D int64 names) times."""
    xh = w.op("Reshape", [x, w.op("Concat", [w.ints([0, 0]), heads, w.ints([1, -1])], axis=0)], "x_heads")
    tiled = w.op("Expand", [xh, w.op("Concat", [w.ints([1, 1, 1]), repeats, w.ints([1])], axis=0)], "x_tiled")
    return w.op("Reshape", [tiled, w.ints([0, 0, -1])], "x_repeated")


def _prepare_query_key(
    w: NodeWriter, query: str, key: str, values: AttributeValues, layout: HeadLayout
) -> tuple[str, str, str]:
    """``(query, key, q_num_heads attribute)`` for the standard op (module docstring): normalised, and for grouped
    value each head repeated H_kv / H_q times; the standard node's H_q is then the node's ``kv_num_heads``. For
    :data:`DYNAMIC_HEADS` both follow the attributes at run time (R = max(1, H_kv / H_q) repeats, 1 a no-op)."""
    if layout == PLAIN_HEADS:
        return query, key, "q_num_heads"
    heads_q = w.op("Unsqueeze", [_int_value(w, "q_num_heads", values), w.ints([0])], "heads_q")
    heads_kv = w.op("Unsqueeze", [_int_value(w, "kv_num_heads", values), w.ints([0])], "heads_kv")
    heads_k = w.op("Min", [heads_q, heads_kv], "heads_k")
    if layout.qk_l2_norm is not False:
        flag = None
        if layout.qk_l2_norm is None:
            flag = w.op("Cast", [_int_value(w, "qk_l2_norm", values)], "qk_l2_norm", to=onnx.TensorProto.BOOL)
        query, key = _l2_normalize_heads(w, query, heads_q, flag), _l2_normalize_heads(w, key, heads_k, flag)
    if layout.grouped_value is not False:
        repeats = w.op("Max", [w.op("Div", [heads_kv, heads_q]), w.ints([1])], "repeats")
        query, key = _repeat_heads(w, query, heads_q, repeats), _repeat_heads(w, key, heads_k, repeats)
    return query, key, "kv_num_heads" if layout.grouped_value else "q_num_heads"


def linear_recurrence_nodes(
    w: NodeWriter,
    inputs: Mapping[str, str],
    outputs: Mapping[str, str],
    values: AttributeValues = None,
    domain: str = STANDARD_DOMAIN,
    layout: Optional[HeadLayout] = None,
) -> None:
    """Append the lowering of one ``LinearRecurrence``: ``inputs`` maps the record's input names that are present
    to value names, ``outputs`` its two outputs to the names to write; ``values`` the attributes (None: refs);
    ``domain`` that of the ``LinearAttention`` node (:data:`STANDARD_DOMAIN` or :data:`MS_DOMAIN`); ``layout`` the
    node's :class:`HeadLayout` (by default read from ``values``, else :data:`DYNAMIC_HEADS`)."""
    if layout is None:
        layout = HeadLayout.of(values) if values is not None else DYNAMIC_HEADS
    query, key, value = inputs["query"], inputs["key"], inputs["value"]
    decay, beta, mask = inputs.get("decay"), inputs.get("beta"), inputs.get("mask_pad")
    if mask is not None:
        _, keep = _keep_mask(w, mask)
        keep3 = w.op("Unsqueeze", [w.op("CastLike", [keep, query]), w.ints([-1])], "keep3")  # (B, T, 1)
        key = w.op("Mul", [key, keep3], "key_kept")
        decay = None if decay is None else w.op("Mul", [decay, keep3], "decay_kept")
    state = inputs.get("past_state")
    if state is None:  # fp32 zeros (B, H_kv, d_k, d_v), so the present state is fp32 whatever the activations
        heads_q = w.op("Unsqueeze", [_int_value(w, "q_num_heads", values), w.ints([0])], "heads_q")
        heads_kv = w.op("Unsqueeze", [_int_value(w, "kv_num_heads", values), w.ints([0])], "heads_kv")
        d_k = w.op("Div", [w.op("Shape", [query], start=2, end=3), heads_q], "d_k")
        d_v = w.op("Div", [w.op("Shape", [value], start=2, end=3), heads_kv], "d_v")
        shape = w.op("Concat", [w.op("Shape", [query], end=1), heads_kv, d_k, d_v], "state_shape", axis=0)
        zero = helper.make_tensor("zero", _FP32, [1], [0.0])
        state = w.op("ConstantOfShape", [shape], "zero_state", value=zero)
    query_in = query
    if domain == SCAN:
        heads_q = w.op("Unsqueeze", [_int_value(w, "q_num_heads", values), w.ints([0])], "heads_q")
        d_k = w.op("Div", [w.op("Shape", [query], start=2, end=3), heads_q], "d_k")
        query, key, _ = _prepare_query_key(w, query, key, values, layout)
        _scan_recurrence(w, query, key, value, state, decay, beta, values, outputs, d_k, query_in)
        return
    output = outputs["output"]
    # com.microsoft's type inference gives present_state query's type: run it in fp32 (no-op casts for fp32)
    if domain == MS_DOMAIN:
        query, key, value = (w.op("Cast", [t], f"{t}_f32", to=_FP32) for t in (query, key, value))
        decay, beta = (None if t is None else w.op("Cast", [t], "f32", to=_FP32) for t in (decay, beta))
        output = w.fresh("output_f32")
    query, key, q_heads_attribute = _prepare_query_key(w, query, key, values, layout)
    node = helper.make_node(
        "LinearAttention", [query, key, value, state, decay or "", beta or ""],
        [output, outputs["present_state"]], name=w.fresh("n_LinearAttention"), domain=domain,
    )  # fmt: skip
    while node.input and node.input[-1] == "":
        node.input.pop()
    INT, FLOAT, STRING = onnx.AttributeProto.INT, onnx.AttributeProto.FLOAT, onnx.AttributeProto.STRING
    node.attribute.append(_attribute("q_num_heads", values, INT, ref=q_heads_attribute))
    for name, kind in (("kv_num_heads", INT), ("update_rule", STRING), ("scale", FLOAT)):
        node.attribute.append(_attribute(name, values, kind))
    w.nodes.append(node)
    if output != outputs["output"]:
        w.nodes.append(
            helper.make_node("CastLike", [output, query_in], [outputs["output"]], name=w.fresh("n_CastLike"))
        )


def _string_flag(w: NodeWriter, name: str, values: AttributeValues, accepted: tuple[str, ...]) -> str:
    """A 0-D fp32 1.0 / 0.0: whether string attribute ``name`` is one of ``accepted`` (given, or compared)."""
    if values is not None:
        return w.scalar_float(1.0 if values[name] in accepted else 0.0, f"is_{name}")
    given = w.attribute_string(name)
    hit = None
    for word in accepted:
        text = w.op("Constant", [], "word", value_string=word)
        same = w.op("Equal", [given, text])
        hit = same if hit is None else w.op("Or", [hit, same])
    return w.op("Cast", [hit], f"is_{name}", to=_FP32)


def _scan_recurrence(
    w: NodeWriter,
    query: str,
    key: str,
    value: str,
    state: str,
    decay: Optional[str],
    beta: Optional[str],
    values: AttributeValues,
    outputs: Mapping[str, str],
    d_k: str,
    query_in: str,
) -> None:
    """The recurrence as one ``Scan`` over time in fp32 (standard ops before opset 27), on query and key as
    :func:`_prepare_query_key` leaves them, ``d_k`` their head dim (1-D int64). Per step, on (B, H_kv, ...)::

        S' = exp(g_t) S;  w = v_t + delta (beta_t (v_t - S'^T k_t) - v_t);  S = S' + k_t w^T;  o_t = s q_t^T S

    with delta 1 for the delta rules (read from ``update_rule``; a decay given to an ungated rule is zeroed the
    same way), and s the scale (1/sqrt(d_k) for 0). Step tensors are reshaped to heads by shapes computed once.
    """
    heads_kv = w.op("Unsqueeze", [_int_value(w, "kv_num_heads", values), w.ints([0])], "heads_kv")
    d_v = w.op("Div", [w.op("Shape", [value], start=2, end=3), heads_kv], "d_v")
    zero, one, minus = w.ints([0]), w.ints([1]), w.ints([-1])
    shape = {
        "q": w.op("Concat", [zero, heads_kv, minus, d_k], "q_heads", axis=0),  # (B, H_kv, G, d_k)
        "k": w.op("Concat", [zero, heads_kv, d_k, one], "k_heads", axis=0),  # (B, H_kv, d_k, 1)
        "v": w.op("Concat", [zero, heads_kv, one, d_v], "v_heads", axis=0),  # (B, H_kv, 1, d_v)
        "g": w.op("Concat", [zero, heads_kv, minus, one], "g_heads", axis=0),  # (B, H_kv, 1 or d_k, 1)
        "b": w.ints([0, -1, 1, 1], "b_heads"),  # (B, H_kv or 1, 1, 1)
        "o": w.ints([0, -1], "o_flat"),
    }
    if values is not None:
        scale = w.scalar_float(float(values["scale"]), "scale")
    else:
        scale = w.attribute_float("scale", "scale")
    inv_sqrt = w.op("Reciprocal", [w.op("Sqrt", [w.op("Cast", [d_k], to=_FP32)])])
    scale = w.op("Where", [w.op("Equal", [scale, w.scalar_float(0.0)]), inv_sqrt, scale], "scale_used")
    delta = _string_flag(w, "update_rule", values, ("delta", "gated_delta"))
    gated = _string_flag(w, "update_rule", values, ("gated", "gated_delta"))
    scanned = {"q": query, "k": key, "v": value}
    if decay is not None:
        scanned["g"] = decay
    if beta is not None:
        scanned["b"] = beta
    # time-major (T, B, .) fp32: the Scan walks axis 0 (the reference evaluator's Scan takes no other axis)
    scanned = {
        n: w.op("Transpose", [w.op("Cast", [t], to=_FP32)], f"{n}_tm", perm=[1, 0, 2]) for n, t in scanned.items()
    }
    if "g" in scanned:
        scanned["g"] = w.op("Mul", [scanned["g"], gated], "g_used")

    b = NodeWriter("step_")
    step = {n: f"step_in_{n}" for n in ("S", *scanned)}
    x = {n: b.op("Reshape", [step[n], shape[n]], f"{n}_h") for n in scanned}
    S = step["S"]
    if "g" in x:
        S = b.op("Mul", [b.op("Exp", [x["g"]]), S], "S_decayed")
    write = x["v"]
    if "b" in x:
        k_row = b.op("Transpose", [x["k"]], perm=[0, 1, 3, 2])  # (B, H_kv, 1, d_k)
        correction = b.op("Mul", [x["b"], b.op("Sub", [x["v"], b.op("MatMul", [k_row, S])])])
        write = b.op("Add", [x["v"], b.op("Mul", [delta, b.op("Sub", [correction, x["v"]])])], "write")
    S_new = b.op("Add", [S, b.op("MatMul", [x["k"], write])], "S_new")
    out = b.op("Mul", [b.op("Reshape", [b.op("MatMul", [x["q"], S_new]), shape["o"]]), scale], "o")
    b.nodes.append(helper.make_node("Identity", [S_new], ["step_out_S"], name=b.fresh("n_S")))
    b.nodes.append(helper.make_node("Identity", [out], ["step_out_o"], name=b.fresh("n_o")))
    body = helper.make_graph(
        b.nodes, "linear_recurrence_step",
        [helper.make_tensor_value_info(step[n], _FP32, None) for n in step],
        [helper.make_tensor_value_info(n, _FP32, None) for n in ("step_out_S", "step_out_o")],
    )  # fmt: skip
    state32 = w.op("Cast", [state], "state_f32", to=_FP32)
    n = len(scanned)
    present, out_tm = w.op("Scan", [state32, *scanned.values()], "scan", num_outputs=2, body=body, num_scan_inputs=n)
    out_all = w.op("Transpose", [out_tm], "out_bf", perm=[1, 0, 2])
    w.nodes.append(helper.make_node("Identity", [present], [outputs["present_state"]], name=w.fresh("n_present")))
    w.nodes.append(helper.make_node("CastLike", [out_all, query_in], [outputs["output"]], name=w.fresh("n_out")))


def causal_conv_nodes(
    w: NodeWriter,
    inputs: Mapping[str, str],
    outputs: Mapping[str, str],
    values: AttributeValues = None,
    domain: str = STANDARD_DOMAIN,
) -> None:
    """Append the lowering of one ``CausalConvWithState`` (arguments as :func:`linear_recurrence_nodes`)."""
    x, weight, bias, mask = inputs["input"], inputs["weight"], inputs.get("bias"), inputs.get("mask_pad")
    past = inputs.get("past_state")
    if past is None:  # zeros (B, C, K-1) of the input's type
        K1 = w.op("Sub", [w.op("Shape", [weight], start=2, end=3), w.ints([1])], "K_minus_1")
        shape = w.op("Concat", [w.op("Shape", [x], end=2), K1], "state_shape", axis=0)
        state = w.op("CastLike", [w.op("ConstantOfShape", [shape], "zero_state"), x], "state_t")
    else:
        state = w.op("CastLike", [past, x], "state_t")
    activation = _attribute("activation", values, onnx.AttributeProto.STRING)

    def conv(source: str, y: str, present: str) -> None:
        if domain == SCAN:  # taps gathered from [state | source] and summed: any K, any C, opset >= 19
            window = w.op("Concat", [state, source], "window_all", axis=2)  # (B, C, K-1+T)
            zero_i, one_i = w.scalar_int(0), w.scalar_int(1)
            steps = w.op("Range", [zero_i, w.op("Squeeze", [w.op("Shape", [source], start=2, end=3)]), one_i])
            taps = w.op("Range", [zero_i, w.op("Squeeze", [w.op("Shape", [weight], start=2, end=3)]), one_i])
            index = w.op("Add", [w.op("Unsqueeze", [steps, w.ints([1])]), w.op("Unsqueeze", [taps, w.ints([0])])])
            gathered = w.op("Gather", [window, index], "taps", axis=2)  # (B, C, T, K)
            total = w.op("ReduceSum", [w.op("Mul", [gathered, weight]), w.ints([-1])], "conv", keepdims=0)
            if bias:
                total = w.op("Add", [total, w.op("Unsqueeze", [bias, w.ints([-1])])], "conv_bias")
            silu = w.op("CastLike", [_string_flag(w, "activation", values, ("silu", "swish")), total])
            swished = w.op("Sub", [w.op("Mul", [total, w.op("Sigmoid", [total])]), total])
            w.nodes.append(helper.make_node("Add", [total, w.op("Mul", [silu, swished])], [y], name=w.fresh("n_y")))
            start, end = w.op("Shape", [source], start=2, end=3), w.ints([2**62])
            last = helper.make_node("Slice", [window, start, end, w.ints([2])], [present], name=w.fresh("n_present"))
            w.nodes.append(last)
            return
        node = helper.make_node(
            "CausalConvWithState", [source, weight, bias or "", state], [y, present],
            name=w.fresh("n_CausalConvWithState"), domain=domain,
        )  # fmt: skip
        node.attribute.append(activation)
        w.nodes.append(node)

    if mask is None:
        present_t = w.fresh("present_t")
        conv(x, outputs["output"], present_t)
        w.nodes.append(
            helper.make_node("Cast", [present_t], [outputs["present_state"]], name=w.fresh("n_Cast"), to=_FP32)
        )
        return
    pad, keep = _keep_mask(w, mask)
    one, axis = w.ints([1]), w.scalar_int(1)
    keep_i = w.op("Cast", [keep], "keep_i", to=onnx.TensorProto.INT64)
    real = w.op("ReduceSum", [keep_i, one], "real", keepdims=1)  # (B, 1) real steps per row
    before = w.op("Sub", [w.op("CumSum", [keep_i, axis], "real_upto"), one], "rank_real")
    after = w.op("CumSum", [w.op("Cast", [pad], to=onnx.TensorProto.INT64), axis], "pads_upto")
    rank = w.op("Where", [keep, before, w.op("Sub", [w.op("Add", [real, after]), one])], "rank")  # t -> slot
    steps = w.op("Shape", [mask], start=1, end=2)
    positions = w.op("Expand", [w.op("Range", [w.scalar_int(0), w.op("Squeeze", [steps]), w.scalar_int(1)]),
                                w.op("Shape", [mask])], "positions")  # fmt: skip
    order = w.op("ScatterElements", [positions, rank, positions], "order", axis=1)  # slot -> t
    full_shape = w.op("Shape", [x], "full_shape")

    def along_time(index: str) -> str:  # (B, T) -> (B, C, T)
        return w.op("Expand", [w.op("Unsqueeze", [index, one]), full_shape])

    packed = w.op("GatherElements", [x, along_time(order)], "packed", axis=2)
    y_packed, unused = w.fresh("y_packed"), w.fresh("present_unused")
    conv(packed, y_packed, unused)
    y = w.op("GatherElements", [y_packed, along_time(rank)], "y", axis=2)
    keep3 = w.op("CastLike", [w.op("Unsqueeze", [keep, one]), x], "keep3")  # (B, 1, T)
    w.nodes.append(helper.make_node("Mul", [y, keep3], [outputs["output"]], name=w.fresh("n_Mul")))
    window = w.op("Concat", [state, packed], "window", axis=2)  # (B, C, K-1+T)
    K1 = w.op("Shape", [state], start=2, end=3)
    taps = w.op("Add", [real, w.op("Range", [w.scalar_int(0), w.op("Squeeze", [K1]), w.scalar_int(1)])], "taps")
    taps_shape = w.op("Concat", [w.op("Shape", [x], end=2), K1], axis=0)
    taps3 = w.op("Expand", [w.op("Unsqueeze", [taps, one]), taps_shape], "taps3")  # (B, C, K-1)
    present = w.op("GatherElements", [window, taps3], "present_t", axis=2)
    w.nodes.append(helper.make_node("Cast", [present], [outputs["present_state"]], name=w.fresh("n_Cast"), to=_FP32))


#: Op record -> its lowering writer.
LOWERINGS = {
    spec.LINEAR_RECURRENCE.onnx_name: linear_recurrence_nodes,
    spec.CAUSAL_CONV_WITH_STATE.onnx_name: causal_conv_nodes,
}


def overload_name(op: spec.OpSpec, present: frozenset[str]) -> str:
    """The function overload of ``op`` for the optional inputs ``present``: ``"with_" + names`` (``"plain"``)."""
    names = [n for n in op.inputs if n in op.optional_inputs and n in present]
    return "with_" + "_".join(names) if names else "plain"


#: Overload suffix and body description of each lowering (keyed as the ``domain`` arguments).
_FORMS = {
    STANDARD_DOMAIN: ("", "ai.onnx::{name}-27"),
    MS_DOMAIN: ("_ms", "com.microsoft::{name}"),
    SCAN: ("_scan", "standard ops (Scan / gathered taps)"),
}


def standard_function(
    op: spec.OpSpec,
    present: frozenset[str],
    domain: str = STANDARD_DOMAIN,
    opset_version: int = STANDARD_OPSET,
    layout: HeadLayout = PLAIN_HEADS,
) -> onnx.FunctionProto:
    """The model-local function ``rnnx::<op>`` (overload :func:`overload_name` plus the head layout's and the form's
    suffixes) ending in the opset-27 standard op (``opset_version`` 27 or later), ONNX Runtime's contrib op
    (:data:`MS_DOMAIN`) or the :data:`SCAN` lowering (standard ops of ``opset_version`` >= :data:`MIN_SCAN_OPSET`);
    ``layout`` is the LinearRecurrence node's :class:`HeadLayout`."""
    w = NodeWriter("")
    inputs = {n: n for n in op.inputs if n not in op.optional_inputs or n in present}
    if op is spec.LINEAR_RECURRENCE:
        linear_recurrence_nodes(w, inputs, {n: n for n in op.outputs}, None, domain, layout)
    else:
        LOWERINGS[op.onnx_name](w, inputs, {n: n for n in op.outputs}, None, domain)
    suffix, body = _FORMS[domain]
    overload = overload_name(op, present) + layout.suffix + suffix
    extra = ((MS_DOMAIN, MS_DOMAIN_VERSION),) if domain == MS_DOMAIN else ()
    doc = f"{op.onnx_name}, overload {overload}: {body.format(name=_standard_name(op))} body."
    return op_function(op, w.nodes, opset_version, doc, overload, extra_opsets=extra)


def _standard_name(op: spec.OpSpec) -> str:
    return "LinearAttention" if op is spec.LINEAR_RECURRENCE else op.onnx_name


# ----- the nodes the torch exporter writes (translations of the torch ops) -----


def _linear_recurrence_translation(full_layout: bool) -> Callable[..., tuple[Any, Any]]:
    """The translation of ``torch.ops.rnnx.linear_recurrence`` into an ``rnnx::LinearRecurrence`` node; with
    ``full_layout`` (the TensorRT target) every input is present: past_state fp32 zeros (B, H_kv, d_k, d_v), decay
    zeros (B, T, H_kv) and beta zeros (B, T, 1) where the rule takes none (the plugin reads the rule, not these),
    mask_pad int32 (zeros where the model has none)."""

    def translate(
        query: Any, key: Any, value: Any, past_state: Optional[Any], decay: Optional[Any], beta: Optional[Any],
        mask_pad: Optional[Any], q_num_heads: int, kv_num_heads: int, update_rule: str, scale: float,
        qk_l2_norm: int = 0,
    ) -> tuple[Any, Any]:  # fmt: skip
        if query.dtype == ir.DataType.DOUBLE:
            raise ValueError("LinearRecurrence: fp64 activations have no ONNX form (opset 27 and ONNX Runtime's "
                             "LinearAttention take fp32 / fp16 / bf16); export in fp32")  # fmt: skip
        if full_layout:
            lead = ox.Shape(query, end=2)  # (B, T)
            heads = ox.Constant(value_ints=[kv_num_heads])
            if past_state is None:
                d_k = ox.Div(ox.Shape(query, start=2), ox.Constant(value_ints=[q_num_heads]))
                d_v = ox.Div(ox.Shape(value, start=2), heads)
                shape = ox.Concat(ox.Shape(query, end=1), heads, d_k, d_v, axis=0)
                past_state = ox.Expand(ox.Constant(value_float=0.0), shape)
            zero = ox.CastLike(ox.Constant(value_float=0.0), query)
            if decay is None:
                decay = ox.Expand(zero, ox.Concat(lead, heads, axis=0))
            if beta is None:
                beta = ox.Expand(zero, ox.Concat(lead, ox.Constant(value_ints=[1]), axis=0))
            mask_pad = int32_mask(mask_pad, lead)
        values = dict(q_num_heads=int(q_num_heads), kv_num_heads=int(kv_num_heads), update_rule=str(update_rule),
                      scale=float(scale), qk_l2_norm=int(qk_l2_norm))  # fmt: skip
        attrs = node_attributes(spec.LINEAR_RECURRENCE, values)
        outputs = custom_op(spec.LINEAR_RECURRENCE)(query, key, value, past_state, decay, beta, mask_pad, **attrs)
        bind_state_dtypes(spec.LINEAR_RECURRENCE, outputs, double=False)
        return outputs

    return translate


def _causal_conv_translation(full_layout: bool) -> Callable[..., tuple[Any, Any]]:
    """The translation of ``torch.ops.rnnx.causal_conv_with_state`` into an ``rnnx::CausalConvWithState`` node; with
    ``full_layout`` every input is present: bias zeros (C,), past_state fp32 zeros (B, C, K-1), mask_pad int32."""

    def translate(
        input: Any, weight: Any, bias: Optional[Any], past_state: Optional[Any], mask_pad: Optional[Any],
        activation: str,
    ) -> tuple[Any, Any]:  # fmt: skip
        if input.dtype == ir.DataType.DOUBLE:
            raise ValueError("CausalConvWithState: fp64 activations have no ONNX form (opset 27 and ONNX Runtime's "
                             "CausalConvWithState take fp32 / fp16 / bf16); export in fp32")  # fmt: skip
        if full_layout:
            zero = ox.CastLike(ox.Constant(value_float=0.0), input)
            if bias is None:
                bias = ox.Expand(zero, ox.Shape(weight, end=1))
            if past_state is None:
                taps = ox.Sub(ox.Shape(weight, start=2), ox.Constant(value_ints=[1]))
                past_state = ox.Expand(ox.Constant(value_float=0.0), ox.Concat(ox.Shape(input, end=2), taps, axis=0))
            mask_pad = int32_mask(mask_pad, ox.Concat(ox.Shape(input, end=1), ox.Shape(input, start=2), axis=0))
        attrs = node_attributes(spec.CAUSAL_CONV_WITH_STATE, {"activation": str(activation)})
        outputs = custom_op(spec.CAUSAL_CONV_WITH_STATE)(input, weight, bias, past_state, mask_pad, **attrs)
        bind_state_dtypes(spec.CAUSAL_CONV_WITH_STATE, outputs, double=False)
        return outputs

    return translate


# ----- the bodies (op_export.OpExport) -----


@dataclass(frozen=True)
class FamilyVariant:
    """The body of one family node: which optional inputs it has and the form (:data:`STANDARD_DOMAIN`,
    :data:`MS_DOMAIN` or :data:`SCAN`); ``name`` is the function overload."""

    op: spec.OpSpec
    present: frozenset[str]
    form: str
    layout: HeadLayout = PLAIN_HEADS

    @property
    def name(self) -> str:
        return overload_name(self.op, self.present) + self.layout.suffix + _FORMS[self.form][0]


def _head_layout(node: onnx.NodeProto, op: spec.OpSpec) -> HeadLayout:
    """The :class:`HeadLayout` a LinearRecurrence node's attributes ask for (:data:`PLAIN_HEADS` for other ops)."""
    if op is not spec.LINEAR_RECURRENCE:
        return PLAIN_HEADS
    values = {
        **{a.name: a.default for a in op.attribute_records},
        **{a.name: helper.get_attribute_value(a) for a in node.attribute},
    }
    return HeadLayout.of(values)


def _check_opset(op: spec.OpSpec, form: str, opset: int) -> None:
    need = STANDARD_OPSET if form == STANDARD_DOMAIN else MIN_SCAN_OPSET if form == SCAN else 18
    if opset < need:
        raise ValueError(f"{op.onnx_name}: its ONNX form needs default-domain opset >= {need}, the graph has {opset} "
                         f"(export with --opset {need} or later)")  # fmt: skip


def _family_variant(op: spec.OpSpec) -> Callable[[onnx.NodeProto, NodeContext], FamilyVariant]:
    def variant(node: onnx.NodeProto, context: NodeContext) -> FamilyVariant:
        if input_elem_type(node, op, context) == onnx.TensorProto.DOUBLE:
            raise ValueError(f"{op.onnx_name} node {node.name!r}: fp64 activations have no ONNX form")
        target = context.target
        form = MS_DOMAIN if target.contrib_ops else STANDARD_DOMAIN if not target.custom_domain else SCAN
        _check_opset(op, form, context.opset)
        return FamilyVariant(op, present_inputs(node, op), form, _head_layout(node, op))

    return variant


def _family_any_variant(op: spec.OpSpec) -> Callable[[onnx.NodeProto, NodeContext], FamilyVariant]:
    def variant(node: onnx.NodeProto, context: NodeContext) -> FamilyVariant:
        check_every_input(node, op)
        _check_opset(op, SCAN, context.opset)
        return FamilyVariant(op, frozenset(op.inputs), SCAN)

    return variant


def _family_function(variant: FamilyVariant, context: NodeContext) -> onnx.FunctionProto:
    return standard_function(variant.op, variant.present, variant.form, context.opset, variant.layout)


def _family_any_function(variant: FamilyVariant, context: NodeContext) -> onnx.FunctionProto:
    """The one function of every node of the op (the TensorRT target's "any" body): heads decided at run time."""
    layout = DYNAMIC_HEADS if variant.op is spec.LINEAR_RECURRENCE else PLAIN_HEADS
    function = standard_function(variant.op, variant.present, SCAN, context.opset, layout)
    function.overload = ""
    return function


def _family_export(op: spec.OpSpec, translation: Callable[[bool], Callable[..., tuple[Any, Any]]]) -> OpExport:
    """The export record of a family op: its torch module ``rnnx.models.ops.<torch_name>``, its translation on a
    target (``translation(every_input_present)``), and the family's variants and function bodies."""
    return OpExport(
        spec=op,
        torch_module=f"rnnx.models.ops.{op.torch_name}",
        translation=lambda target: translation(target.every_input_present),
        variant=_family_variant(op),
        function=_family_function,
        any_variant=_family_any_variant(op),
        any_function=_family_any_function,
    )


LINEAR_RECURRENCE_EXPORT = _family_export(spec.LINEAR_RECURRENCE, _linear_recurrence_translation)
CAUSAL_CONV_EXPORT = _family_export(spec.CAUSAL_CONV_WITH_STATE, _causal_conv_translation)
