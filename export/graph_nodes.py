"""What ONNX Runtime runs for an export: the op types of its graph after ONNX Runtime's own optimizer.

Each node of a graph costs a dispatch (about half a microsecond on a CPU), whatever its size, so at small model
sizes the node count is part of the latency. :func:`optimized_node_counts` opens the export the way the
``onnxruntime`` backend does (same session config, rnnx's op library registered or not) and counts the nodes of
the graph ONNX Runtime writes after optimizing it. The node-count tests and ``benchmarks/bench_lean_graphs.py``
use it. Needs onnx besides onnxruntime (an export-side tool: the runtime never imports onnx).
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path
from typing import Union

from ..runtime import ortops
from ..runtime.contract.artifact import ort_session_config, read_metadata


def optimized_node_counts(model_dir: Union[str, Path], native_ops: bool = True) -> Counter[str]:
    """``{op type: count}`` of the top-level graph ONNX Runtime (CPU provider, all optimizations) runs for the
    export in ``model_dir``; ``native_ops``: with rnnx's op library registered (:mod:`rnnx.runtime.ortops`; it
    must be built), else on the ops' function bodies, inlined."""
    import onnx
    import onnxruntime as ort

    model_dir = Path(model_dir)
    metadata = read_metadata(model_dir)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    for key, value in ort_session_config(metadata).items():
        options.add_session_config_entry(key, value)
    if native_ops:
        ortops.register(options)
    with tempfile.TemporaryDirectory(prefix="rnnx-nodes-") as tmp:
        optimized = Path(tmp) / "optimized.onnx"
        options.optimized_model_filepath = str(optimized)
        options.add_session_config_entry("session.optimized_model_external_initializers_file_name", "weights.bin")
        ort.InferenceSession(str(model_dir / metadata["model_file"]), options, providers=["CPUExecutionProvider"])
        graph = onnx.load(str(optimized), load_external_data=False).graph
    return Counter(node.op_type for node in graph.node)


__all__ = ["optimized_node_counts"]
