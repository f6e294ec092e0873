"""Deploy without torch: the documented runtime-only install serves an export on ONNX Runtime.

A fresh virtual environment gets exactly the install line of the README, ``pip install "<wheel>[onnxruntime]"``
(the wheel built from this checkout, its dependencies from the package index), and nothing else. An
import guard (``sitecustomize.py`` on ``PYTHONPATH``) records every attempt to import torch, onnx,
onnxscript or polygraphy, even one that a ``try: import ...`` would swallow, and makes the process exit
97; a probe with ``importlib.util.find_spec`` is not an import and is allowed. In that environment:
``rnnx.runtime.load`` + ``generate`` give the tokens the full install gives, ``rnnx-generate`` streams
them, ``rnnx-parity`` replays the reference saved with the export (PASS), and ``export-model`` says in
one line that it needs the export extra. The compiled op library is not in the wheel: a load says once how to
build it, and the command it names builds it from the installed package.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from wheel_build import build_wheel

pytest.importorskip("onnxruntime")

import rnnx.runtime as rt

PROMPTS = [[3, 5, 7, 1, 0, 2, 4, 6, 8, 9, 10], [2, 2, 4, 4, 6, 6, 8, 8, 1, 1, 3, 10]]
BLOCKED = ("torch", "onnx", "onnxscript", "polygraphy")
GUARD_EXIT = 97

GUARD = textwrap.dedent(
    f"""
    import atexit, importlib.abc, os, sys, traceback

    BLOCKED = {BLOCKED!r}
    attempts = []
    PROBES = ("<frozen importlib.util>", os.path.join(os.path.dirname(os.__file__), "importlib", "util.py"))


    class ImportGuard(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] not in BLOCKED:
                return None
            stack = traceback.extract_stack()
            if any(f.name == "find_spec" and f.filename in PROBES for f in stack):
                return None  # a probe (importlib.util.find_spec), not an import
            attempts.append(name)
            raise ImportError("import guard: " + name + " is not part of the runtime-only install")


    sys.meta_path.insert(0, ImportGuard())


    @atexit.register
    def _report():
        if attempts:
            sys.stderr.write("import guard: attempted imports: " + ", ".join(attempts) + "\\n")
            sys.stderr.flush()
            os._exit({GUARD_EXIT})
    """
)

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import rnnx.runtime as rt

    session = rt.load(sys.argv[1], backend="onnxruntime")
    tokens = session.generate_all(json.loads(sys.argv[2]), 10, temperature=0)
    rt.load(sys.argv[1], backend="onnxruntime")  # a second load: the notice is given once per process
    print(json.dumps({"tokens": tokens, "backend": session.backend.name, "modules": sorted(sys.modules),
                      "describe": session.backend.describe()}))
    """
)


@pytest.fixture(scope="module")
def runtime_venv(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runtime_only")
    wheel = build_wheel(root / "dist")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "-q"]
    install = subprocess.run([*pip, f"{wheel}[onnxruntime]"], capture_output=True, text=True)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    guard = root / "guard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(GUARD)
    return {"bin": venv / "bin", "guard": guard}


def _run(venv: dict[str, Path], *args: str, **env_vars: str) -> subprocess.CompletedProcess:
    """Runs a command in the venv; its user cache (where an installed rnnx builds its native libraries) is
    the venv's own, empty until a test builds into it."""
    drop = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "RNNX_ORT_OPS", "RNNX_ORT_HEADERS")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PYTHONPATH"] = str(venv["guard"])
    env["PATH"] = f"{venv['bin']}{os.pathsep}{env.get('PATH', '')}"
    env["XDG_CACHE_HOME"] = str(venv["guard"].parent / "cache")
    env.update(env_vars)
    return subprocess.run(list(args), capture_output=True, text=True, env=env, cwd=venv["guard"].parent, timeout=300)


