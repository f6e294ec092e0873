"""The engine step of ``export-model --engine``: checked before the export is written, run after it.

:meth:`EngineStep.plan` checks what can be checked before a byte is exported (TensorRT installed, a
target engines are built from, valid profile limits); :meth:`EngineStep.run` builds (or reuses from the
cache) the engine for the finished export. Both raise :class:`EngineStepError` with a one-line message; a
failed build leaves the export in place.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from ..contract.targets import TARGET_RECORDS, Target
from ..contract.targets import target as as_target
from ._trt import TensorRTNotInstalled, tensorrt_available
from .builder import EngineBuildError, Log, build_engine
from .profiles import ProfileError, ProfileLimits


class EngineStepError(Exception):
    """The engine step cannot run, or failed; the message names why (its first line is the CLI's error)."""


@dataclass(frozen=True)
class EngineStep:
    """An engine to build for an export: the resolved profile ``limits`` and the engine cache (None: the
    default, :func:`rnnx.runtime.tensorrt.default_cache_dir`)."""

    limits: ProfileLimits
    cache_dir: Optional[Path] = None

    @classmethod
    def plan(
        cls, target: Union[str, Target], max_batch: int, max_length: int, max_context: Optional[int] = None,
        cache_dir: Optional[Path] = None,
    ) -> EngineStep:  # fmt: skip
        """The step for an export of ``target`` with these limits, checked before exporting."""
        if not tensorrt_available():
            raise EngineStepError(
                "--engine needs TensorRT, which is not installed: pip install tensorrt (NVIDIA; needs a CUDA GPU); "
                "nothing was exported"
            )
        record = as_target(target)
        if not record.builds_engine:
            builders = " | ".join(t.name for t in TARGET_RECORDS.values() if t.builds_engine)
            raise EngineStepError(f"--engine needs --target {builders} (got {record.name!r})")
        try:
            limits = ProfileLimits(max_batch=max_batch, max_length=max_length, max_context=max_context).resolved()
        except ProfileError as e:
            raise EngineStepError(str(e)) from e
        return cls(limits, cache_dir)

    def run(self, out_dir: Path, log: Optional[Log] = None) -> Path:
        """The engine for the export in ``out_dir``, built or found in the cache."""
        from rnnx.plugins import PluginLibraryMismatch  # a plugin library of another TensorRT major

        try:
            return Path(build_engine(out_dir, limits=self.limits, cache_dir=self.cache_dir, log=log))
        except (EngineBuildError, PluginLibraryMismatch, ProfileError, TensorRTNotInstalled, ValueError) as e:
            raise EngineStepError(f"engine build failed (the ONNX export in {out_dir} is kept): {e}") from e
