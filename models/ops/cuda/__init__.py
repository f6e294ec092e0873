"""The PyTorch CUDA extension of the rnnx kernels: built once, shared by every op's ``cuda_kernel`` module.

"One launcher, two callers": the TensorRT plugins and this PyTorch binding call the same C++ launchers
(``plugins/<op>/cuda/<op>.h``). The binding is compiled lazily with :func:`torch.utils.cpp_extension.load` from
:data:`BINDING_SOURCES` (``plugins/torch/binding.cpp``, which makes the module, and each op's wrappers,
``plugins/<op>/torch/<op>_binding.cpp``, found by a glob) plus every op's kernel ``.cu`` files
(``plugins/<op>/cuda/``), on the first CUDA call, and only where torch has CUDA and a device is present.
The sources are package data, so the binding builds from an installed wheel as well as from a checkout.

Each op's glue lives beside the op (``rnnx.models.ops.sru_scan.cuda_kernel``,
``rnnx.models.ops.causal_linear_attention.cuda_kernel``): its ``forward`` calls the binding, its ``register``
(called by the op module at import) registers the CUDA implementation through :func:`register_kernel`.
Without CUDA nothing is registered. With CUDA, a call runs the kernel for fp32 / fp16 / bf16 inputs and the
op's torch code for fp64 or when the binding cannot be built (warned once), so a failed build costs
speed, never correctness. Autograd is unchanged: backward passes run the ops' torch / CPU code.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

from rnnx import plugins

from ..jit import LazyExtension, Unavailable, build_extension

#: Name of the built extension, before the hash of its build's inputs (:func:`rnnx.models.ops.jit.extension_name`).
EXTENSION_NAME = "rnnx_cuda_kernels_v1"
#: The binding's module source, in the PyTorch-facing native layer (``plugins/torch/``, with ``binding_support.h``).
BINDING_SOURCE = plugins.TORCH_DIR / "binding.cpp"
#: Every source of the binding: :data:`BINDING_SOURCE`, then each op's ``plugins/<op>/torch/*_binding.cpp`` (sorted;
#: each registers its functions, so a new op's file joins with no edit here).
BINDING_SOURCES = (BINDING_SOURCE, *sorted(plugins.OPS_DIR.glob("*/torch/*_binding.cpp")))
#: The kernel library shared with the TensorRT plugins, as ``rnnx.plugins`` ships it.
KERNELS_DIR = plugins.KERNELS_DIR
KERNEL_SOURCES = plugins.KERNEL_SOURCES
KERNEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
#: The largest query / key head dim the kernels take (``kLINEAR_RECURRENCE_MAX_DIM_K`` of
#: ``plugins/linear_recurrence/cuda/linear_recurrence.h``, which the causal linear attention runs on too).
MAX_DIM_K = 256


def cuda_present() -> bool:
    """Whether torch is a CUDA build and a CUDA device is visible."""
    return torch.version.cuda is not None and torch.cuda.is_available()


def sources_present() -> bool:
    """Whether the binding and kernel sources are on disk (a checkout or an installed wheel)."""
    return all(p.is_file() for p in (*BINDING_SOURCES, *KERNEL_SOURCES))


def _build() -> ModuleType:
    if not cuda_present():
        raise Unavailable("no CUDA device or torch without CUDA")
    if not sources_present():
        raise FileNotFoundError(f"kernel sources not found under {KERNELS_DIR}")
    includes = [plugins.TORCH_DIR, *plugins.KERNEL_INCLUDE_DIRS]  # binding_support.h, the launchers' headers
    return build_extension(EXTENSION_NAME, [*BINDING_SOURCES, *KERNEL_SOURCES], includes, ["-O3"], ["-O3"])


#: The binding's one build per process.
EXTENSION = LazyExtension(
    _build,
    f"rnnx: CUDA kernels unavailable ({EXTENSION_NAME}); the ops run their torch code on CUDA instead. "
    "Reason:\n{error}",
)

#: The compiled binding (a function per op with a ``plugins/<op>/torch/<op>_binding.cpp``, named by the op:
#: ``sru_scan``, ``causal_linear_attention``, ...), or ``None`` if unavailable (why: ``EXTENSION.error``).
load = EXTENSION.load


def stream_of(device: torch.device) -> int:
    """The handle of ``device``'s current CUDA stream, as the binding takes it."""
    return torch.cuda.current_stream(device).cuda_stream


def register_kernel(op: Any, kernel: Callable) -> bool:
    """Registers ``kernel`` as ``op``'s CUDA implementation where CUDA is present; returns whether it did."""
    if not cuda_present():
        return False
    op.register_kernel("cuda")(kernel)
    return True
