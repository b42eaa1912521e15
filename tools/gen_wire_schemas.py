#!/usr/bin/env python3
"""Generate wire/schemas.py from Kafka's JSON message schemas.

Usage (from the project root):
    .venv/bin/python tools/gen_wire_schemas.py [--source DIR] [--output FILE]

The schemas are JSON with // comments. Every *.json file in --source (default
../shared/reference/kafka-protocol) becomes one `MessageSpec` in the output, with its
common structs resolved into the fields that use them. The output is formatted the way
`ruff format` would format it, so the committed module stays byte-identical to a fresh
run (tests/unit/test_wire_schemas.py checks this).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = "../shared/reference/kafka-protocol"
DEFAULT_OUTPUT = "wire/schemas.py"
LINE_LENGTH = 100
INDENT = "    "

PRIMITIVES = {
    "bool",
    "int8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "float64",
    "string",
    "bytes",
    "uuid",
    "records",
}
MESSAGE_KEYS = {
    "apiKey",
    "type",
    "name",
    "validVersions",
    "flexibleVersions",
    "deprecatedVersions",
    "latestVersionUnstable",
    "listeners",
    "fields",
    "commonStructs",
}
FIELD_KEYS = {
    "name",
    "type",
    "versions",
    "nullableVersions",
    "taggedVersions",
    "tag",
    "default",
    "ignorable",
    "flexibleVersions",
    "entityType",
    "mapKey",
    "zeroCopy",
    "about",
    "fields",
}
STRUCT_KEYS = {"name", "versions", "fields"}


# Struct name -> the constant holding a common struct's fields, or an inline struct's raw fields.
Structs = dict[str, "str | list[dict[str, Any]]"]


class SchemaError(Exception):
    pass


def strip_comments(text: str) -> str:
    """Remove // comments outside string literals (the schemas' only JSON extension)."""
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def load_schema(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(strip_comments(path.read_text(encoding="utf-8")))
    except json.JSONDecodeError as exc:
        raise SchemaError(f"{path.name}: invalid JSON after stripping comments: {exc}") from exc
    if not isinstance(data, dict):
        raise SchemaError(f"{path.name}: top level is not an object")
    return data


# ---------------------------------------------------------------------------------------------
# A tiny expression tree, printed the way ruff format prints it: on one line when it fits,
# otherwise one element per line with a trailing comma (which ruff then keeps exploded).


@dataclass(frozen=True)
class Raw:
    text: str


@dataclass(frozen=True)
class Call:
    func: str
    args: tuple[tuple[str | None, Node], ...]


@dataclass(frozen=True)
class Tup:
    items: tuple[Node, ...]


Node = Raw | Call | Tup


def py_str(value: str) -> str:
    """A string literal in ruff's preferred quoting (double, unless that needs more escapes)."""
    body = value.replace("\\", "\\\\")
    for char, escape in (("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t")):
        body = body.replace(char, escape)
    if '"' in body and "'" not in body:
        return "'" + body + "'"
    return '"' + body.replace('"', '\\"') + '"'


def flat(node: Node) -> str:
    if isinstance(node, Raw):
        return node.text
    if isinstance(node, Tup):
        if len(node.items) == 1:
            return "(" + flat(node.items[0]) + ",)"
        return "(" + ", ".join(flat(item) for item in node.items) + ")"
    parts = [(f"{key}={flat(value)}" if key else flat(value)) for key, value in node.args]
    return node.func + "(" + ", ".join(parts) + ")"


def render(node: Node, indent: int, prefix: str, suffix: str) -> list[str]:
    """Lines for `prefix + node + suffix` at `indent` levels."""
    pad = INDENT * indent
    one_line = pad + prefix + flat(node) + suffix
    if len(one_line) <= LINE_LENGTH or isinstance(node, Raw):
        return [one_line]
    if isinstance(node, Tup):
        opener = "("
        children: list[tuple[str, Node]] = [("", item) for item in node.items]
    else:
        opener = node.func + "("
        children = [((f"{key}=" if key else ""), value) for key, value in node.args]
    lines = [pad + prefix + opener]
    for child_prefix, child in children:
        lines.extend(render(child, indent + 1, child_prefix, ","))
    lines.append(pad + ")" + suffix)
    return lines


# ---------------------------------------------------------------------------------------------


def const_name(*parts: str) -> str:
    words = []
    for part in parts:
        text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", part)
        text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text)
        words.append(text.upper())
    return "__".join(words)


