"""Run a published ``sru`` package (asappresearch) in a subprocess and hand its results to the tests.

Why a subprocess: ``import sru`` JIT-compiles C++ extensions (about 25 s each the first time, cached
afterwards), and sru 2.6.0 and 3.0.0.dev6 are both the package ``sru``, so they cannot share a
process — nor should they share one with rnnx. Batch every configuration of a test module into one
:func:`run_reference` call (a session-scoped fixture) so the import is paid once.

Every child imports sru through :func:`import_sru`, which builds sru's extensions by their sources'
content (the two versions ship the same ``sru_cpu_impl.cpp``: one build serves both, in every checkout),
and keeps the parent's extension cache, so rnnx's own kernel, built by ``scripts/setup.sh``, is reused.

A *case* is a dict (only ``name`` is required)::

    name         unique str
    factory      dotted name of the callable building the model, default "sru.SRU"
    kwargs       dict of constructor arguments
    seed         int, torch.manual_seed before construction (default 0)
    state_dict   optional state dict loaded into the model after construction (strict)
    train        bool, model.train() if True else model.eval() (default False)
    dtype        optional torch.dtype the model is cast to
    calls        list of calls, each a dict: args (list), kwargs (dict), grad (bool, default False:
                 run under torch.no_grad()), seed (optional int: torch.manual_seed just before)
    code         optional Python snippet exec'd after the calls with ``torch``, ``sru``, ``model``
                 and ``case`` in scope; whatever it puts in the dict ``extra`` is returned

and its result is a dict: ``state_dict`` (after construction/loading, before the calls),
``outputs`` (one per call: tensors detached; tuples become lists; a PackedSequence becomes
``{"packed_data": padded (L, B, ...), "lengths": (B,)}``), ``extra``, ``error`` (a traceback
string when the case raised, else None) and ``version`` (the imported ``sru.__version__``).

The reference packages live under ``<repo>/.reference/sru-<version>`` (``bash scripts/setup.sh``
puts them there); ``RNNX_SRU26_PATH`` / ``RNNX_SRU30_PATH`` point elsewhere.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Optional

import torch
from torch import Tensor

REPO_ROOT = Path(__file__).resolve().parent.parent

#: version -> (environment variable overriding the path, default path relative to the repo root)
REFERENCES: dict[str, tuple[str, str]] = {
    "2.6.0": ("RNNX_SRU26_PATH", ".reference/sru-2.6.0"),
    "3.0.0.dev6": ("RNNX_SRU30_PATH", ".reference/sru-3.0.0.dev6"),
}

#: exit status of the child when ``import sru`` itself failed (no compiler, no ninja, ...)
_IMPORT_FAILED = 3


class ReferenceUnavailable(RuntimeError):
    """The reference package is missing or cannot be imported (an environment problem)."""


def reference_dir(version: str) -> Path:
    """Where the published sru ``version`` is expected: the env override, else under .reference/."""
    env, default = REFERENCES[version]
    override = os.environ.get(env)
    return Path(override).expanduser().resolve() if override else REPO_ROOT / default


def missing_reason(version: str) -> Optional[str]:
    """Why sru ``version`` cannot be used (a skip reason), or None when its directory looks complete."""
    path = reference_dir(version)
    if (path / "sru" / "__init__.py").is_file():
        return None
    env, _ = REFERENCES[version]
    return (
        f"published sru {version} not found at {path} (no sru/__init__.py); "
        f"install it with `bash scripts/setup.sh`, or point {env} at a directory holding the `sru` package"
    )


def require_reference(version: str) -> Path:
    """The reference directory of ``version``; skips the calling test when it is absent."""
    reason = missing_reason(version)
    if reason is not None:
        import pytest

        pytest.skip(reason)
    return reference_dir(version)


def _child_env(ref_dir: Path, allow_cuda: bool) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ref_dir)] + [p for p in [env.get("PYTHONPATH")] if p])
    if shutil.which("ninja") is None:
        # ninja from this interpreter's environment, for torch's JIT build (only when PATH has none: rnnx's
        # extension names hash the ninja found, and the child should find the parent's build of its kernel)
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    if not allow_cuda:
        # sru tries to build its CUDA kernels on import; point it at no CUDA so it falls back to
        # its dummy CPU stub at once instead of compiling .cu files we never run
        env["CUDA_HOME"] = str(ref_dir / "no-cuda")
        env.pop("CUDA_PATH", None)
        env["CUDA_VISIBLE_DEVICES"] = ""
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


#: Folder (in torch's extension cache) holding copies of sru's extension sources, one subfolder per content hash.
SOURCES_BY_CONTENT = "rnnx-reference-sources"


def _load_by_content(load: Any) -> Any:
    """torch's ``cpp_extension.load`` taking its sources from a folder named by their content.

    sru builds ``sru_cpu`` / ``sru_cuda`` from the files in its own folder. torch rebuilds an extension whose
    recorded build command changed, and the source paths are in it, so two copies of sru sharing one cache
    rebuild each other's extensions on every import. Copies of the sources under a hash of their bytes, and the
    name suffixed with that hash, make one build per distinct source, shared by the copies (2.6.0 and 3.0.0.dev6
    ship the same ``sru_cpu_impl.cpp``) and by every checkout; what gets compiled, and how, is unchanged.
    """
    from torch.utils.cpp_extension import get_default_build_root

    def load_by_content(name: str, sources: Any, *args: Any, **kwargs: Any) -> Any:
        paths = [Path(s) for s in ([sources] if isinstance(sources, (str, Path)) else sources)]
        digest = hashlib.sha256()
        for path in paths:
            for part in (path.name.encode(), path.read_bytes()):
                digest.update(len(part).to_bytes(8, "little") + part)
        key = digest.hexdigest()[:12]
        root = Path(os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root())
        folder = root / SOURCES_BY_CONTENT / key
        folder.mkdir(parents=True, exist_ok=True)
        copies = []
        for path in paths:
            copy = folder / path.name
            if not copy.is_file():  # kept as it is once there: its mtime must not make ninja rebuild
                partial = folder / f".{path.name}.{os.getpid()}"
                shutil.copyfile(path, partial)
                os.replace(partial, copy)
            copies.append(str(copy))
        return load(f"{name}_{key}", copies, *args, **kwargs)

    return load_by_content


def import_sru() -> ModuleType:
    """``import sru`` in a child (the reference folder on ``PYTHONPATH``), its extensions built by content."""
    import warnings

    import torch.utils.cpp_extension as cpp_extension

    load = cpp_extension.load
    cpp_extension.load = _load_by_content(load)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return importlib.import_module("sru")
    finally:
        cpp_extension.load = load


def run_reference(
    ref_dir: Path,
    cases: Sequence[dict[str, Any]],
    *,
    work_dir: Optional[Path] = None,
    timeout: float = 900.0,
    allow_cuda: bool = False,
) -> dict[str, dict[str, Any]]:
    """Runs ``cases`` against the sru package found in ``ref_dir`` in one subprocess.

    Returns ``{case name: result}`` (see the module docstring). Raises ReferenceUnavailable when
    ``ref_dir`` lacks the package or ``import sru`` fails there, RuntimeError when the child dies.
    """
    ref_dir = Path(ref_dir).resolve()
    if not (ref_dir / "sru" / "__init__.py").is_file():
        raise ReferenceUnavailable(f"no sru package under {ref_dir}; run `bash scripts/setup.sh`")
    names = [c["name"] for c in cases]
    if len(set(names)) != len(names):
        raise ValueError(f"case names must be unique: {names}")
    with tempfile.TemporaryDirectory(dir=work_dir) as tmp:
        spec_path, out_path = Path(tmp) / "spec.pt", Path(tmp) / "results.pt"
        torch.save({"ref_dir": str(ref_dir), "cases": list(cases)}, spec_path)
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), str(spec_path), str(out_path)],
            env=_child_env(ref_dir, allow_cuda),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        tail = (proc.stdout + proc.stderr)[-4000:]
        if proc.returncode == _IMPORT_FAILED:
            raise ReferenceUnavailable(f"`import sru` from {ref_dir} failed:\n{tail}")
        if proc.returncode != 0 or not out_path.is_file():
            raise RuntimeError(f"reference subprocess failed (exit {proc.returncode}):\n{tail}")
        return torch.load(out_path, weights_only=False)


def _plain(obj: Any) -> Any:
    """Detached copies of the tensors in ``obj``; tuples -> lists; PackedSequence -> padded dict."""
    from torch.nn.utils.rnn import PackedSequence, pad_packed_sequence

    if isinstance(obj, PackedSequence):
        padded, lengths = pad_packed_sequence(obj)
        return {"packed_data": padded.detach().clone(), "lengths": lengths}
    if isinstance(obj, Tensor):
        return obj.detach().clone()
    if isinstance(obj, (list, tuple)):
        return [_plain(o) for o in obj]
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj


def _resolve(dotted: str) -> Any:
    module, _, attr = dotted.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def _run_case(sru: Any, case: dict[str, Any]) -> dict[str, Any]:
    torch.manual_seed(case.get("seed", 0))
    model = _resolve(case.get("factory", "sru.SRU"))(**case.get("kwargs", {}))
    if case.get("state_dict") is not None:
        model.load_state_dict(case["state_dict"])
    if case.get("dtype") is not None:
        model = model.to(case["dtype"])
    model.train(bool(case.get("train", False)))
    result: dict[str, Any] = {"state_dict": _plain(dict(model.state_dict())), "outputs": [], "extra": {}}
    for call in case.get("calls", []):
        if call.get("seed") is not None:
            torch.manual_seed(call["seed"])
        with torch.set_grad_enabled(bool(call.get("grad", False))):
            out = model(*call.get("args", []), **call.get("kwargs", {}))
        result["outputs"].append(_plain(out))
    if case.get("code"):
        scope: dict[str, Any] = {"torch": torch, "sru": sru, "model": model, "case": case, "extra": {}}
        exec(case["code"], scope)
        result["extra"] = _plain(scope["extra"])
    return result


def _main(spec_path: str, out_path: str) -> int:
    """Child entry point: loads the spec, imports sru from the reference dir, runs every case."""
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = torch.load(spec_path, weights_only=False)
    ref_dir = Path(spec["ref_dir"]).resolve()
    try:
        sru = import_sru()
    except Exception:
        traceback.print_exc()
        return _IMPORT_FAILED
    if ref_dir not in Path(sru.__file__).resolve().parents:
        print(f"imported sru from {sru.__file__}, not from {ref_dir}", file=sys.stderr)
        return _IMPORT_FAILED
    version = getattr(sru, "__version__", "unknown")
    results: dict[str, dict[str, Any]] = {}
    for case in spec["cases"]:
        try:
            results[case["name"]] = _run_case(sru, case)
            results[case["name"]]["error"] = None
        except Exception:
            results[case["name"]] = {"error": traceback.format_exc()}
        results[case["name"]]["version"] = version
    torch.save(results, out_path)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1], sys.argv[2]))
