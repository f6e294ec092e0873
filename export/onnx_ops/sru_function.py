"""The standard-op body of ``rnnx::SRUScan``: one ONNX ``Scan`` over time per direction.

Everything that does not depend on c_{t-1} is computed for all steps at once outside the Scan
(split of U into x~, f, r[, x'], the biases, the scaled skip input, the pad mask); the Scan body
is the elementwise step::

    f = sigmoid(u_f + v_f * c)        r = sigmoid(u_r + v_r * c)      (u_f, u_r include the biases)
    c' = f * c + (1 - f) * u_x~       h = r * g(c') [+ (1 - r) * x']
    on a pad step: c' = c, h = 0

The backward direction (D = 2) is the same Scan walking t from L-1 down to 0
(``scan_input_directions`` / ``scan_output_directions`` = 1), so its h comes back in time order.
The body computes in the state dtype (fp32, or fp64 for fp64 U); h is cast back to U's dtype.

Two builders. :func:`sru_scan_function` writes one overload per structure (the ONNX Runtime target).
:func:`sru_scan_any_function` writes ONE body for every structure, reading D, k, the skip term and tanh
from the node's attributes (the TensorRT target, whose parser keys local functions by name only, so a
graph may hold one function per op). It needs every input present (x may be a 1-element dummy, the
mask all false) and handles both directions in a single Scan over a (B, D, d) state: the backward
direction's inputs are reversed in time before the Scan and its outputs after it; k = 4's highway
input and k = 3's scaled x are blended by 0/1 factors computed from the attributes, as is tanh.
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx
from onnx import TensorProto, helper

from rnnx.runtime.contract import ops as spec

from .builder import NodeWriter
from .op_export import NodeContext, OpExport, attribute, check_every_input, input_elem_type, present
from .overloads import SRUVariant, parse_sru_overload
from .schemas import op_function
from .translate import sru_scan_node, sru_scan_node_full

SRU = spec.SRU_SCAN


def state_elem_type(double: bool) -> int:
    """ONNX element type of the state: DOUBLE or FLOAT."""
    return TensorProto.DOUBLE if double else TensorProto.FLOAT


def _step_graph(v: SRUVariant, outer: dict[str, str], prefix: str) -> onnx.GraphProto:
    """Scan body: state c (B, d); scan inputs u_x, u_f, u_r (B, d)[, skip (B, d)][, pad (B, 1)].

    ``outer`` names the loop invariants read from the enclosing scope: v_f, v_r (d,), one, zero.
    """
    acc = state_elem_type(v.double)
    w = NodeWriter(prefix)
    names = ["c", "u_x", "u_f", "u_r"] + (["skip"] if v.has_skip_term else []) + (["pad"] if v.has_mask else [])
    inputs = {n: f"{prefix}{n}" for n in names}
    c = inputs["c"]
    f = w.op("Sigmoid", [w.op("Add", [inputs["u_f"], w.op("Mul", [outer["v_f"], c])])], "f")
    r = w.op("Sigmoid", [w.op("Add", [inputs["u_r"], w.op("Mul", [outer["v_r"], c])])], "r")
    one_minus_f = w.op("Sub", [outer["one"], f])
    c_new = w.op("Add", [w.op("Mul", [f, c]), w.op("Mul", [one_minus_f, inputs["u_x"]])], "c_new")
    g = w.op("Tanh", [c_new]) if v.use_tanh else c_new
    h = w.op("Mul", [r, g], "rg")
    if v.has_skip_term:
        h = w.op("Add", [h, w.op("Mul", [w.op("Sub", [outer["one"], r]), inputs["skip"]])], "h")
    if v.has_mask:
        c_new = w.op("Where", [inputs["pad"], c, c_new], "c_kept")
        h = w.op("Where", [inputs["pad"], outer["zero"], h], "h_masked")
    return _scan_body(w, inputs, names, c_new, h, acc, prefix, f"{prefix}step")


def _scan_body(
    w: NodeWriter, inputs: dict[str, str], names: list[str], c_new: str, h: str, acc: int, prefix: str, name: str
) -> onnx.GraphProto:
    """The Scan body ``name`` from the step's nodes in ``w``: inputs ``inputs[n]`` for ``n`` in ``names`` (the pad
    mask bool, the rest ``acc``), outputs ``<prefix>c_out`` and ``<prefix>h_out`` (``c_new`` and ``h``)."""
    c_out, h_out = f"{prefix}c_out", f"{prefix}h_out"
    w.nodes.append(helper.make_node("Identity", [c_new], [c_out], name=w.fresh("n_c_out")))
    w.nodes.append(helper.make_node("Identity", [h], [h_out], name=w.fresh("n_h_out")))
    value_infos = [
        helper.make_tensor_value_info(inputs[n], TensorProto.BOOL if n == "pad" else acc, None) for n in names
    ]
    outputs = [helper.make_tensor_value_info(c_out, acc, None), helper.make_tensor_value_info(h_out, acc, None)]
    return helper.make_graph(w.nodes, name, value_infos, outputs)


def sru_scan_function(variant: SRUVariant, opset_version: int) -> onnx.FunctionProto:
    """FunctionProto ``rnnx::SRUScan`` overload ``variant.name`` for default-domain ``opset_version``.

    Inputs U (L, B, D*d*k), x (L, B, D*d; read only when k = 3 with skip), weight_c, bias (2*D*d,),
    c0 (B, D*d), mask_pad (L, B; read only when the variant has it); outputs h (L, B, D*d) in U's
    dtype, c_last (B, D*d) in the state dtype. ``scale_x`` is read from the node's attribute.
    """
    v, k = variant, variant.num_matrices
    acc = state_elem_type(v.double)
    w = NodeWriter("")
    one = w.op("Cast", [w.scalar_float(1.0)], "one", to=acc)
    zero = w.op("Cast", [w.scalar_float(0.0)], "zero", to=acc)
    if v.num_directions == 1:
        _one_direction(w, v, k, acc, one, zero)
    else:
        _two_directions(w, v, k, acc, one, zero)
    return op_function(
        SRU, w.nodes, opset_version, f"SRUScan, overload {v.name}: standard-op body (Scan over time).", v.name
    )


def _one_direction(w: NodeWriter, v: SRUVariant, k: int, acc: int, one: str, zero: str) -> None:
    """One direction: U read as (L, B, d, k), x as (L, B, d), c0 as (B, d), no direction axis; the k columns are
    gathered (ONNX Runtime makes them one Split), f's and r's biases added to their columns."""
    U4 = w.op("Reshape", [w.op("Cast", ["U"], to=acc), w.ints([0, 0, -1, k])], "U4")  # (L, B, d, k)
    W = w.op("Reshape", [w.op("Cast", ["weight_c"], to=acc), w.ints([2, -1])], "W")  # (2, d)
    Bias = w.op("Reshape", [w.op("Cast", ["bias"], to=acc), w.ints([2, -1])], "Bias")
    idx = [w.scalar_int(i) for i in range(max(k, 2))]
    col = [w.op("Gather", [U4, idx[j]], f"u{j}", axis=3) for j in range(k)]  # (L, B, d)
    v_f, v_r, b_f, b_r = (w.op("Gather", [P, idx[g]], axis=0) for P in (W, Bias) for g in (0, 1))  # (d,)
    scan_inputs = [col[0], w.op("Add", [col[1], b_f], "uf"), w.op("Add", [col[2], b_r], "ur")]
    if v.has_skip_term:
        scan_inputs.append(col[3] if k == 4 else _scaled_x(w, acc))
    if v.has_mask:
        scan_inputs.append(w.op("Unsqueeze", [_pad_bool(w), w.ints([-1])], "pad"))  # (L, B, 1)
    body = _step_graph(v, {"v_f": v_f, "v_r": v_r, "one": one, "zero": zero}, "step0_")
    c0 = w.op("Cast", ["c0"], "c0_acc", to=acc)  # (B, d)
    c_last, h = w.op("Scan", [c0, *scan_inputs], "scan", num_outputs=2, body=body, num_scan_inputs=len(scan_inputs))
    _outputs(w, h, c_last)


def _two_directions(w: NodeWriter, v: SRUVariant, k: int, acc: int, one: str, zero: str) -> None:
    """Two directions, one Scan each (the backward one walks t down): every per-step tensor keeps singleton
    direction and column axes, (B, 1, d, 1), so one Split per axis cuts U, x and c0 with no Squeeze, and the
    biases go into U with one Add of a (D, d, k) tensor (zero on the x~ / x' columns) that ONNX Runtime folds
    from the initializers, as it folds the per-direction weight_c."""
    D = 2
    U5 = w.op("Reshape", [w.op("Cast", ["U"], to=acc), w.ints([0, 0, D, -1, k])], "U5")  # (L, B, D, d, k)
    Bias = w.op("Reshape", [w.op("Cast", ["bias"], to=acc), w.ints([2, D, -1])], "Bias")  # (2, D, d)
    bias_k = w.op(  # (D, d, k): b_f in column 1, b_r in column 2, zeros elsewhere
        "Pad", [w.op("Transpose", [Bias], perm=[1, 2, 0]), w.ints([0, 0, 1, 0, 0, k - 3])], "bias_k"
    )
    U_dirs = w.split(w.op("Add", [U5, bias_k], "U_biased"), D, 2, "U_d")
    W = w.op("Reshape", [w.op("Cast", ["weight_c"], to=acc), w.ints([2, D, 1, -1, 1])], "W")  # (2, D, 1, d, 1)
    idx = [w.scalar_int(i) for i in range(2)]
    skips = None
    if v.uses_x:  # (L, B, D*d) -> (L, B, 1, d, 1) per direction
        X = w.op("Reshape", [_scaled_x(w, acc), w.ints([0, 0, D, -1, 1])], "X_dirs")
        skips = w.split(X, D, 2, "skip_d")
    pad = w.op("Reshape", [_pad_bool(w), w.ints([0, 0, 1, 1, 1])], "pad") if v.has_mask else None  # (L, B, 1, 1, 1)
    C0 = w.op("Reshape", [w.op("Cast", ["c0"], to=acc), w.ints([0, D, -1, 1])], "C0_dirs")  # (B, D, d, 1)
    c0s = w.split(C0, D, 1, "c0_d")
    h_dirs, c_dirs = [], []
    for dr in range(D):
        col = w.split(U_dirs[dr], k, 4, f"u_d{dr}")  # k x (L, B, 1, d, 1)
        scan_inputs = col[:3]
        if v.has_skip_term:
            scan_inputs.append(col[3] if k == 4 else skips[dr])
        if pad is not None:
            scan_inputs.append(pad)
        v_f, v_r = (w.op("Gather", [w.op("Gather", [W, idx[g]], axis=0), idx[dr]], axis=0) for g in (0, 1))  # (1, d, 1)
        body = _step_graph(v, {"v_f": v_f, "v_r": v_r, "one": one, "zero": zero}, f"step{dr}_")
        c_last, h = w.op(
            "Scan",
            [c0s[dr], *scan_inputs],
            f"scan_d{dr}",
            num_outputs=2,
            body=body,
            num_scan_inputs=len(scan_inputs),
            scan_input_directions=[dr] * len(scan_inputs),
            scan_output_directions=[dr],
        )
        h_dirs.append(h)
        c_dirs.append(c_last)
    h = w.op("Reshape", [w.op("Concat", h_dirs, axis=2), w.ints([0, 0, -1])], "h_all")  # (L, B, D*d)
    c_last = w.op("Reshape", [w.op("Concat", c_dirs, axis=1), w.ints([0, -1])], "c_all")  # (B, D*d)
    _outputs(w, h, c_last)


def _scaled_x(w: NodeWriter, acc: int) -> str:
    """``scale_x * x`` in the state dtype, (L, B, D*d)."""
    scale = w.op("Cast", [w.attribute_float("scale_x")], "scale", to=acc)
    return w.op("Mul", [w.op("Cast", ["x"], to=acc), scale], "X")


def _pad_bool(w: NodeWriter) -> str:
    """The pad mask as bool, (L, B)."""
    return w.op("Cast", ["mask_pad"], "pad_bool", to=TensorProto.BOOL)


def _outputs(w: NodeWriter, h: str, c_last: str) -> None:
    """The function's outputs: h in U's dtype, c_last in the state dtype."""
    w.nodes.append(helper.make_node("CastLike", [h, "U"], ["h"], name="n_h"))
    w.nodes.append(helper.make_node("Identity", [c_last], ["c_last"], name="n_c_last"))


def _reverse_time(w: NodeWriter, value: str, hint: str) -> str:
    """``value`` with axis 0 (time) reversed (a Slice with step -1; any length, empty included)."""
    big = 2**62
    return w.op("Slice", [value, w.ints([-1]), w.ints([-big]), w.ints([0]), w.ints([-1])], hint)


def _backward_reversed(w: NodeWriter, value: str, axis: int, D: str, hint: str) -> str:
    """``value`` (time first, directions on ``axis``) with the directions after the first reversed in
    time: the layout one forward Scan walks for both directions. ``D`` is the 1-D direction count."""
    forward = w.op("Slice", [value, w.ints([0]), w.ints([1]), w.ints([axis])], f"{hint}_fwd")
    backward = w.op("Slice", [value, w.ints([1]), D, w.ints([axis])], f"{hint}_bwd")  # empty when D = 1
    return w.op("Concat", [forward, _reverse_time(w, backward, f"{hint}_bwd_rev")], hint, axis=axis)


def _flag(w: NodeWriter, condition: str, like: str, hint: str) -> str:
    """A 0-D 1.0 / 0.0 in ``like``'s dtype from a bool ``condition``."""
    return w.op("CastLike", [w.op("Cast", [condition], to=TensorProto.FLOAT), like], hint)


def sru_scan_any_function(double: bool, opset_version: int) -> onnx.FunctionProto:
    """FunctionProto ``rnnx::SRUScan`` (no overload) for every structure: see the module doc.

    Inputs U (L, B, D*d*k), x (L, B, D*d) or a 1-element dummy (read only when k = 3 with the skip term),
    weight_c, bias (2*D*d,), c0 (B, D*d), mask_pad (L, B), all present; outputs h (L, B, D*d) in U's
    dtype, c_last (B, D*d) in the state dtype (fp64 when ``double``).
    """
    acc = state_elem_type(double)
    w = NodeWriter("")
    D0 = w.attribute_int("num_directions", "D0")
    k0 = w.attribute_int("num_matrices", "k0")
    D = w.op("Unsqueeze", [D0, w.ints([0])], "D")  # (1,)
    k = w.op("Unsqueeze", [k0, w.ints([0])], "k")
    one = w.op("Cast", [w.scalar_float(1.0)], "one", to=acc)
    zero = w.op("Cast", [w.scalar_float(0.0)], "zero", to=acc)
    shape5 = w.op("Concat", [w.ints([0, 0]), D, w.ints([-1]), k], "shape5", axis=0)
    U5 = w.op("Reshape", [w.op("Cast", ["U"], to=acc), shape5], "U5")  # (L, B, D, d, k)
    width = w.op("Shape", ["c0"], "width", start=1, end=2)  # (1,) D*d
    h_shape = w.op("Concat", [w.op("Shape", ["U"], end=2), width], "h_shape", axis=0)  # (L, B, D*d)
    shape4 = w.op("Concat", [w.ints([0, 0]), D, w.ints([-1])], "shape4", axis=0)
    X = w.op("Reshape", [w.op("Expand", [w.op("Cast", ["x"], to=acc), h_shape]), shape4], "X")  # (L, B, D, d)
    skip_on = w.op("Cast", [w.attribute_int("has_skip_term")], "skip_on", to=TensorProto.BOOL)
    k3 = w.op("Equal", [k0, w.op("Constant", [], value_int=3)], "k3")
    use_x = _flag(w, w.op("And", [skip_on, k3]), one, "use_x")
    use_U = _flag(w, w.op("And", [skip_on, w.op("Not", [k3])]), one, "use_U")
    tanh_on = _flag(w, w.op("Cast", [w.attribute_int("use_tanh")], to=TensorProto.BOOL), one, "tanh_on")
    scale = w.op("Cast", [w.attribute_float("scale_x")], "scale", to=acc)

    def column(j: int) -> str:  # U5[..., j] (L, B, D, d)
        return w.op("Squeeze", [w.op("Slice", [U5, w.ints([j]), w.ints([j + 1]), w.ints([4])]), w.ints([4])])

    zeros = w.op(
        "ConstantOfShape", [w.op("Shape", [column(0)])], "zeros", value=helper.make_tensor("z", acc, [1], [0.0])
    )
    padded = w.op("Concat", [U5, w.op("Unsqueeze", [zeros, w.ints([4])])], "U5_padded", axis=4)
    highway = w.op("Squeeze", [w.op("Slice", [padded, w.ints([3]), w.ints([4]), w.ints([4])]), w.ints([4])])
    skip = w.op(  # k = 4: U's 4th column; k = 3: scale_x * x; no skip term: 0
        "Add", [w.op("Mul", [highway, use_U]), w.op("Mul", [w.op("Mul", [X, scale]), use_x])], "skip"
    )
    W = w.op("Reshape", [w.op("Cast", ["weight_c"], to=acc), w.op("Concat", [w.ints([2]), D, w.ints([-1])], axis=0)])
    Bias = w.op("Reshape", [w.op("Cast", ["bias"], to=acc), w.op("Concat", [w.ints([2]), D, w.ints([-1])], axis=0)])
    idx0, idx1 = w.scalar_int(0), w.scalar_int(1)
    v_f, v_r = (w.op("Gather", [W, i], axis=0) for i in (idx0, idx1))  # (D, d)
    b_f, b_r = (w.op("Gather", [Bias, i], axis=0) for i in (idx0, idx1))
    pad = w.op("Cast", ["mask_pad"], "pad_bool", to=TensorProto.BOOL)  # (L, B)
    pad = w.op("Expand", [w.op("Unsqueeze", [pad, w.ints([2, 3])]), w.op("Concat", [w.ints([1, 1]), D, w.ints([1])],
                axis=0)], "pad_LBD1")  # fmt: skip
    scan_inputs = [
        _backward_reversed(w, value, 2, D, hint)
        for value, hint in (
            (column(0), "u_x"), (w.op("Add", [column(1), b_f]), "u_f"), (w.op("Add", [column(2), b_r]), "u_r"),
            (skip, "skip_in"), (pad, "pad"),
        )
    ]  # fmt: skip
    C0 = w.op("Reshape", [w.op("Cast", ["c0"], to=acc), w.op("Concat", [w.ints([0]), D, w.ints([-1])], axis=0)])
    body = _any_step_graph(acc, {"v_f": v_f, "v_r": v_r, "one": one, "zero": zero, "tanh_on": tanh_on})
    c_last, h = w.op("Scan", [C0, *scan_inputs], "scan", num_outputs=2, body=body, num_scan_inputs=len(scan_inputs))
    h = _backward_reversed(w, h, 2, D, "h_time")  # the backward direction back in time order
    h_flat = w.op("Reshape", [h, w.ints([0, 0, -1])], "h_flat")
    w.nodes.append(helper.make_node("CastLike", [h_flat, "U"], ["h"], name="n_h"))
    w.nodes.append(helper.make_node("Reshape", [c_last, w.ints([0, -1])], ["c_last"], name="n_c_last"))
    return op_function(
        SRU, w.nodes, opset_version, "SRUScan: one standard-op body for every structure (attributes read in the body)."
    )


def _any_step_graph(acc: int, outer: dict[str, str]) -> onnx.GraphProto:
    """Scan body of :func:`sru_scan_any_function`: state c (B, D, d); scan inputs u_x, u_f, u_r, skip
    (B, D, d) and pad (B, D, 1). ``outer``: v_f, v_r (D, d), one, zero, tanh_on (0-D 0/1)."""
    prefix = "step_"
    w = NodeWriter(prefix)
    names = ["c", "u_x", "u_f", "u_r", "skip", "pad"]
    inputs = {n: f"{prefix}{n}" for n in names}
    c = inputs["c"]
    f = w.op("Sigmoid", [w.op("Add", [inputs["u_f"], w.op("Mul", [outer["v_f"], c])])], "f")
    r = w.op("Sigmoid", [w.op("Add", [inputs["u_r"], w.op("Mul", [outer["v_r"], c])])], "r")
    c_new = w.op("Add", [w.op("Mul", [f, c]), w.op("Mul", [w.op("Sub", [outer["one"], f]), inputs["u_x"]])], "c_new")
    off = w.op("Sub", [outer["one"], outer["tanh_on"]])
    g = w.op("Add", [w.op("Mul", [w.op("Tanh", [c_new]), outer["tanh_on"]]), w.op("Mul", [c_new, off])], "g")
    h = w.op("Add", [w.op("Mul", [r, g]), w.op("Mul", [w.op("Sub", [outer["one"], r]), inputs["skip"]])], "h")
    c_new = w.op("Where", [inputs["pad"], c, c_new], "c_kept")
    h = w.op("Where", [inputs["pad"], outer["zero"], h], "h_masked")
    return _scan_body(w, inputs, names, c_new, h, acc, prefix, "any_step")


# ----- the op's record for the exporter (op_export.OpExport) -----


def _double(node: onnx.NodeProto, context: NodeContext) -> bool:
    """fp64 state: from the overload the translation wrote, else from the known dtype of U."""
    if node.overload:
        try:
            return parse_sru_overload(node.overload).double
        except ValueError:
            pass
    return input_elem_type(node, SRU, context) == TensorProto.DOUBLE


def _variant(node: onnx.NodeProto, context: NodeContext) -> SRUVariant:
    a = {n: attribute(node, n, d) for n, d in SRU.attributes.items()}
    variant = SRUVariant(
        int(a["num_directions"]), int(a["num_matrices"]), bool(a["has_skip_term"]), bool(a["use_tanh"]),
        present(node, SRU, SRU.mask_input), _double(node, context),
    )  # fmt: skip
    if variant.uses_x and not present(node, SRU, "x"):
        raise ValueError(f"SRUScan node {node.name!r}: k = 3 with the skip term needs input x")
    if int(a["hidden_size"]) <= 0:
        raise ValueError(f"SRUScan node {node.name!r}: hidden_size must be a positive int")
    return variant


@dataclass(frozen=True)
class _AnyVariant:
    """The one body of every SRUScan node of a TensorRT-target graph: only the state dtype varies."""

    double: bool

    @property
    def name(self) -> str:
        return "fp64 state" if self.double else "fp32 state"


def _any_variant(node: onnx.NodeProto, context: NodeContext) -> _AnyVariant:
    check_every_input(node, SRU)
    return _AnyVariant(_double(node, context))


SRU_EXPORT = OpExport(
    spec=SRU,
    torch_module="rnnx.models.ops.sru_scan",
    translation=lambda target: sru_scan_node_full if target.every_input_present else sru_scan_node,
    variant=_variant,
    function=lambda variant, context: sru_scan_function(variant, context.opset),
    any_variant=_any_variant,
    any_function=lambda variant, context: sru_scan_any_function(variant.double, context.opset),
)
