"""The ``rnnx::causal_conv_with_state`` torch.library op and its public Python entry point.

Contract: :data:`rnnx.runtime.contract.ops.CAUSAL_CONV_WITH_STATE` (ONNX opset 27's ``CausalConvWithState`` plus a
pad mask). Schema::

    (Tensor input, Tensor weight, Tensor? bias, Tensor? past_state, Tensor? mask_pad, str activation)
        -> (Tensor output, Tensor present_state)

The implementation is the torch code of :mod:`.torch_conv`, registered for every device; the backward re-runs it
under autograd.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
from torch import Tensor

from rnnx.runtime.contract.ops import CAUSAL_CONV_WITH_STATE

from ..dtypes import state_dtype
from ..registration import register_autograd_by_recompute, torch_schema
from .checks import check_inputs
from .torch_conv import causal_conv_with_state_forward

_SPEC = CAUSAL_CONV_WITH_STATE


#: The registered op (any device): the torch forward itself (:func:`.torch_conv.causal_conv_with_state_forward`, the
#: schema's inputs in order), ``(output (B, C, T), present_state (B, C, K-1))``.
causal_conv_with_state_op = torch.library.custom_op(_SPEC.qualname, mutates_args=(), schema=torch_schema(_SPEC))(
    causal_conv_with_state_forward
)


@causal_conv_with_state_op.register_fake
def _fake(input: Tensor, *arguments: Any) -> tuple[Tensor, Tensor]:
    B, C, T, K = check_inputs(input, *arguments)
    return input.new_empty((B, C, T)), input.new_empty((B, C, K - 1), dtype=state_dtype(input.dtype))


register_autograd_by_recompute(causal_conv_with_state_op, _SPEC, causal_conv_with_state_forward)


def causal_conv_with_state(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    past_state: Optional[Tensor] = None,
    *,
    activation: str = str(_SPEC.attributes["activation"]),
    pad_mask: Optional[Tensor] = None,
) -> tuple[Tensor, Tensor]:
    """Depthwise causal convolution of kernel K with a carried state (ONNX opset 27 ``CausalConvWithState``).

    ``input`` (B, C, T) channels first, ``weight`` (C, 1, K), ``bias`` (C,) in input's dtype; ``past_state``
    (B, C, K-1), the K-1 inputs before this call (zeros when None), in the state dtype (fp32; fp64 for fp64)::

        y[b, c, t] = bias[c] + sum_{j<K} weight[c, 0, j] * x[b, c, t-(K-1)+j]    (x = past_state, then input)

    then ``activation`` ``"silu"`` / ``"swish"`` (y * sigmoid(y)) or ``"none"``. ``pad_mask`` (B, T),
    non-zero = pad: the step is skipped (output 0, the window does not move), so a right-padded batch equals
    each row alone. Returns ``(output (B, C, T) in input's dtype, present_state (B, C, K-1))``.
    """
    return causal_conv_with_state_op(input, weight, bias, past_state, pad_mask, str(activation))