class Generator:
    def __init__(self) -> None:
        self.struct_consts: list[tuple[str, Node]] = []

    def field_node(self, raw: dict[str, Any], structs: Structs, where: str) -> Node:
        unknown = set(raw) - FIELD_KEYS
        if unknown:
            raise SchemaError(f"{where}: unknown field keys {sorted(unknown)}")
        for required in ("name", "type", "versions"):
            if required not in raw:
                raise SchemaError(f"{where}: field without {required!r}")
        name = raw["name"]
        ftype = raw["type"]
        element = _element(ftype)
        args: list[tuple[str | None, Node]] = [
            (None, Raw(py_str(name))),
            (None, Raw(py_str(ftype))),
            (None, Raw(py_str(str(raw["versions"])))),
        ]
        if "nullableVersions" in raw:
            args.append(("nullable_versions", Raw(py_str(str(raw["nullableVersions"])))))
        if "taggedVersions" in raw:
            args.append(("tagged_versions", Raw(py_str(str(raw["taggedVersions"])))))
        if "tag" in raw:
            args.append(("tag", Raw(str(int(raw["tag"])))))
        if "default" in raw:
            default = raw["default"]
            if isinstance(default, bool):
                default = "true" if default else "false"
            args.append(("default", Raw(py_str(str(default)))))
        if raw.get("ignorable"):
            args.append(("ignorable", Raw("True")))
        if "flexibleVersions" in raw:
            args.append(("flexible_versions", Raw(py_str(str(raw["flexibleVersions"])))))
        if "entityType" in raw:
            args.append(("entity_type", Raw(py_str(raw["entityType"]))))
        if raw.get("mapKey"):
            args.append(("map_key", Raw("True")))
        if raw.get("zeroCopy"):
            args.append(("zero_copy", Raw("True")))
        if raw.get("about"):
            args.append(("about", Raw(py_str(" ".join(str(raw["about"]).split())))))
        if element in PRIMITIVES:
            if "fields" in raw:
                raise SchemaError(f"{where}.{name}: primitive type {ftype!r} with nested fields")
        elif "fields" in raw:
            args.append(("fields", self.fields_node(raw["fields"], structs, f"{where}.{name}")))
        elif element not in structs:
            raise SchemaError(f"{where}.{name}: struct type {element!r} is not defined")
        else:
            target = structs[element]
            if isinstance(target, str):
                args.append(("fields", Raw(target)))
            else:
                # A reference to a struct defined inline elsewhere in the message.
                args.append(("fields", self.fields_node(target, structs, f"{where}.{name}")))
        return Call("F", tuple(args))

    def fields_node(self, raw_fields: list[dict[str, Any]], structs: Structs, where: str) -> Tup:
        seen: set[str] = set()
        nodes = []
        for raw in raw_fields:
            if raw.get("name") in seen:
                raise SchemaError(f"{where}: duplicate field {raw.get('name')!r}")
            seen.add(raw.get("name", ""))
            nodes.append(self.field_node(raw, structs, where))
        return Tup(tuple(nodes))

    def message(self, data: dict[str, Any], filename: str) -> tuple[str, str, Node]:
        unknown = set(data) - MESSAGE_KEYS
        if unknown:
            raise SchemaError(f"{filename}: unknown message keys {sorted(unknown)}")
        for required in ("name", "type", "validVersions"):
            if required not in data:
                raise SchemaError(f"{filename}: no {required!r}")
        name = data["name"]
        mtype = data["type"]
        if mtype not in ("request", "response", "header"):
            raise SchemaError(f"{filename}: unknown message type {mtype!r}")
        # Struct types: common structs become module constants; structs defined inline may
        # also be referenced by name elsewhere in the same message.
        structs: Structs = {}
        common = data.get("commonStructs", [])
        scanned = list(data.get("fields", []))
        for struct in common:
            scanned.extend(struct.get("fields", []))
        for struct_name, struct_fields in _inline_structs(scanned).items():
            if struct_name in structs:
                raise SchemaError(f"{filename}: struct {struct_name!r} defined twice")
            structs[struct_name] = struct_fields
        for struct in common:
            extra = set(struct) - STRUCT_KEYS
            if extra:
                raise SchemaError(f"{filename}: unknown common struct keys {sorted(extra)}")
            if struct["name"] in structs:
                raise SchemaError(f"{filename}: struct {struct['name']!r} defined twice")
            structs[struct["name"]] = const_name(name, struct["name"])
        # Common structs may refer to each other: emit them in dependency order.
        pending = list(common)
        common_names = {struct["name"] for struct in common}
        emitted: set[str] = set()
        while pending:
            ready = [s for s in pending if _struct_refs(s["fields"]) & common_names <= emitted]
            if not ready:
                raise SchemaError(f"{filename}: cyclic common structs")
            for struct in ready:
                node = self.fields_node(struct["fields"], structs, struct["name"])
                self.struct_consts.append((const_name(name, struct["name"]), node))
                emitted.add(struct["name"])
                pending.remove(struct)
        args: list[tuple[str | None, Node]] = [
            ("name", Raw(py_str(name))),
            ("type", Raw(py_str(mtype))),
            ("api_key", Raw(str(int(data["apiKey"])) if "apiKey" in data else "None")),
            ("valid_versions", Raw(py_str(str(data["validVersions"])))),
            ("flexible_versions", Raw(py_str(str(data.get("flexibleVersions", "none"))))),
        ]
        if "deprecatedVersions" in data:
            args.append(("deprecated_versions", Raw(py_str(str(data["deprecatedVersions"])))))
        if data.get("latestVersionUnstable"):
            args.append(("latest_version_unstable", Raw("True")))
        if data.get("listeners"):
            args.append(("listeners", Tup(tuple(Raw(py_str(x)) for x in data["listeners"]))))
        if common:
            names = tuple(Raw(py_str(s["name"])) for s in common)
            args.append(("common_structs", Tup(names)))
        args.append(("fields", self.fields_node(data.get("fields", []), structs, name)))
        return name, const_name(name), Call("MessageSpec", tuple(args))


