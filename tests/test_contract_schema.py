"""One machine-readable contract (issue 40, item 2): rnnx.json's JSON Schema and the C / JavaScript readers' tables are
generated from the records of rnnx.runtime.contract.artifact, and the three readers refuse a bad artifact alike.

* The generated files (runtime/contract/rnnx.schema.json, rnnx-state.schema.json, runtime/native/src/
  contract_generated.h, runtime/js/contract.generated.mjs) equal what the records generate now: a record that changes
  without ``python3 -m rnnx.runtime.contract.schema --write`` fails here.
* The schemas are valid draft 2020-12 schemas; every demo export's rnnx.json and a real state file's header pass them.
* tests/data/bad_artifacts.json: each case, a mutation of the session's demo export (or of a state file saved from
  it), runs through Python (read_metadata, read_state_file), the C API (one ``rnnx_check refusals`` process for all
  the rnnx.json cases, one ``refusals-load`` for the state files, both the sanitizer build) and JavaScript (one node
  process, rnnx.mjs's readMetadata): each reader gives the case's reason, and the readers that refuse alike print the
  same line after the path (a parser's own words, ``{detail}``, aside). The cases the schema can judge are refused
  by the schema too, and the others pass it (what the readers check beyond it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Optional

import pytest

import rnnx.runtime as rt
from rnnx.runtime.contract import artifact, schema
from rnnx.runtime.contract.artifact import READER_REFUSALS, READERS, REFUSALS, MetadataError, read_metadata
from rnnx.runtime.state import read_state_file

REPO = Path(__file__).resolve().parents[1]
CASES = json.loads((REPO / "tests" / "data" / "bad_artifacts.json").read_text())
METADATA_CASES = {case["name"]: case for case in CASES["metadata"]}
STATE_CASES = {case["name"]: case for case in CASES["state_files"]}
NODE = shutil.which("node")
RNNX_MJS = REPO / "runtime" / "js" / "rnnx.mjs"
ASAN_ENV = {"ASAN_OPTIONS": "abort_on_error=0:halt_on_error=1", "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}
#: The refusals the rnnx.json schema can give too (the others are the readers' checks beyond it).
SCHEMA_REASONS = {
    "not_an_object",
    "format",
    "format_version",
    "interface",
    "field_missing",
    "field_type",
    "field_value",
}
STATE_SCHEMA_REASONS = {"state_format", "state_format_version", "state_header_missing", "state_header_value"}
#: Refusals no case reaches, and why.
UNREACHED = {"unreadable_file": "a file the reader may not read: the tests may run as root, who reads any file"}
#: Values whose rendering the three readers must agree on (artifact.json_text, JSON.stringify, contract.cpp).
RENDERED = ["a \"quoted\" \\ \b\f\n\r\t\x01 é ü", 0, -0.0, 12, 2.0, 2.5, 1e21, 1.5e-7, 1e-6, 123456789.125, True, None,
            [1, "batch", [2.0]], {"a": [1, {"b": None}]}]  # fmt: skip


def expected(case: dict[str, Any], reader: str) -> Optional[str]:
    """The reason a reader gives for a case (None: it accepts the file)."""
    return case.get("reasons", {}).get(reader, case["reason"])


# -- the generated files --------------------------------------------------------------------------------------------


def test_the_generated_files_are_the_records():
    """Each generated file equals what the contract's records generate now (regenerate: the command below)."""
    stale = schema.stale_files()
    assert not stale, f"{stale} differ from the contract's records: run {schema.COMMAND}"
    assert set(schema.generated_files()) == {schema.METADATA_SCHEMA, schema.STATE_SCHEMA, schema.CPP_TABLES,
                                             schema.JS_TABLES}  # fmt: skip


def test_a_changed_record_is_caught(monkeypatch, tmp_path: Path):
    """Generation reads the records: a new dtype reaches the schema and both readers' tables, and the check says
    which files are then stale."""
    for path, text in schema.generated_files().items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    assert schema.stale_files(tmp_path) == []
    monkeypatch.setattr(artifact, "DTYPES", (*artifact.DTYPES, "float8"))
    tensor = artifact.TABLES["tensor"]
    dtype = artifact.Field("dtype", artifact.Rule(("string",), strings=artifact.DTYPES))
    monkeypatch.setitem(artifact.TABLES, "tensor", (*tensor[:2], dtype))
    assert schema.stale_files(tmp_path) == [schema.METADATA_SCHEMA, schema.CPP_TABLES, schema.JS_TABLES]


