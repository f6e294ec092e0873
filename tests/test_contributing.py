"""CONTRIBUTING.md stays true: its paths exist, and its "Adding an op" checklist names every per-op file.

1. Every repo-relative path written in backticks in CONTRIBUTING.md exists; paths with a placeholder
   (``<op>``, ``<Op>``, ``<opCamel>``, ...: the new op's own files) are skipped.
2. Every source file (``.py``, ``.cpp``, ``.h``, ``.cu``, ``.cuh``, ``CMakeLists.txt``; tracked, or untracked
   and not ignored, so that a new op's files count before ``git add``) that mentions an existing op is
   named in the "Adding an op" section, directly or through a folder (``plugins/sru_scan/tensorrt/``) or glob
   entry, is in one of an op's own two folders (:data:`OP_FOLDERS`), or is on :data:`ALLOWLIST` with a reason.
   An op is recognised by the spellings of its names
   taken from ``rnnx.runtime.contract.ops.ALL_OPS`` (:func:`op_spellings`: ``sru_scan``, ``SRU_SCAN``, ``SRUScan``,
   ``SruScan``, ``sruScan``, likewise for causal linear attention), so a new op is tracked as soon as
   its record exists.

The allowlist holds files that only *use* the ops: layers and benchmarks that call the public
functions (``sru_scan(...)``, ``causal_linear_attention(...)``), layer tests that use a naive twin as
their reference, and tests or docstrings that spot-check exported or packaged artifacts. A new op
needs no change there, so they are not on the checklist; an entry must exist and still mention an op.
"""

from __future__ import annotations

import fnmatch
import re
import subprocess
from pathlib import Path

import pytest

from rnnx.runtime.contract import ops as spec

REPO = Path(__file__).resolve().parents[1]
CONTRIBUTING = REPO / "CONTRIBUTING.md"
SECTION = "## Adding an op"
SOURCE_SUFFIXES = (".py", ".cpp", ".h", ".cu", ".cuh")
THIS_FILE = "tests/test_contributing.py"
#: The most steps the checklist may have (issue 29: 57 before the op folders and globs; issue 39: 21 before the
#: registries).
MAX_STEPS = 12
#: The shared native folders of plugins/: no source there names an op (each op registers itself from its folder).
SHARED_NATIVE = (
    "plugins/common/",
    "plugins/cpu/",
    "plugins/kernels/",
    "plugins/ort/",
    "plugins/tests/",
    "plugins/torch/",
)

