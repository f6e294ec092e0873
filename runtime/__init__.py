"""rnnx.runtime: stateful token-by-token generation over torch / ONNX Runtime / TensorRT (see issue 5)."""