@pytest.mark.slow
def test_the_venv_really_has_no_torch(runtime_venv):
    result = _run(runtime_venv, str(runtime_venv["bin"] / "python"), "-c", "import torch")
    assert result.returncode == GUARD_EXIT and "import guard: attempted imports: torch" in result.stderr
    result = _run(
        runtime_venv,
        str(runtime_venv["bin"] / "python"),
        "-c",
        "import importlib.util; print(importlib.util.find_spec('torch'))",
    )
    assert result.returncode == 0 and result.stdout.strip() == "None", result.stderr


@pytest.mark.slow
def test_load_and_generate_without_torch(runtime_venv, demo_cli_export):
    export = demo_cli_export[0] / "rnnx-export" / "linear_transformer_copy"
    result = _run(runtime_venv, str(runtime_venv["bin"] / "python"), "-c", SCRIPT, str(export), json.dumps(PROMPTS))
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout)
    assert out["backend"] == "onnxruntime"
    assert not [m for m in out["modules"] if m.split(".")[0] in BLOCKED]
    assert "rnnx.export" not in out["modules"] and "rnnx.models" not in out["modules"]
    want = rt.load(export, backend="onnxruntime").generate_all(PROMPTS, 10, temperature=0)
    assert out["tokens"] == want
    assert want[0] == PROMPTS[0][:10]  # the demo copies its prompt


@pytest.mark.slow
def test_cli_generate_and_parity_without_torch(runtime_venv, demo_cli_export):
    export = str(demo_cli_export[0] / "rnnx-export" / "linear_transformer_copy")
    gen = _run(
        runtime_venv, "rnnx-generate", export, "--prompt", " ".join(map(str, PROMPTS[0])), "--max-new-tokens", "10"
    )
    assert gen.returncode == 0, gen.stderr[-3000:]
    assert gen.stdout.split() == [str(t) for t in PROMPTS[0][:10]]
    parity = _run(runtime_venv, "rnnx-parity", export)
    assert parity.returncode == 0, parity.stdout[-3000:] + parity.stderr[-3000:]
    assert "reference: saved parity_reference.npz" in parity.stdout
    assert "PASS: onnxruntime vs saved" in parity.stdout and "64 decode steps" in parity.stdout


@pytest.mark.slow
def test_export_model_says_what_is_missing(runtime_venv, tmp_path):
    result = _run(runtime_venv, "export-model", "--out", str(tmp_path / "out"))
    assert result.returncode == 1
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "pip install 'rnnx[export]'" in lines[0] and "torch" in lines[0], result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_native_ops_a_notice_then_the_documented_command(runtime_venv, demo_cli_export):
    """A runtime-only install has no compiled op library: loading an export says so once, naming the command
    that builds it; that command, run in the venv (ONNX Runtime's headers from $RNNX_ORT_HEADERS instead of
    npm: CI's copy), builds it into the user cache, and the next load runs the native ops, same tokens."""
    from rnnx.runtime import ortops

    export = str(demo_cli_export[0] / "rnnx-export" / "linear_transformer_copy")
    python = str(runtime_venv["bin"] / "python")
    before = _run(runtime_venv, python, "-c", SCRIPT, export, json.dumps(PROMPTS))
    assert before.returncode == 0, before.stderr[-3000:]
    notices = [line for line in before.stderr.splitlines() if "python3 -m rnnx.runtime.ortops" in line]
    assert len(notices) == 1 and "librnnx_ort_ops.so is not built" in notices[0], before.stderr
    assert "native rnnx ops" not in json.loads(before.stdout)["describe"]
    built = _run(runtime_venv, python, "-m", "rnnx.runtime.ortops", RNNX_ORT_HEADERS=str(ortops.headers_dir()))
    assert built.returncode == 0, built.stderr[-3000:]
    library = Path(built.stdout.strip().splitlines()[-1])
    assert library.is_file() and (runtime_venv["guard"].parent / "cache") in library.parents
    after = _run(runtime_venv, python, "-c", SCRIPT, export, json.dumps(PROMPTS))
    assert after.returncode == 0 and "rnnx.runtime.ortops" not in after.stderr, after.stderr[-3000:]
    out = json.loads(after.stdout)
    assert "native rnnx ops" in out["describe"] and out["tokens"] == json.loads(before.stdout)["tokens"]
