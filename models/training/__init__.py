"""rnnx.models.training: small, download-free training tasks for the demo checkpoints.

:mod:`rnnx.models.training.copy_task` trains any :class:`rnnx.models.lm.RecurrentLM` on the
"Transformers are RNNs" sequence-copy task and evaluates it with greedy step-by-step decoding.
"""
