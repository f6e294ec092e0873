"""Keeping pad positions out of a causal linear attention state.

phi(x) = elu(x) + 1 is exactly 0 at x = ``PAD_KEY`` in fp32, fp16 and bf16 (exp(-1e4) underflows
to 0), so a position whose key is ``PAD_KEY`` and whose value is 0 adds nothing to S or z; its
gradient through the key is 0 as well.
"""

from torch import Tensor

#: Key value written at pad positions.
PAD_KEY: float = -1.0e4


def mask_pad_positions(k: Tensor, v: Tensor, pad: Tensor, pad_key: float = PAD_KEY) -> tuple[Tensor, Tensor]:
    """k (B, H, L, E), v (B, H, L, M) with pads (bool, broadcastable to (B, H, L, 1), True = pad)
    set to ``pad_key`` (``PAD_KEY``; an argument so that TorchScript takes the constant) and 0: the
    attention state then skips them."""
    return k.masked_fill(pad, pad_key), v.masked_fill(pad, 0.0)
