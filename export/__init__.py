"""rnnx.export: PyTorch -> ONNX with the rnnx custom ops (see issue 3)."""
