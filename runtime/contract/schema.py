"""The artifact contract as machine-readable files, generated from the records of :mod:`.artifact`.

``python3 -m rnnx.runtime.contract.schema --write`` (re)writes, from ``TABLES``, ``LM_INPUTS`` / ``LM_OUTPUTS``,
``REFUSALS``, ``STATE_HEADER`` and the names and versions of :mod:`.artifact`:

* ``runtime/contract/rnnx.schema.json``: a JSON Schema (draft 2020-12) of ``rnnx.json``: what any tool can validate an
  export's metadata with. It holds what a schema can say (kinds, required fields per interface, enumerations,
  minimums, file names, a state shape's batch axis); the readers check more (duplicate names, a state's graph
  names, a language model's layout, the files' hashes: the check list in :mod:`.artifact`);
* ``runtime/contract/rnnx-state.schema.json``: the same for a state file's header metadata (``__metadata__`` of its
  safetensors header);
* ``runtime/native/src/contract_generated.h``: the C API's tables (``rnnx::contract``): names, versions, dtypes, the
  field tables, the refusal templates; ``runtime/native/src/contract.cpp`` checks with them;
* ``runtime/js/contract.generated.mjs``: the same for the JavaScript runtime (``runtime/js/rnnx.mjs`` imports it).

``python3 -m rnnx.runtime.contract.schema`` (or ``--check``) says which files differ from what the records generate
and exits 1 if any does; ``tests/test_contract_schema.py`` fails then too, so a record never changes without them.
Standard library only, like the rest of the contract.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Optional

from . import artifact as a

#: ``runtime/``: the generated files' paths below are relative to it.
RUNTIME_DIR = Path(__file__).resolve().parents[1]
METADATA_SCHEMA = "contract/rnnx.schema.json"
STATE_SCHEMA = "contract/rnnx-state.schema.json"
CPP_TABLES = "native/src/contract_generated.h"
JS_TABLES = "js/contract.generated.mjs"
COMMAND = "python3 -m rnnx.runtime.contract.schema --write"
DRAFT = "https://json-schema.org/draft/2020-12/schema"
#: A plain file name (artifact.is_file_name) as an ECMA-262 pattern.
FILE_NAME_PATTERN = r"^(?!\.\.?$)[^/\\]+$"
#: The kinds in bit order (the C tables' masks).
KIND_ORDER = tuple(a.KINDS)
#: The metadata field descriptions the schema carries (facts a schema cannot check by itself).
DESCRIPTIONS = {
    ("metadata", "interface"): f"absent: {a.CAUSAL_LM} (format_version 1 has no other)",
    ("metadata", "inputs"): f"graph order: the data inputs, then {a.PAST_PREFIX}<name> per state tensor",
    ("metadata", "outputs"): f"graph order: the data outputs, then {a.PRESENT_PREFIX}<name> per state tensor",
    ("metadata", "signature"): "hex sha256 of the model type, config, state layout and weights (model_signature)",
    ("metadata", "external_data"): "absent or null: the weights are inside model_file",
    ("state", "name"): "the flat name (layers.0.S)",
    ("state", "input"): f"{a.PAST_PREFIX}<name>, a graph input",
    ("state", "output"): f"{a.PRESENT_PREFIX}<name>, a graph output",
    ("state", "grows"): f"a KV cache: its {a.PAST_LENGTH} axis grows by {a.LENGTH} per call",
}


# -- the JSON Schemas --------------------------------------------------------------------------------------


def _rule_schema(rule: a.Rule) -> dict[str, Any]:
    alternatives = []
    for kind in rule.kinds:
        schema: dict[str, Any] = {"type": kind}
        if kind == "string":
            if rule.strings:
                schema["enum"] = list(rule.strings)
            if rule.non_empty:
                schema["minLength"] = 1
            if rule.file_name:
                schema["pattern"] = FILE_NAME_PATTERN
        elif kind == "integer":
            if rule.integers:
                schema["enum"] = list(rule.integers)
            if rule.minimum is not None:
                schema["minimum"] = rule.minimum
        elif kind == "array":
            if rule.items is not None:
                schema["items"] = _rule_schema(rule.items)
            if rule.contains is not None:
                schema["contains"] = {"const": rule.contains}
        elif kind == "object":
            if rule.members is not None:
                schema = {"$ref": f"#/$defs/{rule.members}"}
            if rule.values is not None:
                schema["additionalProperties"] = _rule_schema(rule.values)
        alternatives.append(schema)
    return alternatives[0] if len(alternatives) == 1 else {"anyOf": alternatives}


def _table_schema(table: str) -> dict[str, Any]:
    properties = {}
    for field in a.TABLES[table]:
        properties[field.name] = _rule_schema(field.rule)
        if (table, field.name) in DESCRIPTIONS:
            properties[field.name] = {"description": DESCRIPTIONS[table, field.name], **properties[field.name]}
    required = [f.name for f in a.TABLES[table] if set(f.required) == set(a.INTERFACES)]
    return {"type": "object", "properties": properties, "required": required}


def _interface_is(interface: str) -> dict[str, Any]:
    """A condition: the document's interface is ``interface`` (absent counts as causal_lm)."""
    named = {"properties": {"interface": {"const": interface}}, "required": ["interface"]}
    return {"anyOf": [{"not": {"required": ["interface"]}}, named]} if interface == a.CAUSAL_LM else named


