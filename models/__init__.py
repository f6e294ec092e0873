"""rnnx.models: PyTorch reference models and the recurrent ops they are built on."""
