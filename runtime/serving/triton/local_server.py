"""A local ``tritonserver`` on 127.0.0.1 for development, tests and benchmarks (CPU, no GPU needed).

The server binary (Triton 2.51, Python backend only) ships in the ``nvidia-pytriton`` 0.7.0 wheel;
``scripts/setup.sh`` installs it with ``tritonclient``, ONNX Runtime and rnnx (no torch) into a venv,
``.cache/triton/venv`` of a checkout (or ``$RNNX_TRITON_VENV``). :class:`TritonServer` starts it with free
ports and that venv first on ``PATH`` (the Python stub takes its interpreter from there), waits for
readiness within a bound, and stops it with SIGINT, then SIGKILL after a timeout. :func:`run_client`
runs :mod:`.client` with the venv's python. Production servers are NVIDIA's Triton containers; see
docs/serving.md.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sysconfig
import time
import urllib.request
from pathlib import Path
from typing import Any, Optional

#: The checkout (or the installed package's folder): runtime/serving/triton/ is three levels below it.
_ROOT = Path(__file__).resolve().parents[3]
VENV = Path(os.environ.get("RNNX_TRITON_VENV") or _ROOT / ".cache" / "triton" / "venv")
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 20.0


def venv_python() -> Optional[Path]:
    """The Triton venv's python when ``scripts/setup.sh`` has built the venv, else None."""
    python = VENV / "bin" / "python"
    return python if (VENV / ".rnnx-ready").is_file() and python.is_file() else None


def server_root() -> Path:
    out = subprocess.run(
        [str(venv_python()), "-c", "import pathlib, pytriton; print(pathlib.Path(pytriton.__file__).parent)"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return Path(out.stdout.strip()) / "tritonserver"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TritonServer:
    """``with TritonServer(repo, log) as server:`` -> ``server.grpc_url`` once every model is ready."""

    def __init__(self, repo: Path, log: Path) -> None:
        self.repo, self.log = repo, log
        self.grpc_port, self.http_port = free_port(), free_port()
        self.grpc_url = f"127.0.0.1:{self.grpc_port}"
        self.proc: Optional[subprocess.Popen] = None
        self.started_in_s: Optional[float] = None

    def __enter__(self) -> TritonServer:
        root = server_root()
        cmd = [
            str(root / "bin" / "tritonserver"), f"--model-repository={self.repo}",
            f"--backend-directory={root / 'backends'}", "--disable-auto-complete-config",
            "--http-address=127.0.0.1", f"--http-port={self.http_port}",
            "--grpc-address=127.0.0.1", f"--grpc-port={self.grpc_port}", "--allow-metrics=false",
        ]  # fmt: skip
        env = dict(os.environ)
        env["PATH"] = f"{VENV / 'bin'}:{env['PATH']}"
        # the stub must load the libpython of the interpreter that made the venv, not another 3.x on the system
        libdir = sysconfig.get_config_var("LIBDIR")
        env["LD_LIBRARY_PATH"] = libdir + (f":{env['LD_LIBRARY_PATH']}" if env.get("LD_LIBRARY_PATH") else "")
        start = time.monotonic()
        self._log_file = open(self.log, "w")
        self.proc = subprocess.Popen(
            cmd, env=env, stdout=self._log_file, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            self._wait_ready(start)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        self.started_in_s = time.monotonic() - start
        return self

    def _wait_ready(self, start: float) -> None:
        url = f"http://127.0.0.1:{self.http_port}/v2/health/ready"
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tritonserver exited with {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() - start > START_TIMEOUT_S:
                raise TimeoutError(f"tritonserver not ready after {START_TIMEOUT_S} s:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log_file.close()


def run_client(command: str, payload: dict[str, Any], timeout: float = 300.0) -> Any:
    """Runs ``python -m rnnx.runtime.serving.triton.client COMMAND`` in the Triton venv with ``payload`` as JSON on
    stdin; returns its JSON stdout."""
    out = subprocess.run(
        [str(venv_python()), "-m", "rnnx.runtime.serving.triton.client", command], input=json.dumps(payload),
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(
            f"rnnx.runtime.serving.triton.client {command} failed ({out.returncode}):\n{out.stderr[-3000:]}"
        )
    return json.loads(out.stdout)
