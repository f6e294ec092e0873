"""The house rules of docs/architecture.md that a reader can check from the source alone.

* No import cycle among rnnx's modules (every import counted, module-level or inside a function: a lazy
  import still ties two modules together).
* Imports between rooms follow the arrows of docs/architecture.md (:data:`ARROWS`): the contract imports no
  other room, the models and ops only the contract (and the few named helpers), the runtime never the
  exporter, serving / parity / TensorRT sit on the runtime and not the other way round.
* Target and precision names are not compared as strings outside their records
  (``rnnx/runtime/contract/targets.py``): code asks a record (``target.builds_engine``,
  ``precision.reference``) instead. The C++ native runtime reads rnnx.json itself and keeps the same rule
  with its own record tables (``runtime/native/src/artifact.h``, held to the Python records by
  ``tests/test_contract_records.py``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from rnnx.runtime.contract.targets import PRECISION_RECORDS, TARGET_RECORDS

REPO = Path(__file__).resolve().parents[1]
#: Source folder -> the package it is installed as (pyproject.toml's package-dir).
PACKAGES = {"models": "rnnx.models", "export": "rnnx.export", "runtime": "rnnx.runtime", "plugins": "rnnx.plugins"}
RECORD_MODULE = REPO / "runtime" / "contract" / "targets.py"
NAMES = set(TARGET_RECORDS) | set(PRECISION_RECORDS)


def _modules() -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package's ``__init__``), for every Python file of the packages."""
    found = {}
    for folder, package in PACKAGES.items():
        for path in (REPO / folder).rglob("*.py"):
            parts = list(path.relative_to(REPO / folder).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            found[".".join([package, *(parts[:-1] if is_package else parts)])] = (path, is_package)
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports. ``from pkg import sub`` is an edge to ``pkg.sub`` only (the
    package is already being imported by then), ``from pkg import name`` an edge to ``pkg``."""
    modules = _modules()
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, (path, is_package) in modules.items():
        base = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                edges[name].update(alias.name for alias in node.names if alias.name in modules)
            elif isinstance(node, ast.ImportFrom):
                target = node.module or ""
                if node.level:
                    anchor = base
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    target = f"{anchor}.{node.module}" if node.module else anchor
                submodules = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules]
                edges[name].update(submodules)
                if target in modules and len(submodules) < len(node.names):
                    edges[name].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle():
    edges = import_graph()
    assert len(edges) > 80 and edges["rnnx.runtime.session"], "the graph missed the project's modules"
    assert cycles(edges) == []


def _name_comparisons(path: Path, root: Path = REPO) -> list[str]:
    """``file:line`` of each comparison (``==``, ``!=``, ``in``, ``not in``) with a target or precision name as a
    string constant (or a tuple / list / set of them) on either side."""

    def names_in(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in NAMES
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(names_in(e) for e in node.elts)
        return False

    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Compare) and any(names_in(n) for n in (node.left, *node.comparators)):
            found.append(f"{path.relative_to(root)}:{node.lineno}")
    return sorted(found, key=lambda where: int(where.rpartition(":")[2]))


def test_the_comparison_finder_sees_a_comparison(tmp_path):
    example = tmp_path / "example.py"
    example.write_text(
        'if target == "tensorrt" or backend == "auto":\n'
        "    pass\n"
        'fp16 = precision in ("fp16", "bf16")\n'
        'label = "fp32"\n'
    )
    assert _name_comparisons(example, tmp_path) == ["example.py:1", "example.py:3"]


def test_target_and_precision_names_are_not_compared_outside_their_records():
    found = []
    for folder in PACKAGES:
        for path in sorted((REPO / folder).rglob("*.py")):
            if path != RECORD_MODULE:
                found += _name_comparisons(path)
    assert found == []


def test_the_native_runtime_compares_no_target_or_precision_name():
    names = "|".join(sorted(NAMES))
    pattern = re.compile(rf'(==|!=)\s*"({names})"|"({names})"\s*(==|!=)')
    found = [
        f"{path.relative_to(REPO)}:{number}"
        for path in sorted((REPO / "runtime" / "native").rglob("*.[ch]*"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []


#: Modules kept under an earlier name (``sys.modules`` aliases), and the room of the module they alias: the one
#: released alias, deprecated (its import warns).
ALIASES = {
    "rnnx.models.ops.spec": "contract",
}
#: Module -> room: an exact module first (the runtime's front door, the one build entry), then by prefix, most
#: specific first (docs/architecture.md, "The house").
EXACT_ROOMS = {
    "rnnx.runtime": "api",
    "rnnx.plugins.build": "build",
}
ROOMS = (
    ("rnnx.runtime.contract", "contract"),
    ("rnnx.models.ops", "ops"),
    ("rnnx.models", "models"),
    ("rnnx.export", "export"),
    ("rnnx.runtime.tensorrt", "tensorrt"),
    ("rnnx.runtime.serving", "serving"),
    ("rnnx.runtime.parity", "parity"),
    ("rnnx.runtime.native", "native"),
    ("rnnx.runtime", "runtime"),
    ("rnnx.plugins", "plugins"),
)
#: The floors, bottom up: a room imports rooms of lower floors only (never one of its own floor, never one above),
#: so no two rooms import each other and no arrow runs back up.
FLOORS = (
    ("contract",),
    ("plugins",),
    ("ops",),
    ("models",),
    ("runtime",),
    ("native", "parity", "serving", "tensorrt"),
    ("api",),
    ("export",),
    ("build",),
)
FLOOR = {name: level for level, names in enumerate(FLOORS) for name in names}
#: The allowed arrows between rooms (docs/architecture.md's table): room -> rooms it may import, all below it.
ARROWS = {
    "contract": set(),
    "plugins": {"contract"},
    "ops": {"contract", "plugins"},
    "models": {"ops", "contract"},
    "runtime": {"contract", "plugins", "models"},
    "native": {"plugins"},
    "parity": {"runtime", "contract"},
    "serving": {"runtime", "contract", "plugins"},
    "tensorrt": {"runtime", "contract", "plugins"},
    "api": {"runtime", "serving"},
    "export": {"models", "ops", "contract", "plugins", "runtime", "parity", "tensorrt", "serving"},
    "build": {"plugins", "ops"},
    "js": set(),  # runtime/js/: JavaScript, no Python module; it reads rnnx.json only
}
#: Arrows allowed only from these modules (a room-wide arrow would be too broad): room pair -> modules.
NARROW_ARROWS = {
    ("runtime", "models"): {"rnnx.runtime.backends.torch_backend"},  # the torch backend runs checkpoints
}


def room(module: str) -> str:
    if module in ALIASES:
        return ALIASES[module]
    if module in EXACT_ROOMS:
        return EXACT_ROOMS[module]
    return next(name for prefix, name in ROOMS if module == prefix or module.startswith(prefix + "."))


def test_the_arrows_run_down_the_floors():
    """Every allowed arrow goes from a room to a room of a lower floor: layered per room, so no two-way pair."""
    up = [f"{a} -> {b}" for a, targets in ARROWS.items() if a != "js" for b in targets if FLOOR[b] >= FLOOR[a]]
    assert up == []
    assert set(FLOOR) == set(ARROWS) - {"js"}


def test_imports_follow_the_arrows():
    wrong = []
    for source, targets in import_graph().items():
        for target in targets:
            pair = (room(source), room(target))
            if pair[0] == pair[1]:
                continue
            if pair[1] not in ARROWS[pair[0]] or (pair in NARROW_ARROWS and source not in NARROW_ARROWS[pair]):
                wrong.append(f"{source} ({pair[0]}) -> {target} ({pair[1]})")
    assert wrong == [], "imports against docs/architecture.md's arrows:\n" + "\n".join(sorted(wrong))


def test_the_arrow_table_is_the_documented_one():
    """docs/architecture.md's arrow table lists the same rooms and arrows as :data:`ARROWS`."""
    text = (REPO / "docs" / "architecture.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| [^|]+ \| ([^|]*) \|$", text, re.M)
    documented = {name: set(re.findall(r"`(\w+)`", arrows)) for name, arrows in rows}
    assert documented == ARROWS


def test_one_alias_module_and_the_deprecated_names_warn():
    """The only ``sys.modules`` alias module is :data:`ALIASES`' (``rnnx.models.ops.spec``, rnnx 0.1.0's name of the op
    records); it and the two 0.1.0 op packages warn when imported; the names that moved after 0.1.0 are gone."""
    import subprocess
    import sys

    aliasing = sorted(
        str(path.relative_to(REPO))
        for folder in ("models", "export", "runtime", "plugins")
        for path in (REPO / folder).rglob("*.py")
        if "sys.modules[__name__]" in path.read_text()
    )
    assert aliasing == ["models/ops/spec.py"]
    script = (
        "import importlib, warnings\n"
        "for name in ('rnnx.models.ops.spec', 'rnnx.models.ops.sru', 'rnnx.models.ops.linear_attention'):\n"
        "    with warnings.catch_warnings(record=True) as seen:\n"
        "        warnings.simplefilter('always')\n"
        "        importlib.import_module(name)\n"
        "    print(name, any(issubclass(w.category, DeprecationWarning) for w in seen))\n"
        "gone = ('rnnx.runtime.artifact', 'rnnx.runtime.slots', 'rnnx.runtime.scheduler', 'rnnx.runtime.triton')\n"
        "for name in gone:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "        print(name, 'imports')\n"
        "    except ModuleNotFoundError:\n"
        "        print(name, 'gone')\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:7] == [
        "rnnx.models.ops.spec True",
        "rnnx.models.ops.sru True",
        "rnnx.models.ops.linear_attention True",
        "rnnx.runtime.artifact gone",
        "rnnx.runtime.slots gone",
        "rnnx.runtime.scheduler gone",
        "rnnx.runtime.triton gone",
    ]