def metadata_schema() -> dict[str, Any]:
    """The JSON Schema of ``rnnx.json``."""
    rules = []
    for version, interfaces in a.INTERFACES_BY_VERSION.items():
        if interfaces != a.INTERFACES:
            rules.append({
                "if": {"properties": {"format_version": {"const": version}}, "required": ["format_version"]},
                "then": {"properties": {"interface": {"enum": list(interfaces)}}},
            })  # fmt: skip
    for interface in a.INTERFACES:
        extra = [
            f.name for f in a.TABLES["metadata"] if interface in f.required and set(f.required) != set(a.INTERFACES)
        ]
        if extra:
            rules.append({"if": _interface_is(interface), "then": {"required": extra}})
    return {
        "$schema": DRAFT,
        "title": f"rnnx export metadata ({a.METADATA_FILE})",
        "description": (
            f"The metadata of an rnnx export directory, format {a.FORMAT} version {a.FORMAT_VERSION}: generated from "
            f"rnnx.runtime.contract.artifact by `{COMMAND}`; do not edit. Readers check more than this schema says "
            "(duplicate graph names, each state tensor's graph names, a causal_lm graph's layout, the files' sha256s)."
        ),
        **_table_schema("metadata"),
        "allOf": rules,
        "$defs": {name: _table_schema(name) for name in a.TABLES if name != "metadata"},
    }


def _header_pattern(minimum: int) -> str:
    if minimum not in (0, 1):
        raise ValueError(f"a header integer's minimum is 0 or 1 as a pattern, got {minimum}")
    return r"^[0-9]{1,18}$" if minimum == 0 else r"^(?=[0-9]{1,18}$)0*[1-9][0-9]*$"


def state_header_schema() -> dict[str, Any]:
    """The JSON Schema of a state file's header metadata (its safetensors header's ``__metadata__``)."""
    properties = {}
    for field in a.STATE_HEADER:
        schema: dict[str, Any] = {"description": field.description, "type": "string"}
        if field.value:
            schema["const"] = field.value
        if field.minimum is not None:
            schema["pattern"] = _header_pattern(field.minimum)
        properties[field.name] = schema
    return {
        "$schema": DRAFT,
        "title": "rnnx state file header",
        "description": (
            f"The __metadata__ of an rnnx state file's safetensors header (format {a.STATE_FORMAT} version "
            f"{a.STATE_FORMAT_VERSION}; tensors {a.STATE_TENSOR_PREFIX}<name> and {a.STATE_LAST_LOGITS}): generated "
            f"from rnnx.runtime.contract.artifact by `{COMMAND}`; do not edit. Other string entries are allowed."
        ),
        "type": "object",
        "properties": properties,
        "required": [f.name for f in a.STATE_HEADER if f.required],
        "additionalProperties": {"type": "string"},
    }


def _json_file(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2) + "\n"


# -- the C API's tables ----------------------------------------------------------------------------------------


def _cpp_string(text: str) -> str:
    if not text.isascii():
        raise ValueError(f"the C tables hold ASCII text only, got {text!r}")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _kind_mask(kinds: tuple[str, ...]) -> str:
    return " | ".join(f"k{kind.capitalize()}" for kind in kinds)


