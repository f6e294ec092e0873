"""The linear-recurrence family of ONNX opset 27: ``LinearAttention`` (update rules ``linear``, ``gated``,
``delta``, ``gated_delta``) and ``CausalConvWithState`` (issue 39).

The folder will hold the op, its kernels and its exports. For now it holds only ``naive``: the slow
float64 references (token loops) that every later piece is tested against.
"""