#: Files (or folders, ending in "/") that mention an op only as its users, with the reason.
ALLOWLIST = {
    "export/onnx_ops/overloads.py": "the overload names of the SRUScan and CausalLinearAttention bodies, which their "
    "OpExport records use; a new op names its variants beside its bodies (recurrence_family.py)",
    "benchmarks/": "time the ops through their public functions and the CUDA extension; define nothing of an op",
    "models/sru.py": "the SRU layer calls the public sru_scan",
    "models/srupp.py": "the SRU++ layer calls the public sru_scan and causal_linear_attention",
    "models/linear_transformer.py": "the layer calls the public causal_linear_attention",
    "models/fast_transformers.py": "the fast-transformers twin calls the public causal_linear_attention",
    "models/decoder.py": "LFM2's short convolution calls the public causal_conv_with_state",
    "models/ops/sru/": "the deprecated 0.1.0 import path of models/ops/sru_scan/, re-exporting its public names",
    "models/ops/linear_attention/": "the deprecated 0.1.0 path of models/ops/causal_linear_attention/, re-exporting",
    "models/ops/linear_recurrence/naive.py": "its linear rule reuses phi and eps of causal linear attention's twin",
    "models/state.py": "re-exports the causal linear attention op's state record beside the layers' records",
    "tests/test_fast_transformers.py": "converter tests; the attention is reached through the public function",
    "tests/test_export_stateful.py": "checks the op list of a user module's export metadata",
    "tests/test_sru_module.py": "layer tests with sru_scan_naive as the reference",
    "tests/test_srupp_module.py": "layer tests with sru_scan_naive as the reference",
    "tests/test_linear_recurrence_naive.py": "checks the Katharopoulos-as-linear reference against the old naive",
    "tests/test_export_models.py": "checks the op list of exported models' metadata, which comes from spec.ALL_OPS",
    "tests/test_wheel.py": "spot-checks that the wheel ships some plugin and kernel sources (package-data globs)",
    "tests/test_sru3_api.py": "checks that an SRU with a custom transform exports with its scans as SRUScan nodes",
    "tests/test_quantize.py": "checks that quantization keeps the SRUScan function overloads of an export",
    "runtime/contract/artifact.py": "a docstring example of the metadata's op list",
    "tests/test_packaging.py": "spot-checks the kernel-source glob's result",
    "runtime/native/src/trt_plugins.h": "a comment's example of the creator names read from rnnx.json's op list",
    "runtime/native/tools/rnnx_trt_plugins_test.cpp": "the plugin-loader test's creator names, as an export lists them",
    "tests/test_native_runtime.py": "expects the plugin-loader test's messages, which name the export's creators",
    "tests/test_graph_nodes.py": "counts the nodes of exported graphs, the op nodes among them",
    "models/gated_deltanet.py": "the Gated DeltaNet layer calls the public linear_recurrence, causal_conv_with_state",
    "models/mamba2.py": "the Mamba-2 mixer calls the public linear_recurrence and causal_conv_with_state",
    "models/gla.py": "the GLA and retention layers call the public linear_recurrence",
    "runtime/contract/targets.py": "the portable target's docstring names the opset-27 standard ops",
    "tests/test_transformers_layers.py": "layer tests with linear_recurrence_naive as the reference",
    "tests/test_recurrence_family_export.py": "exports the layers and checks which rnnx nodes each target keeps",
}
#: Every op's own two folders (docs/architecture.md, "Where an op lives"): whatever is in them is the op's.
OP_FOLDERS = tuple(f"{root}/{op.torch_name}/" for op in spec.ALL_OPS for root in ("models/ops", "plugins"))

_BACKTICKED = re.compile(r"`([^`\s]+)`")
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_FILE_NAME = re.compile(r"[\w<>*-]+\.(?:md|toml|py|cpp|h|cu|cuh|txt|sh|yaml|cfg|map)")
_PATH = re.compile(r"[\w.<>*-]+(?:/[\w.<>*-]+)*/?")


def op_spellings(op: spec.OpSpec) -> set[str]:
    """The names an op's code uses: torch name, its upper case and camel / Pascal cases, ONNX name."""
    words = op.torch_name.split("_")
    camel = words[0] + "".join(w.capitalize() for w in words[1:])
    return {op.torch_name, op.torch_name.upper(), camel, camel[0].upper() + camel[1:], op.onnx_name}


SPELLINGS = sorted(set().union(*(op_spellings(op) for op in spec.ALL_OPS)))
_MENTION = re.compile("|".join(re.escape(s) for s in SPELLINGS))


def _is_path(token: str) -> bool:
    if not _PATH.fullmatch(token):
        return False
    return "/" in token or _FILE_NAME.fullmatch(token) is not None


def _paths(markdown: str) -> list[str]:
    """Backticked repo-relative paths of ``markdown``, outside fenced code blocks, in order."""
    return [t for t in _BACKTICKED.findall(_FENCE.sub("", markdown)) if _is_path(t)]


def _section(markdown: str) -> str:
    start = markdown.index(SECTION)
    end = markdown.find("\n## ", start + len(SECTION))
    return markdown[start : end if end >= 0 else len(markdown)]


def _is_placeholder(path: str) -> bool:
    return "<" in path


def _covers(entry: str, path: str) -> bool:
    """Whether a checklist / allowlist entry names ``path``: the file itself, a folder above it, a glob."""
    if entry.endswith("/"):
        return path.startswith(entry)
    if any(c in entry for c in "*?["):
        return fnmatch.fnmatch(path, entry)
    return path == entry


