"""The Triton step of ``export-model --triton-repo``: checked before the export is written, run after it.

:meth:`TritonStep.plan` checks the variants asked for before a byte is exported; :meth:`TritonStep.run`
writes one repository entry per variant for the finished export (:func:`.repository.write_repository`).
Both raise :class:`TritonStepError` with a one-line message; a failed entry leaves the export in place.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from ...contract.artifact import read_metadata
from .config import DEFAULT_MAX_BATCH_SIZE, DEFAULT_VARIANTS, TritonConfigError, Variant, variant
from .repository import write_repository


class TritonStepError(Exception):
    """The Triton step cannot run as asked (``usage``: the options contradict each other), or failed."""

    def __init__(self, message: str, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


@dataclass(frozen=True)
class TritonStep:
    """Repository entries to write into ``repo`` for an export: ``variants`` (empty: each of
    :data:`~.config.DEFAULT_VARIANTS` that serves the export), ``max_streams`` per python-variant instance."""

    repo: Path
    variants: tuple[Variant, ...] = ()
    max_streams: int = 64

    @classmethod
    def plan(
        cls, repo: Optional[Union[str, os.PathLike]], variants: Sequence[Union[str, Variant]] = (),
        engine: bool = False, max_streams: int = 64,
    ) -> Optional[TritonStep]:  # fmt: skip
        """The step (None without a repository), checked before exporting: ``engine`` says whether an engine
        will be built (a variant that holds one needs it)."""
        if repo is None:
            if variants:
                raise TritonStepError("--triton-variant needs --triton-repo", usage=True)
            return None
        try:
            chosen = tuple(dict.fromkeys(variant(v) for v in variants))
        except TritonConfigError as e:
            raise TritonStepError(str(e), usage=True) from e
        for record in chosen:
            if record.needs_engine and not engine:
                raise TritonStepError(
                    f"--triton-variant {record.name} needs --engine (the repository holds the built engine)",
                    usage=True,
                )
        return cls(Path(repo), chosen, max_streams)

    def chosen(self, export_dir: Path, engine: Optional[Path]) -> tuple[Variant, ...]:
        """The variants to write for the export in ``export_dir`` (the defaults: those that serve it, the
        engine-holding one only when ``engine`` was built)."""
        if self.variants:
            return self.variants
        metadata = read_metadata(export_dir)
        return tuple(
            v for v in DEFAULT_VARIANTS if v.refusal(metadata) is None and (engine is not None or not v.needs_engine)
        )

    def run(
        self, export_dir: Path, engine: Optional[Path] = None, max_batch_size: Optional[int] = None
    ) -> Iterator[tuple[Variant, Path]]:
        """Writes the entries one by one, yielding each variant with its model directory."""
        for record in self.chosen(export_dir, engine):
            try:
                model_dir = write_repository(
                    export_dir, self.repo, record, max_streams=self.max_streams, plan=engine,
                    max_batch_size=max_batch_size or DEFAULT_MAX_BATCH_SIZE,
                )  # fmt: skip
            except (TritonConfigError, OSError) as e:
                raise TritonStepError(
                    f"Triton {record.name} entry failed (the ONNX export in {export_dir} is kept): {e}"
                ) from e
            yield record, model_dir