def test_the_packages_ship_the_generated_files():
    """The wheel carries the schemas (rnnx.runtime.contract's package data) and the C table (the native runtime's
    src/*.h); the npm folder (runtime/js, no "files" list: npm packs the folder) carries the JavaScript table beside
    rnnx.mjs, which imports it, and the demo server serves it."""
    import tomllib

    with open(REPO / "pyproject.toml", "rb") as f:
        data = tomllib.load(f)["tool"]["setuptools"]["package-data"]
    contract = REPO / "runtime" / "contract"
    assert {p.name for pattern in data["rnnx.runtime.contract"] for p in contract.glob(pattern)} == {
        "rnnx.schema.json", "rnnx-state.schema.json"}  # fmt: skip
    native = REPO / "runtime" / "native"
    assert native / schema.CPP_TABLES.split("/", 1)[1] in {
        p for q in data["rnnx.runtime.native"] for p in native.glob(q)
    }
    package = json.loads((REPO / "runtime" / "js" / "package.json").read_text())
    assert "files" not in package or "contract.generated.mjs" in package["files"]
    assert "from './contract.generated.mjs'" in RNNX_MJS.read_text()
    assert "/contract.generated.mjs" in (REPO / "runtime" / "js" / "demo" / "serve.mjs").read_text()


# -- the schemas -----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def validators():
    jsonschema = pytest.importorskip("jsonschema")
    out = {}
    for name in (schema.METADATA_SCHEMA, schema.STATE_SCHEMA):
        document = json.loads((schema.RUNTIME_DIR / name).read_text())
        jsonschema.Draft202012Validator.check_schema(document)
        out[name] = jsonschema.Draft202012Validator(document)
    return out


def test_the_schema_accepts_every_demo_export(validators, demo_exports):
    for directory in demo_exports.values():
        meta = read_metadata(directory)
        assert [e.message for e in validators[schema.METADATA_SCHEMA].iter_errors(meta)] == [], directory


# -- the bad-artifact fixtures ----------------------------------------------------------------------------------------


def _pointer(document: Any, path: str) -> tuple[Any, str]:
    """The container a JSON Pointer's last token is in, and that token."""
    *parents, last = [t.replace("~1", "/").replace("~0", "~") for t in path.split("/")[1:]]
    for token in parents:
        document = document[int(token)] if isinstance(document, list) else document[token]
    return document, last


def _patch(meta: Any, edit: dict[str, Any]) -> None:
    container, key = _pointer(meta, edit["path"])
    if edit["op"] == "remove":
        del container[int(key) if isinstance(container, list) else key]
    elif edit["op"] == "add" and isinstance(container, list):
        container.insert(len(container) if key == "-" else int(key), edit["value"])
    else:  # replace, or add to an object
        container[int(key) if isinstance(container, list) else key] = edit["value"]


def build_metadata_case(case: dict[str, Any], source: Path, root: Path) -> Path:
    """The export directory of a case: the source's files linked, its rnnx.json edited."""
    directory = root / case["name"]
    directory.mkdir()
    for file in source.iterdir():
        if file.name != artifact.METADATA_FILE:
            (directory / file.name).symlink_to(file)
    meta = json.loads((source / artifact.METADATA_FILE).read_text())
    text: Optional[str] = None
    for edit in case["edit"]:
        if edit["op"] in ("add", "remove", "replace"):
            _patch(meta, edit)
        elif edit["op"] == "text":
            text = edit["value"]
        elif edit["op"] == "replace_text":
            written = json.dumps(meta, indent=2)
            assert edit["old"] in written, edit
            text = written.replace(edit["old"], edit["new"])
        elif edit["op"] == "append_byte":
            data = (directory / edit["file"]).read_bytes()
            (directory / edit["file"]).unlink()
            (directory / edit["file"]).write_bytes(data + b"\0")
        elif edit["op"] == "write_file":
            (directory / edit["file"]).write_text(edit["text"])
        elif edit["op"] in ("delete", "delete_directory"):
            text = ""
        else:
            raise ValueError(f"{case['name']}: unknown edit {edit}")
    ops = {edit["op"] for edit in case["edit"]}
    if "delete_directory" in ops:
        shutil.rmtree(directory)
    elif "delete" not in ops:
        (directory / artifact.METADATA_FILE).write_text(text if text is not None else json.dumps(meta, indent=2))
    return directory