def _interface_mask(interfaces: tuple[str, ...]) -> str:
    return f"{sum(1 << a.INTERFACES.index(i) for i in interfaces)}u"


class _CppRules:
    """Emits each nested rule (an array's items, a map's values) as a named constant before its first use."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.count = 0

    def array(self, name: str, kind: str, values: tuple) -> tuple[str, int]:
        if not values:
            return "nullptr", 0
        shown = ", ".join(_cpp_string(v) if kind == "std::string_view" else str(v) for v in values)
        self.lines.append(f"inline constexpr {kind} {name}[] = {{{shown}}};")
        return name, len(values)

    def rule(self, rule: a.Rule) -> str:
        """The aggregate initializer of ``rule`` (its nested rules emitted first)."""
        n = self.count
        self.count += 1
        strings = self.array(f"kRuleStrings{n}", "std::string_view", rule.strings)
        integers = self.array(f"kRuleIntegers{n}", "int64_t", rule.integers)
        items = self.named(rule.items, f"kRuleItems{n}")
        values = self.named(rule.values, f"kRuleValues{n}")
        members = list(a.TABLES).index(rule.members) if rule.members is not None else -1
        minimum = "false, 0" if rule.minimum is None else f"true, {rule.minimum}"
        contains = _cpp_string(rule.contains) if rule.contains is not None else "{}"
        return (
            f"{{{_kind_mask(rule.kinds)}, {strings[0]}, {strings[1]}, {integers[0]}, {integers[1]}, {minimum}, "
            f"{str(rule.non_empty).lower()}, {str(rule.file_name).lower()}, {items}, {contains}, {members}, {values}, "
            f"{_cpp_string(rule.expected)}}}"
        )

    def named(self, rule: Optional[a.Rule], name: str) -> str:
        if rule is None:
            return "nullptr"
        body = self.rule(rule)
        self.lines.append(f"inline constexpr Rule {name} = {body};")
        return f"&{name}"


def cpp_tables() -> str:
    """``runtime/native/src/contract_generated.h``."""
    out = [
        "// clang-format off",
        "// Generated from rnnx/runtime/contract/artifact.py (the artifact contract's records) by",
        f"// `{COMMAND}`: do not edit. tests/test_contract_schema.py fails when this file differs",
        "// from what the records generate. contract.cpp checks rnnx.json and state file headers with these tables, in",
        "// the contract's order, with its refusal texts (artifact.py's REFUSALS).",
        "#pragma once",
        "",
        "#include <cstddef>",
        "#include <cstdint>",
        "#include <string_view>",
        "",
        "namespace rnnx::contract",
        "{",
        "",
        "// -- names and versions",
    ]
    names = {"kFormat": a.FORMAT, "kMetadataFile": a.METADATA_FILE, "kCausalLm": a.CAUSAL_LM,
             "kStateful": a.STATEFUL, "kBatch": a.BATCH, "kLength": a.LENGTH, "kPastLength": a.PAST_LENGTH,
             "kInputIds": a.INPUT_IDS, "kAttentionMask": a.ATTENTION_MASK, "kLogits": a.LOGITS,
             "kPastPrefix": a.PAST_PREFIX, "kPresentPrefix": a.PRESENT_PREFIX, "kStateFormat": a.STATE_FORMAT,
             "kStateFormatVersion": str(a.STATE_FORMAT_VERSION), "kStateTensorPrefix": a.STATE_TENSOR_PREFIX,
             "kStateLastLogits": a.STATE_LAST_LOGITS}  # fmt: skip
    out += [f"inline constexpr std::string_view {name} = {_cpp_string(value)};" for name, value in names.items()]
    out.append(f"inline constexpr int64_t kFormatVersion = {a.FORMAT_VERSION};")
    rules = _CppRules()
    for name, values in (("kInterfaces", a.INTERFACES), ("kDtypes", a.DTYPES), ("kNumpyDtypes", a.NUMPY_DTYPES)):
        rules.array(name, "std::string_view", values)
    out += rules.lines
    out += [
        "// The readable format_versions, each with its interfaces (bit i: kInterfaces[i]) and their list as a refusal",
        "// shows it.",
        "struct FormatVersion",
        "{",
        "    int64_t version;",
        "    unsigned interfaces;",
        "    std::string_view text;",
        "};",
        "inline constexpr FormatVersion kFormatVersions[] = {",
        *(
            f"    {{{version}, {_interface_mask(interfaces)}, {_cpp_string(', '.join(map(a.json_text, interfaces)))}}},"
            for version, interfaces in a.INTERFACES_BY_VERSION.items()
        ),
        "};",
        "inline constexpr std::string_view kFormatVersionsText = "
        + _cpp_string(", ".join(map(a.json_text, a.READABLE_FORMAT_VERSIONS)))
        + ";",
        "",
        "// -- the field tables (artifact.py's TABLES)",
        "// JSON kinds, as bits; kKindNames[i] names bit i in a refusal.",
        "enum Kind : unsigned",
        "{",
        *(f"    k{kind.capitalize()} = {1 << i}u," for i, kind in enumerate(KIND_ORDER)),
        "};",
        "inline constexpr std::string_view kKindNames[] = {"
        + ", ".join(_cpp_string(a.KINDS[k]) for k in KIND_ORDER)
        + "};",
        "// What a value must be (artifact.Rule): kinds; a string one of `strings` (when any), non-empty, a file name;",
        "// an integer one of `integers` (when any), >= minimum; an array's items, an item equal to `contains` (when",
        "// not empty); an object's fields kTables[members] (when >= 0) or every value `values`; the refusal's text.",
        "struct Rule",
        "{",
        "    unsigned kinds;",
        "    const std::string_view* strings;",
        "    size_t strings_size;",
        "    const int64_t* integers;",
        "    size_t integers_size;",
        "    bool has_minimum;",
        "    int64_t minimum;",
        "    bool non_empty;",
        "    bool file_name;",
        "    const Rule* items;",
        "    std::string_view contains;",
        "    int members;",
        "    const Rule* values;",
        "    std::string_view expected;",
        "};",
        "// One member of an object: its name, rule and the interfaces that need it (bit i: kInterfaces[i]; 0:",
        "// optional).",
        "struct Field",
        "{",
        "    std::string_view name;",
        "    Rule rule;",
        "    unsigned required;",
        "};",
        "struct Table",
        "{",
        "    std::string_view name;",
        "    const Field* fields;",
        "    size_t size;",
        "};",
    ]
    rules = _CppRules()
    tables = []
    for table, fields in a.TABLES.items():
        rows = [f"    {{{_cpp_string(f.name)}, {rules.rule(f.rule)}, {_interface_mask(f.required)}}}," for f in fields]
        name = "kTable" + "".join(part.capitalize() for part in table.split("_"))
        tables.append((table, name, [f"inline constexpr Field {name}[] = {{", *rows, "};"], len(fields)))
    out += rules.lines
    for _, _, lines, _ in tables:
        out += lines
    out += [
        "inline constexpr Table kTables[] = {",
        *(f"    {{{_cpp_string(table)}, {name}, {size}}}," for table, name, _, size in tables),
        "};",
        "",
        "// -- a causal_lm graph's data inputs and outputs (artifact.py's LM_INPUTS, LM_OUTPUTS)",
        "struct LmSlot",
        "{",
        "    std::string_view name;",
        "    const std::string_view* dtypes;",
        "    size_t dtypes_size;",
        "    std::string_view expected_dtype;",
        "};",
    ]
    rules = _CppRules()
    for side, slots in (("Inputs", a.LM_INPUTS), ("Outputs", a.LM_OUTPUTS)):
        rows = []
        for i, (name, dtypes) in enumerate(slots):
            array = rules.array(f"kLm{side}Dtypes{i}", "std::string_view", dtypes)
            rows.append(f"    {{{_cpp_string(name)}, {array[0]}, {array[1]}, {_cpp_string(a.one_of(dtypes))}}},")
        lead = ", ".join(a.json_text(name) for name, _ in slots)
        rules.lines += [f"inline constexpr LmSlot kLm{side}[] = {{", *rows, "};"]
        rules.lines.append(f"inline constexpr std::string_view kLm{side}Lead = {_cpp_string(lead)};")
    out += rules.lines
    out += [
        "",
        '// -- refusals (artifact.py\'s REFUSALS): the text after "<path>: ", placeholders {name}',
        "struct Refusal",
        "{",
        "    std::string_view reason;",
        "    std::string_view text;",
        "};",
        "inline constexpr Refusal kRefusals[] = {",
        *(f"    {{{_cpp_string(reason)}, {_cpp_string(text)}}}," for reason, text in a.REFUSALS.items()),
        "};",
        "",
        "// -- a state file's header metadata (artifact.py's STATE_HEADER), in check order",
        "struct HeaderField",
        "{",
        "    std::string_view name;",
        "    std::string_view value;  // the one it takes (refused with `reason`); empty: any",
        "    std::string_view reason;",
        "    bool has_minimum;  // a decimal integer (at most 18 digits) >= minimum",
        "    int64_t minimum;",
        "    bool required;",
        "    std::string_view expected;",
        "};",
        "inline constexpr HeaderField kStateHeader[] = {",
        *(
            f"    {{{_cpp_string(f.name)}, {_cpp_string(f.value)}, {_cpp_string(f.reason)}, "
            f"{'false, 0' if f.minimum is None else f'true, {f.minimum}'}, {str(f.required).lower()}, "
            f"{_cpp_string(f.expected)}}},"
            for f in a.STATE_HEADER
        ),
        "};",
        "",
        "} // namespace rnnx::contract",
        "// clang-format on",
    ]
    return "\n".join(out) + "\n"


# -- the JavaScript runtime's tables -------------------------------------------------------------------------


def _js_rule(rule: a.Rule) -> dict[str, Any]:
    return {
        "kinds": list(rule.kinds), "strings": list(rule.strings), "integers": list(rule.integers),
        "minimum": rule.minimum, "nonEmpty": rule.non_empty, "fileName": rule.file_name,
        "items": _js_rule(rule.items) if rule.items is not None else None, "contains": rule.contains,
        "members": rule.members, "values": _js_rule(rule.values) if rule.values is not None else None,
        "expected": rule.expected,
    }  # fmt: skip


def _js_rows(value: Any, depth: int = 0) -> str:
    """``value`` as JSON with one entry per line and each entry on one line (a list of lists, or an object of lists,
    opens one more level): a table reads as rows, and no run of lines repeats another's shape."""
    pad, inner = "  " * depth, "  " * (depth + 1)
    nested = depth == 0 and all(
        isinstance(v, (list, dict)) for v in (value.values() if isinstance(value, dict) else value)
    )
    if isinstance(value, dict) and value:
        rows = [f"{inner}{json.dumps(k)}: {_js_rows(v, depth + 1) if nested and isinstance(v, list) else json.dumps(v)}"
                for k, v in value.items()]  # fmt: skip
        return "{\n" + ",\n".join(rows) + f"\n{pad}}}"
    if isinstance(value, list) and value:
        return "[\n" + ",\n".join(f"{inner}{json.dumps(v)}" for v in value) + f"\n{pad}]"
    return json.dumps(value)


