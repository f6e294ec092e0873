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
"""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from rnnx.models.ops import spec

from .builder import NodeWriter
from .overloads import SRUVariant
from .schemas import node_attribute_defaults

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
    c_out, h_out = f"{prefix}c_out", f"{prefix}h_out"
    w.nodes.append(helper.make_node("Identity", [c_new], [c_out], name=w.fresh("n_c_out")))
    w.nodes.append(helper.make_node("Identity", [h], [h_out], name=w.fresh("n_h_out")))
    value_infos = [
        helper.make_tensor_value_info(inputs[n], TensorProto.BOOL if n == "pad" else acc, None) for n in names
    ]
    outputs = [helper.make_tensor_value_info(c_out, acc, None), helper.make_tensor_value_info(h_out, acc, None)]
    return helper.make_graph(w.nodes, f"{prefix}step", value_infos, outputs)


def sru_scan_function(variant: SRUVariant, opset_version: int) -> onnx.FunctionProto:
    """FunctionProto ``rnnx::SRUScan`` overload ``variant.name`` for default-domain ``opset_version``.

    Inputs U (L, B, D*d*k), x (L, B, D*d; read only when k = 3 with skip), weight_c, bias (2*D*d,),
    c0 (B, D*d), mask_pad (L, B; read only when the variant has it); outputs h (L, B, D*d) in U's
    dtype, c_last (B, D*d) in the state dtype. ``scale_x`` is read from the node's attribute.
    """
    v, D, k = variant, variant.num_directions, variant.num_matrices
    acc = state_elem_type(v.double)
    w = NodeWriter("")
    U5 = w.op("Reshape", [w.op("Cast", ["U"], to=acc), w.ints([0, 0, D, -1, k])], "U5")  # (L, B, D, d, k)
    W = w.op("Reshape", [w.op("Cast", ["weight_c"], to=acc), w.ints([2, D, -1])], "W")  # (2, D, d)
    Bias = w.op("Reshape", [w.op("Cast", ["bias"], to=acc), w.ints([2, D, -1])], "Bias")
    C0 = w.op("Reshape", [w.op("Cast", ["c0"], to=acc), w.ints([0, D, -1])], "C0")  # (B, D, d)
    one = w.op("Cast", [w.scalar_float(1.0)], "one", to=acc)
    zero = w.op("Cast", [w.scalar_float(0.0)], "zero", to=acc)
    if v.uses_x:
        scale = w.op("Cast", [w.attribute_float("scale_x")], "scale", to=acc)
        X = w.op("Mul", [w.op("Reshape", [w.op("Cast", ["x"], to=acc), w.ints([0, 0, D, -1])]), scale], "X")
    if v.has_mask:
        pad = w.op("Unsqueeze", [w.op("Cast", ["mask_pad"], to=TensorProto.BOOL), w.ints([-1])], "pad")  # (L, B, 1)
    idx = [w.scalar_int(i) for i in range(max(k, 2))]

    h_dirs, c_dirs = [], []
    for dr in range(D):
        Ud = w.op("Gather", [U5, idx[dr]], f"U_d{dr}", axis=2)  # (L, B, d, k)
        col = [w.op("Gather", [Ud, idx[j]], f"u{j}_d{dr}", axis=3) for j in range(k)]  # (L, B, d)
        gate = [
            w.op("Gather", [w.op("Gather", [P, idx[g]], axis=0), idx[dr]], axis=0) for P in (W, Bias) for g in (0, 1)
        ]
        v_f, v_r, b_f, b_r = gate  # (d,)
        scan_inputs = [col[0], w.op("Add", [col[1], b_f], "uf"), w.op("Add", [col[2], b_r], "ur")]
        if v.has_skip_term:
            scan_inputs.append(col[3] if k == 4 else w.op("Gather", [X, idx[dr]], f"skip_d{dr}", axis=2))
        if v.has_mask:
            scan_inputs.append(pad)
        body = _step_graph(v, {"v_f": v_f, "v_r": v_r, "one": one, "zero": zero}, f"step{dr}_")
        c0_d = w.op("Gather", [C0, idx[dr]], f"c0_d{dr}", axis=1)  # (B, d)
        reverse = [dr] * len(scan_inputs)
        c_last, h = w.op(
            "Scan",
            [c0_d, *scan_inputs],
            f"scan_d{dr}",
            num_outputs=2,
            body=body,
            num_scan_inputs=len(scan_inputs),
            scan_input_directions=reverse,
            scan_output_directions=[dr],
        )
        h_dirs.append(h)
        c_dirs.append(c_last)
    h_all = w.op("Concat", h_dirs, axis=2) if D == 2 else h_dirs[0]
    c_all = w.op("Concat", c_dirs, axis=1) if D == 2 else c_dirs[0]
    w.nodes.append(helper.make_node("CastLike", [h_all, "U"], ["h"], name="n_h"))
    w.nodes.append(helper.make_node("Identity", [c_all], ["c_last"], name="n_c_last"))

    defaults = node_attribute_defaults(SRU)
    return helper.make_function(
        spec.ONNX_DOMAIN,
        SRU.onnx_name,
        list(SRU.inputs),
        list(SRU.outputs),
        w.nodes,
        [helper.make_opsetid("", opset_version)],
        attribute_protos=[helper.make_attribute(n, val) for n, val in defaults.items()],
        doc_string=f"SRUScan, overload {v.name}: standard-op body (Scan over time).",
        overload=v.name,
    )