def _element(type_name: str) -> str:
    return type_name[2:] if type_name.startswith("[]") else type_name


def _inline_structs(fields: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for raw in fields:
        if "fields" in raw:
            element = _element(raw["type"])
            if element in found:
                raise SchemaError(f"struct {element!r} defined twice")
            found[element] = raw["fields"]
            for name, nested in _inline_structs(raw["fields"]).items():
                if name in found:
                    raise SchemaError(f"struct {name!r} defined twice")
                found[name] = nested
    return found


def _struct_refs(fields: list[dict[str, Any]]) -> set[str]:
    refs: set[str] = set()
    for raw in fields:
        element = _element(raw["type"])
        if element not in PRIMITIVES and "fields" not in raw:
            refs.add(element)
        refs |= _struct_refs(raw.get("fields", []))
    return refs


HEADER = '''\
# Generated by tools/gen_wire_schemas.py from {count} Kafka JSON message schemas. Do not edit.
# Regenerate from the project root with:
#     .venv/bin/python tools/gen_wire_schemas.py --source {source}
# ruff: noqa: E501
"""Kafka message schemas as data: one `MessageSpec` per request, response and header.

Version ranges and defaults keep the schema's own syntax; see `wire.schema_types`.
"""

from collections.abc import Mapping
from typing import Final

from wire.schema_types import FieldSpec as F
from wire.schema_types import MessageSpec
'''


def generate(source: Path, source_label: str) -> str:
    paths = sorted(source.glob("*.json"))
    if not paths:
        raise SchemaError(f"no *.json schemas in {source}")
    gen = Generator()
    messages: list[tuple[str, str, Node]] = []
    seen: set[str] = set()
    for path in paths:
        name, const, node = gen.message(load_schema(path), path.name)
        if name in seen:
            raise SchemaError(f"{path.name}: message {name!r} defined twice")
        seen.add(name)
        messages.append((name, const, node))
    lines = [HEADER.format(count=len(paths), source=source_label).rstrip("\n")]
    for const, node in gen.struct_consts:
        lines.append("")
        lines.extend(render(node, 0, f"{const}: Final[tuple[F, ...]] = ", ""))
    for _name, const, node in messages:
        lines.append("")
        lines.extend(render(node, 0, f"{const}: Final = ", ""))
    lines.append("")
    lines.append("MESSAGES: Final[Mapping[str, MessageSpec]] = {")
    for name, const, _node in messages:
        lines.append(f"{INDENT}{py_str(name)}: {const},")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--source",
        default=DEFAULT_SOURCE,
        help=f"directory of Kafka *.json schemas, relative to the project root ({DEFAULT_SOURCE})",
    )
    parser.add_argument(
        "--output",
        default=DEFAULT_OUTPUT,
        help=f"module to write, relative to the project root ({DEFAULT_OUTPUT}); - for stdout",
    )
    args = parser.parse_args(argv)
    source = (PROJECT_ROOT / args.source).resolve()
    if not source.is_dir():
        print(f"gen_wire_schemas: no schema directory at {source}", file=sys.stderr)
        return 2
    try:
        text = generate(source, args.source)
    except SchemaError as exc:
        print(f"gen_wire_schemas: {exc}", file=sys.stderr)
        return 1
    if args.output == "-":
        sys.stdout.write(text)
    else:
        output = PROJECT_ROOT / args.output
        output.write_text(text, encoding="utf-8")
        print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