def js_tables() -> str:
    """``runtime/js/contract.generated.mjs``."""

    def const(name: str, value: Any, doc: str = "", indent: Optional[int] = None) -> str:
        head = f"/** {doc} */\n" if doc else ""
        return f"{head}export const {name} = {_js_rows(value) if indent else json.dumps(value)};"

    tables = {
        table: [{"name": f.name, "rule": _js_rule(f.rule), "required": list(f.required)} for f in fields]
        for table, fields in a.TABLES.items()
    }
    lm = {
        side: [{"name": name, "dtypes": list(dtypes), "expected": a.one_of(dtypes)} for name, dtypes in slots]
        for side, slots in (("inputs", a.LM_INPUTS), ("outputs", a.LM_OUTPUTS))
    }
    sides = (("inputs", a.LM_INPUTS), ("outputs", a.LM_OUTPUTS))
    lead = {side: ", ".join(a.json_text(n) for n, _ in slots) for side, slots in sides}
    header = [
        {"name": f.name, "value": f.value, "reason": f.reason, "minimum": f.minimum, "required": f.required,
         "expected": f.expected}
        for f in a.STATE_HEADER
    ]  # fmt: skip
    versions = {
        str(v): {"interfaces": list(i), "text": ", ".join(map(a.json_text, i))}
        for v, i in a.INTERFACES_BY_VERSION.items()
    }
    lines = [
        "// Generated from rnnx/runtime/contract/artifact.py (the artifact contract's records) by",
        f"// `{COMMAND}`: do not edit. tests/test_contract_schema.py fails when this file differs",
        "// from what the records generate. rnnx.mjs checks rnnx.json with these tables, in the contract's order, with",
        "// its refusal texts (artifact.py's REFUSALS).",
        "",
        const("FORMAT", a.FORMAT, "rnnx.json's format name, its version, and the versions a reader accepts."),
        const("FORMAT_VERSION", a.FORMAT_VERSION),
        const("READABLE_FORMAT_VERSIONS", list(a.READABLE_FORMAT_VERSIONS)),
        const("FORMAT_VERSIONS_TEXT", ", ".join(map(a.json_text, a.READABLE_FORMAT_VERSIONS))),
        const("INTERFACES_BY_VERSION", versions, "Each readable format_version's interfaces, and their list as shown."),
        const("METADATA_FILE", a.METADATA_FILE),
        const("MODEL_FILE", a.MODEL_FILE),
        const("CAUSAL_LM", a.CAUSAL_LM, "The graph interfaces."),
        const("STATEFUL", a.STATEFUL),
        const("INTERFACES", list(a.INTERFACES)),
        const("INPUT_IDS", a.INPUT_IDS, "Graph tensor names, state prefixes and axes."),
        const("ATTENTION_MASK", a.ATTENTION_MASK),
        const("LOGITS", a.LOGITS),
        const("PAST_PREFIX", a.PAST_PREFIX),
        const("PRESENT_PREFIX", a.PRESENT_PREFIX),
        const("BATCH", a.BATCH),
        const("LENGTH", a.LENGTH),
        const("PAST_LENGTH", a.PAST_LENGTH),
        const("AXES", list(a.AXES)),
        const("DTYPES", list(a.DTYPES), "dtype names rnnx.json spells, and those a state tensor may have."),
        const("NUMPY_DTYPES", list(a.NUMPY_DTYPES)),
        const("STATE_FORMAT", a.STATE_FORMAT, "State files (the Python runtime and the C API read and write them)."),
        const("STATE_FORMAT_VERSION", str(a.STATE_FORMAT_VERSION)),
        const("STATE_TENSOR_PREFIX", a.STATE_TENSOR_PREFIX),
        const("STATE_LAST_LOGITS", a.STATE_LAST_LOGITS),
        const("STATE_HEADER", header, "A state file's header metadata, in check order.", indent=2),
        const("KINDS", a.KINDS, "JSON kinds and how a refusal names each.", indent=2),
        const("TABLES", tables, "The fields of each object of rnnx.json, in check order (artifact.py's TABLES).", 2),
        const("LM_SLOTS", lm, "A causal_lm graph's data inputs and outputs, first and in this order.", indent=2),
        const("LM_LEAD", lead),
        const("REFUSALS", a.REFUSALS, 'Every refusal by reason: the text after "<path>: ", placeholders {name}.'),
    ]
    return "\n".join(lines) + "\n"