def _rewrite_header(data: bytes, set_: dict[str, str], remove: list[str]) -> bytes:
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    meta = {k: v for k, v in {**header.get("__metadata__", {}), **set_}.items() if k not in remove}
    header["__metadata__"] = meta
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + data[8 + size :]


def build_state_case(case: dict[str, Any], saved: Path, root: Path) -> Path:
    path = root / f"{case['name']}.safetensors"
    data = saved.read_bytes()
    for edit in case["edit"]:
        if edit["op"] == "header":
            data = _rewrite_header(data, edit.get("set", {}), edit.get("remove", []))
        elif edit["op"] == "truncate":
            data = data[: len(data) // 2]
        elif edit["op"] == "text":
            data = edit["value"].encode()
        else:
            raise ValueError(f"{case['name']}: unknown edit {edit}")
    path.write_bytes(data)
    return path


@pytest.fixture(scope="module")
def source(demo_exports) -> Path:
    return demo_exports[tuple(CASES["export"])]


@pytest.fixture(scope="module")
def metadata_dirs(source, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bad_artifacts")
    return {name: build_metadata_case(case, source, root) for name, case in METADATA_CASES.items()}


@pytest.fixture(scope="module")
def state_files(source, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bad_state_files")
    session = rt.load(source, backend="onnxruntime")
    saved = session.prefill([[1, 2, 3], [4, 5, 10]]).save(root / "saved.safetensors")
    files = {name: build_state_case(case, saved, root) for name, case in STATE_CASES.items()}
    files[""] = saved  # a good one: it loads everywhere
    return files


Result = tuple[Optional[str], str]  # (reason or None, message or "ok")


def _python_metadata(directory: Path) -> Result:
    try:
        read_metadata(directory)
    except MetadataError as error:
        return error.reason, str(error)
    return None, "ok"


def _python_state(backend, path: Path) -> Result:
    try:
        read_state_file(backend, path)
    except ValueError as error:  # InputError
        return getattr(error, "reason", None), str(error)
    return None, "ok"


def _native_build() -> Path:
    """The sanitizer build of the C API."""
    if shutil.which("cmake") is None:
        pytest.skip("cmake not found: cannot build the native runtime")
    from rnnx.plugins import native_runtime

    return native_runtime.build("address,undefined")


def _c_lines(*args: str, count: int) -> list[Result]:
    result = subprocess.run([str(_native_build() / "rnnx_check"), *args], capture_output=True, text=True, timeout=600,
                            env={**os.environ, **ASAN_ENV})  # fmt: skip
    assert result.returncode == 0 and "Sanitizer" not in result.stderr, result.stderr[-3000:]
    lines = [line.split("\t", 2) for line in result.stdout.splitlines()]
    assert len(lines) == count, result.stdout
    return [(reason or None, message) for _, reason, message in lines]


def _js(directories: list[Path]) -> dict[str, Any]:
    if NODE is None:
        pytest.skip("node is not installed: the JavaScript reader cannot run")
    script = (
        "import * as fs from 'node:fs/promises';\n"
        "import { readFileSync } from 'node:fs';\n"
        f"import {{ jsonText, readMetadata }} from {json.dumps(RNNX_MJS.as_uri())};\n"
        "const { dirs, values } = JSON.parse(readFileSync(0, 'utf8'));\n"
        "const refusals = [];\n"
        "for (const dir of dirs) {\n"
        "  try { await readMetadata(dir, fs); refusals.push([null, 'ok']); }\n"
        "  catch (e) { refusals.push([e.reason ?? null, e.message]); }\n"
        "}\n"
        "console.log(JSON.stringify({ refusals, rendered: values.map(jsonText) }));\n"
    )
    stdin = json.dumps({"dirs": [str(d) for d in directories], "values": RENDERED})
    result = subprocess.run([NODE, "--input-type=module", "-e", script], input=stdin, capture_output=True, text=True,
                            timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def metadata_results(metadata_dirs) -> dict[str, dict[str, Result]]:
    """Case -> reader -> (reason, message); a reader that cannot run here is missing."""
    names = list(metadata_dirs)
    out: dict[str, dict[str, Result]] = {name: {"python": _python_metadata(metadata_dirs[name])} for name in names}
    for reader, run in (("c", lambda: _c_lines("refusals", *map(str, metadata_dirs.values()), count=len(names))),
                        ("js", lambda: [tuple(r) for r in _js(list(metadata_dirs.values()))["refusals"]])):  # fmt: skip
        try:
            results = run()
        except pytest.skip.Exception:
            continue
        for name, result in zip(names, results):
            out[name][reader] = result
    return out


@pytest.fixture(scope="module")
def state_results(source, state_files) -> dict[str, dict[str, Result]]:
    names = list(state_files)
    backend = rt.load(source, backend="onnxruntime").backend
    out: dict[str, dict[str, Result]] = {name: {"python": _python_state(backend, state_files[name])} for name in names}
    try:
        results = _c_lines("refusals-load", str(source), "-", *map(str, state_files.values()), count=len(names))
    except pytest.skip.Exception:
        results = []
    for name, result in zip(names, results):
        out[name]["c"] = result
    return out


def _template_pattern(reason: str) -> re.Pattern:
    """A refusal's text as a pattern: ``{detail}`` a named group, the other placeholders any text."""
    parts = re.split(r"(\{\w+\})", REFUSALS[reason])
    pattern = "".join(
        "(?P<detail>.*)" if p == "{detail}" else ".*?" if re.fullmatch(r"\{\w+\}", p) else re.escape(p) for p in parts
    )
    return re.compile(pattern + "$")


def _text_after_path(message: str, directory: Path, reason: str) -> tuple[str, str]:
    """(the file a refusal names, relative to the case's directory; its text after "<path>: ", {detail} masked)."""
    assert "\n" not in message, message
    prefix = str(directory)
    assert message.startswith(prefix), (message, prefix)
    file, _, text = message[len(prefix) :].partition(": ")
    match = _template_pattern(reason).match(text)
    assert match is not None, (reason, text)
    if "detail" in match.groupdict():
        text = text[: match.start("detail")] + "{detail}" + text[match.end("detail") :]
    return file, text


def _check_case(case: dict[str, Any], results: dict[str, Result], directory: Path, readers: tuple[str, ...]) -> None:
    got = {reader: results[reader][0] for reader in readers if reader in results}
    want = {reader: expected(case, reader) for reader in got}
    assert got == want, {reader: results[reader] for reader in got}
    refused = {}
    for reader, (reason, message) in results.items():
        if reason is None:
            assert message == "ok", (reader, message)
        else:
            refused.setdefault(reason, {})[reader] = _text_after_path(message, directory, reason)
    for texts in refused.values():
        assert len(set(texts.values())) == 1, texts  # the same file and the same line after it
    missing = [reader for reader in readers if reader not in results]
    if missing:
        pytest.skip(f"{', '.join(missing)} could not run here: checked {', '.join(got)} only")


@pytest.mark.parametrize("name", METADATA_CASES)
def test_bad_metadata_is_refused_alike(name: str, metadata_results, metadata_dirs):
    """Python, the C API and JavaScript give the case's reason, and the same line after the path."""
    _check_case(METADATA_CASES[name], metadata_results[name], metadata_dirs[name], READERS)


@pytest.mark.parametrize("name", STATE_CASES)
def test_bad_state_files_are_refused_alike(name: str, state_results, state_files):
    """Python and the C API (JavaScript reads no state files) give the case's reason and the same line."""
    _check_case(STATE_CASES[name], state_results[name], state_files[name].parent, ("python", "c"))


def test_a_good_state_file_loads_in_both(state_results):
    assert state_results[""] in ({"python": (None, "ok"), "c": (None, "ok")}, {"python": (None, "ok")})


def test_the_cases_reach_every_refusal():
    """Every reason of the table has a case (but UNREACHED's); a case whose readers differ says why, and a reader
    differs only by a refusal the table gives to some readers only (READER_REFUSALS)."""
    reached = set()
    for case in [*CASES["metadata"], *CASES["state_files"]]:
        readers = READERS if case in CASES["metadata"] else ("python", "c")
        reasons = {reader: expected(case, reader) for reader in readers}
        reached |= set(reasons.values()) - {None}
        assert set(case.get("reasons", {})) <= set(readers), case["name"]
        assert ("reasons" in case) == ("why" in case) == (len(set(reasons.values())) > 1), case["name"]
        for reader, reason in reasons.items():
            assert reason is None or reason in REFUSALS, (case["name"], reason)
            assert reason not in READER_REFUSALS or reader in READER_REFUSALS[reason], (case["name"], reader, reason)
        if len(set(reasons.values())) > 1:
            shared = {r for r in reasons.values() if r is not None and r not in READER_REFUSALS}
            assert len(shared) <= 1, (case["name"], reasons)
    assert reached == set(REFUSALS) - set(UNREACHED)
    assert len(CASES["metadata"]) + len(CASES["state_files"]) >= 12


def test_the_schemas_refuse_what_they_can(validators, metadata_dirs, state_files):
    """A case the schema can judge (a document, field or header refusal in Python) fails the schema; the others (the
    graph, the layout, the files) pass it: they are the readers' checks beyond the schema."""
    for name, case in METADATA_CASES.items():
        path = metadata_dirs[name] / artifact.METADATA_FILE
        try:
            meta = json.loads(path.read_text(), parse_constant=artifact._not_a_json_constant)
        except (OSError, ValueError):
            continue  # not a JSON document: no schema judges it
        errors = list(validators[schema.METADATA_SCHEMA].iter_errors(meta))
        assert bool(errors) == (expected(case, "python") in SCHEMA_REASONS), (name, [e.message for e in errors])
    for name, case in STATE_CASES.items():
        data = state_files[name].read_bytes()
        size = int.from_bytes(data[:8], "little")
        if expected(case, "python") not in STATE_SCHEMA_REASONS:
            continue
        header = json.loads(data[8 : 8 + size])["__metadata__"]
        assert list(validators[schema.STATE_SCHEMA].iter_errors(header)), name
    good = state_files[""].read_bytes()
    header = json.loads(good[8 : 8 + int.from_bytes(good[:8], "little")])["__metadata__"]
    assert [e.message for e in validators[schema.STATE_SCHEMA].iter_errors(header)] == []


def test_values_are_rendered_alike(metadata_dirs):
    """A refusal's values are JSON as JavaScript's JSON.stringify writes them, in Python and in JavaScript (the C
    API's rendering shows in the fixtures' messages: arrays, strings, integers)."""
    want = [artifact.json_text(v) for v in RENDERED]
    assert want[:4] == [json.dumps(RENDERED[0], ensure_ascii=False), "0", "0", "12"]
    assert _js([])["rendered"] == want


def test_the_refusal_names_the_file_the_field_and_both_values(metadata_results):
    """The standard: one line naming the file, the field, what was expected and what was found."""
    reason, message = metadata_results["vocab-size-a-boolean"]["python"]
    assert message.endswith('rnnx.json: field "vocab_size" is true, expected an integer >= 1'), message
    reason, message = metadata_results["state-without-batch-axis"]["python"]
    assert message.endswith('field "state[0].shape" is [4,32,32], expected a shape with a "batch" axis'), message
    reason, message = metadata_results["unknown-dtype"]["python"]
    assert 'field "state[0].dtype" is "complex64", expected one of "float32", "float16"' in message
    reason, message = metadata_results["state-not-a-graph-input"]["python"]
    assert message.endswith('state "layers.0.S": "past_key_values.layers.0.S" is not a graph input'), message