def _source_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    names = sorted(set(out.split("\0")) - {"", THIS_FILE})
    return [
        n for n in names if (n.endswith(SOURCE_SUFFIXES) or Path(n).name == "CMakeLists.txt") and (REPO / n).is_file()
    ]


def _mentions_an_op(path: str) -> bool:
    return _MENTION.search((REPO / path).read_text(encoding="utf-8", errors="replace")) is not None


@pytest.fixture(scope="module")
def markdown() -> str:
    assert CONTRIBUTING.is_file(), "CONTRIBUTING.md is missing"
    return CONTRIBUTING.read_text(encoding="utf-8")


def test_spellings_come_from_the_records() -> None:
    assert {"sru_scan", "SRU_SCAN", "SRUScan", "SruScan", "sruScan"} <= set(SPELLINGS)
    assert {"causal_linear_attention", "CAUSAL_LINEAR_ATTENTION", "CausalLinearAttention"} <= set(SPELLINGS)
    assert "causalLinearAttention" in SPELLINGS


def test_every_path_in_contributing_exists(markdown: str) -> None:
    paths = _paths(markdown)
    assert len(paths) > 20, f"too few paths found in CONTRIBUTING.md: {paths}"
    missing = [p for p in paths if not _is_placeholder(p) and not (REPO / p.rstrip("/")).exists()]
    assert not missing, f"CONTRIBUTING.md names paths that do not exist: {missing}"


def test_every_checklist_item_names_a_file(markdown: str) -> None:
    items = [line for line in _section(markdown).splitlines() if line.startswith("- [ ]")]
    assert len(items) >= 8, "the 'Adding an op' checklist is missing or short"
    nameless = [line for line in items if not _paths(line)]
    assert not nameless, f"checklist items that name no file: {nameless}"


def test_allowlist_entries_exist_and_are_used() -> None:
    files = [f for f in _source_files() if _mentions_an_op(f)]
    for entry, reason in ALLOWLIST.items():
        assert reason, entry
        assert (REPO / entry.rstrip("/")).exists(), f"allowlisted {entry!r} does not exist; drop it from ALLOWLIST"
        assert any(_covers(entry, f) for f in files), f"allowlisted {entry!r} mentions no op; drop it from ALLOWLIST"


def test_checklist_names_every_file_that_mentions_an_op(markdown: str) -> None:
    """A file with per-op code that the checklist does not name is a file the next op would forget."""
    entries = [p for p in _paths(_section(markdown)) if not _is_placeholder(p)]
    files = [f for f in _source_files() if _mentions_an_op(f)]
    assert len(files) > 30, f"suspiciously few files mention an op: {files}"
    unnamed = [f for f in files if not any(_covers(e, f) for e in (*entries, *ALLOWLIST, *OP_FOLDERS))]
    assert not unnamed, (
        f"these files mention an op ({', '.join(SPELLINGS)}) but CONTRIBUTING.md's '{SECTION}' checklist does not "
        f"name them: {unnamed}. Add each to the checklist (a file, folder/ or glob entry) or, if it only uses the "
        f"ops, to ALLOWLIST in {THIS_FILE} with a reason."
    )


def test_shared_native_sources_name_no_op() -> None:
    """A new op edits no shared C++ / CUDA source: the builds glob the op folders, and the op registers its ORT op,
    plugin creator, torch binding and plugin-test probe with one line each in its own files (issue 39)."""
    files = [f for f in _source_files() if f.startswith(SHARED_NATIVE) or f == "plugins/CMakeLists.txt"]
    assert len(files) > 20, f"suspiciously few shared native sources: {files}"
    naming = [f for f in files if _mentions_an_op(f)]
    assert not naming, f"shared native sources that name an op ({', '.join(SPELLINGS)}): {naming}"


def test_checklist_is_at_most_12_steps(markdown: str) -> None:
    """Each step groups the files one change touches; more than 12 steps means an op is spread too thin."""
    items = [line for line in _section(markdown).splitlines() if line.startswith("- [ ]")]
    assert len(items) <= MAX_STEPS, f"the 'Adding an op' checklist has {len(items)} steps; at most {MAX_STEPS}"
