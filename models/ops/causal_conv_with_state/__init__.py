"""The causal convolution with state: the ``rnnx::causal_conv_with_state`` op, ONNX opset 27's
``CausalConvWithState`` (depthwise, kernel K along time, a (B, C, K-1) state) with rnnx's pad mask.

:func:`causal_conv_with_state` is the public entry point; importing this package registers the op. ``naive``
holds the float64 loop the tests compare against, ``torch_conv`` the torch forward the op runs and differentiates.
"""

from .checks import ACTIVATIONS
from .naive import causal_conv_with_state_naive
from .op import causal_conv_with_state, causal_conv_with_state_op

__all__ = ["ACTIVATIONS", "causal_conv_with_state", "causal_conv_with_state_naive", "causal_conv_with_state_op"]
