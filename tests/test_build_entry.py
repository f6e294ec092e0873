"""``python -m rnnx.plugins.build``: the one entry that builds every native library (issue 29).

The selection and reporting logic runs on libraries made for the test (a builder that succeeds, one that
skips, one that fails: no real library can be made to fail on demand); the real entry then builds the ONNX
Runtime op library, which CI has the tools for, and setup.sh is held to calling the entry.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rnnx.plugins import build

REPO = Path(__file__).resolve().parents[1]


def _libraries(tmp_path: Path) -> tuple[build.Library, ...]:
    def built() -> Path:
        return tmp_path / "libok.so"

    def skipped() -> Path:
        raise build.Skip("no frobnicator here")

    def failed() -> Path:
        raise RuntimeError("compiler said no")

    return (build.Library("ok", "builds", built), build.Library("skips", "skips", skipped),
            build.Library("fails", "fails", failed))  # fmt: skip


def test_every_library_is_tried_and_a_failure_is_counted(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "LIBRARIES", _libraries(tmp_path))
    monkeypatch.setattr(build, "NAMES", ("ok", "skips", "fails"))
    lines: list[str] = []
    assert build.build_all(log=lines.append) == 1
    assert f"build: ok: {tmp_path / 'libok.so'}" in "\n".join(lines)
    assert "build: skips: skipped: no frobnicator here" in lines
    assert "build: fails: FAILED: RuntimeError: compiler said no" in lines
    lines.clear()
    assert build.build_all(only=("ok",), log=lines.append) == 0
    assert not any("skips" in line or "fails" in line for line in lines)
    assert build.build_all(skip=("fails",), log=lines.append) == 0
    with pytest.raises(ValueError, match="unknown library nope; known: ok, skips, fails"):
        build.build_all(only=("nope",))


def test_the_entry_builds_the_ort_ops_and_refuses_an_unknown_name():
    from rnnx.runtime import ortops

    if not (ortops.headers_dir() / "onnxruntime_lite_custom_op.h").is_file():
        pytest.skip("ONNX Runtime headers not fetched (scripts/setup.sh fetches them with npm)")
    done = subprocess.run([sys.executable, "-m", "rnnx.plugins.build", "--only", "ort-ops"], capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"build: ort-ops: {ortops.library_path()}" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "rnnx.plugins.build", "--only", "nope"], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert bad.returncode == 2 and "unknown library nope" in bad.stderr


def test_setup_builds_through_the_entry():
    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert '"$PY" -m rnnx.plugins.build' in setup
    for builder in (
        "rnnx.models.ops.sru_scan.cpu_kernel",
        "rnnx.models.ops.libtorch",
        "rnnx.runtime.ortops",
        "rnnx.runtime.native",
    ):
        assert f"-m {builder}" not in setup, f"setup.sh still runs {builder} itself"
