"""Causal linear attention ("transformers are RNNs"): the ``rnnx::causal_linear_attention`` op.

``causal_linear_attention`` is the public entry point; importing this package registers the op.
``naive`` holds the slow references, ``chunked`` the device-agnostic torch forward and backward.
"""

from .checks import check_inputs
from .op import causal_linear_attention, causal_linear_attention_op
from .padding import PAD_KEY, mask_pad_positions

__all__ = ["causal_linear_attention", "causal_linear_attention_op", "check_inputs", "PAD_KEY", "mask_pad_positions"]