# -- the files -----------------------------------------------------------------------------------------------------


def generated_files() -> dict[str, str]:
    """Each generated file's path (relative to ``runtime/``) -> its text, as the records generate it now."""
    return {
        METADATA_SCHEMA: _json_file(metadata_schema()),
        STATE_SCHEMA: _json_file(state_header_schema()),
        CPP_TABLES: cpp_tables(),
        JS_TABLES: js_tables(),
    }


def stale_files(root: Path = RUNTIME_DIR) -> list[str]:
    """The generated files under ``root`` that are missing or differ from what the records generate."""
    return [
        path
        for path, text in generated_files().items()
        if not (root / path).is_file() or (root / path).read_text(encoding="utf-8") != text
    ]


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m rnnx.runtime.contract.schema",
        description="Generates rnnx.json's JSON Schema, the state file header's, and the C and JavaScript readers' "
        "tables from the artifact contract's records.",
    )
    parser.add_argument("--write", action="store_true", help="write the files that differ")
    parser.add_argument("--check", action="store_true", help="exit 1 when a file differs (the default)")
    args = parser.parse_args(argv)
    stale = stale_files()
    if args.write:
        for path in stale:
            (RUNTIME_DIR / path).write_text(generated_files()[path], encoding="utf-8")
            print(f"wrote runtime/{path}")
        return 0
    for path in stale:
        print(f"runtime/{path} differs from what the contract's records generate: run {COMMAND}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
