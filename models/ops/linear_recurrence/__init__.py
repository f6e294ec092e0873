"""The linear recurrence: the ``rnnx::linear_recurrence`` op, ONNX opset 27's ``LinearAttention`` family
(update rules ``linear``, ``gated``, ``delta``, ``gated_delta``) with rnnx's pad mask.

:func:`linear_recurrence` is the public entry point; importing this package registers the op. ``naive`` holds
the float64 token loops the tests compare against, ``chunked`` the device-agnostic torch forward (chunked
prefill, one-token step) the op runs and differentiates.
"""

from .checks import DELTA_RULES, GATED_RULES, UPDATE_RULES
from .naive import katharopoulos_as_linear, linear_recurrence_naive
from .op import linear_recurrence, linear_recurrence_op

__all__ = [
    "DELTA_RULES",
    "GATED_RULES",
    "UPDATE_RULES",
    "katharopoulos_as_linear",
    "linear_recurrence",
    "linear_recurrence_naive",
    "linear_recurrence_op",
]
