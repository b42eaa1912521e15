"""Compiled encoders and decoders for Kafka message bodies.

`get_codec(message_name, version)` turns one schema version into Python source specialised
for it (one encode and one decode function per struct, consecutive fixed-width fields packed
by a single precompiled `struct.Struct`, arrays of integers packed in one call), compiles it
with `exec` and caches the result. Nothing looks at the schema at run time, so a 100,000
partition UpdateMetadataRequest costs a few Python operations per partition.

Values
  * A message or struct is a dict keyed by snake_case field names (rule in
    `wire.schema_types`); an array is a list (any sized iterable on encode).
  * Integers are ints, float64 a float, bool a bool, string a str, bytes `bytes`
    (any bytes-like on encode).
  * uuid: decoded as `uuid.UUID`; encode takes a `uuid.UUID` or 16 bytes. The default is
    the all-zero UUID (`ZERO_UUID`).
  * records: opaque. Decode returns a zero-copy `memoryview` slice of the input (an empty
    one: one shared empty view, see `_EMPTY_RECORDS`); encode takes any bytes-like. The
    default is None (null), as in Kafka.
  * Null is None, where the version allows it.

Encoding: a missing key takes the field's default (the schema default, else the type's
zero value). A field the version does not carry is left out, but a non-default value in a
non-ignorable one raises EncodeError, as Kafka's generated code does, because the receiver
would silently lose it. Tagged fields are written only when they differ from their default.
A key that is no field of the struct in any version raises EncodeError (a misspelt key
would otherwise go out as the default). Errors name the field, e.g.
"LeaderAndIsrRequest v5: topic_states[0].partition_states[3].isr: ...".

Decoding: every field of the struct appears in the result; fields absent from the version
get their defaults, so callers see one shape across versions. Unknown tagged fields are
skipped; their raw bytes are kept under the `_unknown_tagged_fields` key ({tag: bytes}, only
present when there are some) and written back out if the dict is encoded again. A string
that is not UTF-8 is read with U+FFFD for its bad bytes, as Kafka's Readable.readString
(Java's String) reads it, not refused. A nullable field whose length or count is negative
is null, whatever the negative, as Kafka's generated readers read it (a compact one above
2**31 is negative in Kafka's int); a field that is not nullable refuses them. Truncated or
malformed input raises DecodeError.
"""

from __future__ import annotations

import copy
import functools
import gc
import math
import struct
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from wire.errors import DecodeError, EncodeError, UnsupportedVersionError
from wire.schema_types import FieldSpec, MessageSpec, parse_versions
from wire.schemas import MESSAGES

__all__ = [
    "UNKNOWN_TAGGED_FIELDS",
    "ZERO_UUID",
    "Body",
    "Codec",
    "compile_codec",
    "decode",
    "encode",
    "get_codec",
]

Body = dict[str, Any]
ZERO_UUID = uuid.UUID(int=0)
UNKNOWN_TAGGED_FIELDS = "_unknown_tagged_fields"
# What an empty records field decodes to, for every one: a slice of the input costs two
# objects (a view, 184 bytes, and the buffer it manages, 128), and a follower's Fetch
# response holds one per partition (10,000s, nearly all empty on an idle cluster). Of a
# bytearray, so writable as a slice of a request frame is; holding nothing, it can change
# nowhere.
_EMPTY_RECORDS = memoryview(bytearray())

# Fixed-width types: struct format code and size.
_FIXED: dict[str, tuple[str, int]] = {
    "bool": ("?", 1),
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "uint32": ("I", 4),
    "int64": ("q", 8),
    "float64": ("d", 8),
    "uuid": ("16s", 16),
}
_INT_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
_MAX_STRING = 0x7FFF  # Kafka refuses longer strings, compact or not.
_SMALL = 64  # arrays shorter than this use a precompiled Struct per length

# Exceptions that bad input values raise inside generated encoders.
_ENCODE_FAILURES = (struct.error, TypeError, ValueError, AttributeError, OverflowError)


# ---------------------------------------------------------------------------------------------
# Run-time helpers referenced by generated code.


def _uvarint(value: int) -> bytes:
    if value < 0 or value > 0xFFFFFFFF:
        raise EncodeError(f"{value} does not fit an unsigned varint")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# _UV1[n] is the unsigned varint n + 1 (a compact length or count) for n < 127.
_UV1: tuple[bytes, ...] = tuple(bytes([n + 1]) for n in range(127))


def _read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    byte = buf[pos]
    pos += 1
    if byte < 0x80:
        return byte, pos
    value = byte & 0x7F
    shift = 7
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if value > 0xFFFFFFFF:
                # A fifth byte above 0x0F: bits past 32, which Kafka's int overflows.
                raise DecodeError(f"unsigned varint beyond 32 bits ending at offset {pos}")
            return value, pos
        shift += 7
        if shift > 28:
            raise DecodeError(f"unsigned varint longer than 5 bytes ending at offset {pos}")


def _uuid_bytes(value: Any) -> bytes:
    if isinstance(value, uuid.UUID):
        return value.bytes
    data = bytes(value)
    if len(data) != 16:
        raise EncodeError(f"a uuid needs 16 bytes, got {len(data)}")
    return data


_ZERO16 = bytes(16)


def _to_uuid(data: bytes) -> uuid.UUID:
    return ZERO_UUID if data == _ZERO16 else uuid.UUID(bytes=data)


@functools.cache
def _array_packer(code: str, count: int, prefix: str) -> Callable[..., bytes]:
    return struct.Struct(f">{prefix}{count}{code}").pack


@functools.cache
def _array_unpacker(code: str, count: int) -> Callable[[bytes, int], tuple[Any, ...]]:
    return struct.Struct(f">{count}{code}").unpack_from


def _pack_array(code: str, values: Any, compact: bool) -> bytes:
    """Slow path for long arrays of fixed-width values, with their count prefix."""
    count = len(values)
    head = _uvarint(count + 1) if compact else struct.pack(">i", count)
    if count < 4096:
        return head + _array_packer(code, count, "")(*values)
    return head + struct.pack(f">{count}{code}", *values)


def _unpack_array(code: str, buf: bytes, pos: int, count: int) -> tuple[Any, ...]:
    if count < 4096:
        return _array_unpacker(code, count)(buf, pos)
    return struct.unpack_from(f">{count}{code}", buf, pos)


def _write_tagged(out: bytearray, known: list[tuple[int, bytes]], unknown: Any) -> None:
    items = list(known)
    if unknown:
        if not isinstance(unknown, Mapping):
            raise EncodeError(
                f"must be a mapping of tag to bytes, got {type(unknown).__name__}",
                (UNKNOWN_TAGGED_FIELDS,),
            )
        taken = {tag for tag, _ in items}
        for tag, data in unknown.items():
            if tag in taken:
                raise EncodeError(f"tag {tag} is also a known field", (UNKNOWN_TAGGED_FIELDS,))
            items.append((int(tag), bytes(data)))
        items.sort(key=lambda item: item[0])
    out += _uvarint(len(items))
    for tag, data in items:
        out += _uvarint(tag)
        out += _uvarint(len(data))
        out += data


def _skip_tagged(buf: bytes, pos: int, count: int, body: Body) -> int:
    """Read a tagged-field section that holds no field known to this version."""
    unknown: dict[int, bytes] = {}
    for _ in range(count):
        tag, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        end = pos + size
        if end > len(buf):
            raise _truncated("tagged field", size, pos, buf)
        unknown[tag] = buf[pos:end]
        pos = end
    body[UNKNOWN_TAGGED_FIELDS] = unknown
    return pos


def _truncated(what: str, size: int, pos: int, buf: bytes) -> DecodeError:
    return DecodeError(
        f"truncated input: {what} of {size} bytes at offset {pos} runs past the end "
        f"of the input ({len(buf)} bytes)"
    )


def _too_many(what: str, count: int, pos: int, buf: bytes) -> DecodeError:
    return DecodeError(
        f"truncated or malformed input: {what} claims {count} elements at offset {pos}, "
        f"more than the {len(buf) - pos} bytes left"
    )


def _bad_length(what: str, length: int, pos: int) -> DecodeError:
    return DecodeError(f"malformed input: {what} has length {length} at offset {pos}")


def _null_not_allowed(key: str) -> DecodeError:
    return DecodeError(f"malformed input: non-nullable field {key!r} is null")


def _tag_size_mismatch(key: str, size: int, used: int) -> DecodeError:
    return DecodeError(f"malformed input: tagged field {key!r} declares {size} bytes, uses {used}")


def _field_failure(key: str, exc: Exception) -> EncodeError:
    if isinstance(exc, EncodeError):
        return exc.within(key)
    return EncodeError(_describe(exc), (key,))


def _element_failure(values: Any, item: Any, exc: Exception) -> EncodeError:
    # Only runs once encoding has failed, so the linear search costs nothing on success.
    index = next((i for i, value in enumerate(values) if value is item), None)
    path = (f"[{index}]",) if index is not None else ()
    if isinstance(exc, EncodeError):
        return exc.within(*path)
    if not isinstance(item, Mapping):
        return EncodeError(f"a struct must be a dict, got {type(item).__name__}", path)
    return EncodeError(_describe(exc), path)


def _unknown_keys(body: Any, known: frozenset[str]) -> EncodeError:
    if not isinstance(body, Mapping):
        return EncodeError(f"a struct must be a dict, got {type(body).__name__}")
    unknown = sorted(str(key) for key in body if key not in known)
    return EncodeError(
        f"unknown field(s) {', '.join(unknown)}; this struct has {', '.join(sorted(known))}"
    )


def _run_failure(body: Any, fields: tuple[tuple[str, str, Any], ...], exc: Exception) -> None:
    """Find which field of a packed run of fixed-width fields was bad, and say so."""
    if not isinstance(body, Mapping):
        raise EncodeError(f"a struct must be a dict, got {type(body).__name__}")
    for key, code, default in fields:
        value = body.get(key, default)
        try:
            if code == "16s":
                _uuid_bytes(value)
            else:
                struct.pack(">" + code, value)
        except EncodeError as inner:
            raise inner.within(key) from None
        except _ENCODE_FAILURES as inner:
            raise EncodeError(f"{_describe(inner)} (got {_short(value)})", (key,)) from None
    raise EncodeError(_describe(exc))


def _null_failure() -> EncodeError:
    return EncodeError("null is not allowed in this version")


def _too_long(size: int) -> EncodeError:
    return EncodeError(f"string of {size} bytes is longer than the {_MAX_STRING} Kafka allows")


def _not_carried(key: str, value: Any, default: Any) -> EncodeError:
    return EncodeError(
        f"not in this version and not ignorable, so its value {_short(value)} may not "
        f"differ from the default {_short(default)}",
        (key,),
    )


def _is_default(value: Any, default: Any) -> bool:
    """Whether a value in a field absent from the version may be dropped silently."""
    if value is None:
        return True
    if isinstance(default, dict):
        return isinstance(value, Mapping) and all(
            _is_default(value[key], default.get(key)) for key in value if key in default
        )
    if isinstance(default, list) or default is None:
        try:
            return len(value) == 0
        except TypeError:
            return False
    if isinstance(default, uuid.UUID) and not isinstance(value, uuid.UUID):
        return bytes(value) == default.bytes
    return bool(value == default)


def _equals_default(value: Any, default: Any) -> bool:
    """Whether a tagged struct value equals its default, keys it leaves out counting as
    default (so a partial dict round-trips to the same bytes)."""
    if not isinstance(value, Mapping):
        return False
    for key, item in value.items():
        if key in default:
            expected = default[key]
            if isinstance(expected, dict):
                if not _equals_default(item, expected):
                    return False
            elif isinstance(expected, list):
                if item is None or len(item):
                    return False
            elif item != expected:
                return False
        elif key == UNKNOWN_TAGGED_FIELDS and item:
            return False
    return True


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return text if text else type(exc).__name__


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_RUNTIME: dict[str, Any] = {
    "_EXC": _ENCODE_FAILURES,
    "_uv": _uvarint,
    "_UV1": _UV1,
    "_ruv": _read_uvarint,
    "_ub": _uuid_bytes,
    "_to_uuid": _to_uuid,
    "_pack_array": _pack_array,
    "_unpack_array": _unpack_array,
    "_write_tagged": _write_tagged,
    "_skip_tagged": _skip_tagged,
    "_truncated": _truncated,
    "_too_many": _too_many,
    "_bad_length": _bad_length,
    "_null_not_allowed": _null_not_allowed,
    "_tag_size_mismatch": _tag_size_mismatch,
    "_field_failure": _field_failure,
    "_element_failure": _element_failure,
    "_unknown_keys": _unknown_keys,
    "_run_failure": _run_failure,
    "_null_failure": _null_failure,
    "_too_long": _too_long,
    "_not_carried": _not_carried,
    "_is_default": _is_default,
    "_equals_default": _equals_default,
    "_ZERO_UUID": ZERO_UUID,
    "_memoryview": memoryview,
    "_EMPTY_RECORDS": _EMPTY_RECORDS,
    "_I16": struct.Struct(">h").pack,
    "_I32": struct.Struct(">i").pack,
    "_U16": struct.Struct(">h").unpack_from,
    "_U32": struct.Struct(">i").unpack_from,
    "_NULL2": b"\xff\xff",
    "_NULL4": b"\xff\xff\xff\xff",
}
for _code in "bhHiIqd":
    # Count-prefixed arrays of small sizes: "_AC_i"[n] packs the compact count byte (n + 1)
    # and n int32s, "_AK_i"[n] the classic int32 count and n int32s; "_AU_i"[n] unpacks n.
    _RUNTIME[f"_AC_{_code}"] = tuple(_array_packer(_code, n, "B") for n in range(_SMALL))
    _RUNTIME[f"_AK_{_code}"] = tuple(_array_packer(_code, n, "i") for n in range(_SMALL))
    _RUNTIME[f"_AU_{_code}"] = tuple(_array_unpacker(_code, n) for n in range(_SMALL))


# ---------------------------------------------------------------------------------------------
# Compilation.


class SchemaCompileError(Exception):
    """The schema uses something this codec cannot express (a bug in the schema or here)."""


def _parse_int(text: str) -> int:
    body = text.strip()
    sign = -1 if body.startswith("-") else 1
    body = body.lstrip("+-")
    if body.lower().startswith("0x"):
        return sign * int(body[2:], 16)
    if len(body) > 1 and body.startswith("0"):
        return sign * int(body, 8)  # Java-style octal, as the schema language allows
    return sign * int(body)


def _default_of(spec: FieldSpec) -> Any:
    """The Python default of a field, used for every version of it."""
    raw = spec.default
    if spec.is_array:
        if raw in (None, ""):
            return []
        if raw == "null":
            return None
        raise SchemaCompileError(f"field {spec.name}: array default {raw!r} is not allowed")
    if spec.is_struct:
        if raw == "null":
            return None
        if raw not in (None, ""):
            raise SchemaCompileError(f"field {spec.name}: struct default {raw!r} is not allowed")
        return {field.key: _default_of(field) for field in spec.fields}
    kind = spec.type
    if kind in _INT_RANGES:
        value = 0 if raw is None else _parse_int(raw)
        lo, hi = _INT_RANGES[kind]
        if not lo <= value <= hi:
            raise SchemaCompileError(f"field {spec.name}: default {raw} out of range for {kind}")
        return value
    if kind == "bool":
        if raw in (None, "false"):
            return False
        if raw == "true":
            return True
        raise SchemaCompileError(f"field {spec.name}: bad bool default {raw!r}")
    if kind == "float64":
        return 0.0 if raw is None else float(raw)
    if kind == "string":
        if raw == "null":
            return None
        return "" if raw is None else raw
    if kind == "bytes":
        if raw == "null":
            return None
        if raw not in (None, ""):
            raise SchemaCompileError(f"field {spec.name}: bytes default {raw!r} is not allowed")
        return b""
    if kind == "records":
        return None
    if kind == "uuid":
        return ZERO_UUID if raw in (None, "") else uuid.UUID(raw)
    raise SchemaCompileError(f"field {spec.name}: unknown type {kind!r}")


class _Field:
    """A field as one version sees it."""

    __slots__ = (
        "compact",
        "default",
        "element",
        "fixed",
        "key",
        "kind",
        "nullable",
        "present",
        "spec",
        "tagged",
    )

    def __init__(self, spec: FieldSpec, version: int, flexible: bool) -> None:
        self.spec = spec
        self.key = spec.key
        self.present = spec.present_in(version)
        self.tagged = self.present and spec.tagged_in(version)
        self.nullable = spec.nullable_in(version)
        own_flex = spec.flexible_versions
        self.compact = flexible and (own_flex is None or version in parse_versions(own_flex))
        self.default = _default_of(spec)
        if spec.is_array:
            self.kind = "array"
            self.element = "struct" if spec.is_struct else spec.element_type
        else:
            self.kind = "struct" if spec.is_struct else spec.type
            self.element = ""
        self.fixed = self.kind in _FIXED
        if self.present and self.nullable and self.kind in _FIXED:
            raise SchemaCompileError(f"field {spec.name}: nullable {self.kind} is not supported")

    def element_field(self) -> _Field:
        """A primitive array's elements, as a field (never null: Kafka has no null elements)."""
        item = copy.copy(self)
        item.kind, item.element = self.element, ""
        item.fixed, item.nullable, item.tagged = self.element in _FIXED, False, False
        return item


def _literal(value: Any) -> str:
    """Source for an immutable default value."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    return repr(value)


class _Compiler:
    def __init__(self, spec: MessageSpec, version: int) -> None:
        self.spec = spec
        self.version = version
        self.flexible = spec.flexible_in(version)
        self.label = f"{spec.name} v{version}"
        self.ns: dict[str, Any] = dict(_RUNTIME)
        self.chunks: list[str] = []
        self.counter = 0
        self.encoders: dict[int, str] = {}
        self.decoders: dict[int, str] = {}
        self.factories: dict[int, str] = {}
        self.consts: dict[tuple[str, Any], str] = {}
        self.min_sizes: dict[int, int] = {}

    # -- names and constants ------------------------------------------------------------------

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}{self.counter}"

    def const(self, kind: str, key: Any, value: Any) -> str:
        """A module-level constant for the generated code, shared by equal keys."""
        ident = (kind, key)
        if ident not in self.consts:
            name = self.fresh(f"_{kind}")
            self.ns[name] = value
            self.consts[ident] = name
        return self.consts[ident]

    def packer(self, codes: str) -> str:
        return self.const("S", codes, struct.Struct(">" + codes))

    def encode_default(self, fld: _Field) -> str:
        """Source for the value a missing key takes on encode (never mutated there)."""
        value = fld.default
        if isinstance(value, list):
            return "()"
        if isinstance(value, dict):
            return self.const("D", id(fld.spec), value)
        if isinstance(value, uuid.UUID):
            return "_ZERO_UUID" if value == ZERO_UUID else self.const("U", value, value)
        return _literal(value)

    def decode_default(self, fld: _Field) -> str:
        """Source for a fresh default value in a decoded dict."""
        value = fld.default
        if isinstance(value, list):
            return "[]"
        if isinstance(value, dict):
            return self.factory(fld.spec.fields) + "()"
        if isinstance(value, uuid.UUID):
            return "_ZERO_UUID" if value == ZERO_UUID else self.const("U", value, value)
        return _literal(value)

    def fields_of(self, specs: tuple[FieldSpec, ...], where: str) -> list[_Field]:
        fields = [_Field(spec, self.version, self.flexible) for spec in specs]
        keys = [fld.key for fld in fields]
        if len(set(keys)) != len(keys):
            raise SchemaCompileError(f"{where}: two fields share a snake_case key: {keys}")
        tags = [fld.spec.tag for fld in fields if fld.tagged]
        if len(set(tags)) != len(tags):
            raise SchemaCompileError(f"{where}: duplicate tags {tags}")
        return fields

    def min_size(self, specs: tuple[FieldSpec, ...]) -> int:
        """Fewest bytes a struct can take in this version (bounds claimed array counts)."""
        ident = id(specs)
        if ident not in self.min_sizes:
            size = 1 if self.flexible else 0
            for fld in self.fields_of(specs, "struct"):
                if not fld.present or fld.tagged:
                    continue
                if fld.fixed:
                    size += _FIXED[fld.kind][1]
                elif fld.kind == "struct":
                    size += 1 if fld.nullable else self.min_size(fld.spec.fields)
                elif fld.kind == "string":
                    size += 1 if fld.compact else 2
                else:
                    size += 1 if fld.compact else 4
            self.min_sizes[ident] = size
        return self.min_sizes[ident]

    # -- default factories ---------------------------------------------------------------------

    def factory(self, specs: tuple[FieldSpec, ...]) -> str:
        ident = id(specs)
        if ident in self.factories:
            return self.factories[ident]
        name = self.fresh("_new")
        self.factories[ident] = name
        fields = [_Field(spec, self.version, self.flexible) for spec in specs]
        items = ", ".join(f"{fld.key!r}: {self.decode_default(fld)}" for fld in fields)
        self.chunks.append(f"def {name}():\n    return {{{items}}}\n")
        return name

    # -- encoders ------------------------------------------------------------------------------

    def encoder(self, specs: tuple[FieldSpec, ...], where: str) -> str:
        ident = id(specs)
        if ident in self.encoders:
            return self.encoders[ident]
        name = self.fresh("_enc")
        self.encoders[ident] = name
        fields = self.fields_of(specs, where)
        known = frozenset([fld.key for fld in fields] + [UNKNOWN_TAGGED_FIELDS])
        # Unknown keys are refused: a misspelt field would otherwise go out as its default.
        lines = [
            f"def {name}(d, out):",
            f"    # {where}",
            f"    if not {self.const('K', known, known)}.issuperset(d):",
            f"        raise _unknown_keys(d, {self.const('K', known, known)})",
            "    g = d.get",
        ]
        run: list[_Field] = []
        for fld in fields:
            if not fld.present or fld.tagged:
                continue
            if fld.fixed:
                run.append(fld)
                continue
            lines += self.encode_run(run)
            run = []
            lines += ["    try:", f"        v = g({fld.key!r}, {self.encode_default(fld)})"]
            lines += self.encode_value(fld, "v", "out", 2, where)
            lines += [
                "    except _EXC as exc:",
                f"        raise _field_failure({fld.key!r}, exc) from None",
            ]
        lines += self.encode_run(run)
        for fld in fields:
            if not fld.present and not fld.spec.ignorable:
                lines += self.encode_absent_check(fld)
        if self.flexible:
            lines += self.encode_tagged([f for f in fields if f.tagged], where)
        self.chunks.append("\n".join(lines) + "\n")
        return name

    def encode_run(self, run: list[_Field]) -> list[str]:
        if not run:
            return []
        codes = "".join(_FIXED[fld.kind][0] for fld in run)
        values = []
        for fld in run:
            value = f"g({fld.key!r}, {self.encode_default(fld)})"
            values.append(f"_ub({value})" if fld.kind == "uuid" else value)
        described = tuple((fld.key, _FIXED[fld.kind][0], fld.default) for fld in run)
        run_name = self.const("R", described, described)
        return [
            "    try:",
            f"        out += {self.packer(codes)}.pack({', '.join(values)})",
            "    except _EXC as exc:",
            f"        _run_failure(d, {run_name}, exc)",
        ]

    def encode_absent_check(self, fld: _Field) -> list[str]:
        self.ns["_MISSING"] = _MISSING
        if fld.fixed and fld.kind != "uuid":
            default = _literal(fld.default)
            differs = f"v != {default}"
        else:
            default = self.const("A", id(fld.spec), fld.default)
            differs = f"not _is_default(v, {default})"
        return [
            f"    v = g({fld.key!r}, _MISSING)",
            f"    if v is not _MISSING and {differs}:",
            f"        raise _not_carried({fld.key!r}, v, {default})",
        ]

    def encode_tagged(self, tagged: list[_Field], where: str) -> list[str]:
        lines = [f"    u = g({UNKNOWN_TAGGED_FIELDS!r})"]
        if not tagged:
            return [
                *lines,
                "    if u:",
                "        _write_tagged(out, [], u)",
                "    else:",
                "        out += b'\\x00'",
            ]
        lines.append("    tags = []")
        for fld in sorted(tagged, key=lambda f: f.spec.tag or 0):
            default = self.encode_default(fld)
            lines.append(f"    v = g({fld.key!r}, {default})")
            if isinstance(fld.default, list):
                lines.append("    if v is not None and len(v):")
            elif isinstance(fld.default, dict):
                lines.append(f"    if not _equals_default(v, {default}):")
            elif fld.default is None:
                lines.append("    if v is not None:")
            else:
                lines.append(f"    if v != {default}:")
            lines += [
                "        try:",
                "            t = bytearray()",
                *self.encode_value(fld, "v", "t", 3, where),
                "        except _EXC as exc:",
                f"            raise _field_failure({fld.key!r}, exc) from None",
                f"        tags.append(({fld.spec.tag}, t))",
            ]
        lines += [
            "    if tags or u:",
            "        _write_tagged(out, tags, u)",
            "    else:",
            "        out += b'\\x00'",
        ]
        return lines

    def encode_value(self, fld: _Field, v: str, out: str, depth: int, where: str) -> list[str]:
        """Statements writing value `v` of field `fld` to bytearray `out`."""
        pad = "    " * depth
        kind = fld.kind
        if fld.fixed:
            if kind == "uuid":
                return [f"{pad}{out} += _ub({v})"]
            return [f"{pad}{out} += {self.packer(_FIXED[kind][0])}.pack({v})"]
        if kind == "struct":
            enc = self.encoder(fld.spec.fields, f"{where}.{fld.key}")
            if fld.nullable:
                return [
                    f"{pad}if {v} is None:",
                    f"{pad}    {out} += b'\\xff'",
                    f"{pad}else:",
                    f"{pad}    {out} += b'\\x01'",
                    f"{pad}    {enc}({v}, {out})",
                ]
            return [
                f"{pad}if {v} is None:",
                f"{pad}    raise _null_failure()",
                f"{pad}{enc}({v}, {out})",
            ]
        lines = [f"{pad}if {v} is None:"]
        if fld.nullable:
            null = "b'\\x00'" if fld.compact else ("_NULL2" if kind == "string" else "_NULL4")
            lines.append(f"{pad}    {out} += {null}")
        else:
            lines.append(f"{pad}    raise _null_failure()")
        lines.append(f"{pad}else:")
        lines += self.encode_nonnull(fld, v, out, depth + 1, where)
        return lines

    def encode_length(self, n: str, compact: bool, pad: str, out: str, big: str) -> list[str]:
        if compact:
            return [f"{pad}{out} += _UV1[{n}] if {n} < 127 else _uv({n} + 1)"]
        return [f"{pad}{out} += {big}({n})"]

    def encode_nonnull(self, fld: _Field, v: str, out: str, depth: int, where: str) -> list[str]:
        pad = "    " * depth
        kind = fld.kind
        if kind == "string":
            b, n = self.fresh("b"), self.fresh("n")
            return [
                f"{pad}{b} = {v}.encode()",
                f"{pad}{n} = len({b})",
                f"{pad}if {n} > {_MAX_STRING}:",
                f"{pad}    raise _too_long({n})",
                *self.encode_length(n, fld.compact, pad, out, "_I16"),
                f"{pad}{out} += {b}",
            ]
        if kind in ("bytes", "records"):
            n = self.fresh("n")
            return [
                f"{pad}{n} = {v}.nbytes if type({v}) is _memoryview else len({v})",
                *self.encode_length(n, fld.compact, pad, out, "_I32"),
                f"{pad}{out} += {v}",
            ]
        if kind != "array":
            raise SchemaCompileError(f"{where}.{fld.key}: unknown kind {kind}")
        n = self.fresh("n")
        lines = [f"{pad}{n} = len({v})"]
        element = fld.element
        if element in _FIXED and element not in ("uuid", "bool"):
            code = _FIXED[element][0]
            table = f"_AC_{code}" if fld.compact else f"_AK_{code}"
            count = f"{n} + 1" if fld.compact else n
            return [
                *lines,
                f"{pad}if {n} < {_SMALL}:",
                f"{pad}    {out} += {table}[{n}]({count}, *{v})",
                f"{pad}else:",
                f"{pad}    {out} += _pack_array({code!r}, {v}, {fld.compact})",
            ]
        lines += self.encode_length(n, fld.compact, pad, out, "_I32")
        e = self.fresh("e")
        if element == "struct":
            enc = self.encoder(fld.spec.fields, f"{where}.{fld.key}[]")
            return [
                *lines,
                f"{pad}try:",
                f"{pad}    for {e} in {v}:",
                f"{pad}        {enc}({e}, {out})",
                f"{pad}except _EXC as exc:",
                f"{pad}    raise _element_failure({v}, {e}, exc) from None",
            ]
        lines.append(f"{pad}for {e} in {v}:")
        item = fld.element_field()
        if element in _FIXED:
            lines += self.encode_value(item, e, out, depth + 1, where)
        else:
            lines += self.encode_nonnull(item, e, out, depth + 1, where)
        return lines

    # -- decoders ------------------------------------------------------------------------------

    def decoder(self, specs: tuple[FieldSpec, ...], where: str) -> str:
        ident = id(specs)
        if ident in self.decoders:
            return self.decoders[ident]
        name = self.fresh("_dec")
        self.decoders[ident] = name
        fields = self.fields_of(specs, where)
        lines = [f"def {name}(buf, pos):", f"    # {where}"]
        values: dict[str, str] = {}
        run: list[_Field] = []
        for fld in fields:
            if not fld.present or fld.tagged:
                values[fld.key] = self.decode_default(fld)
                continue
            if fld.fixed:
                run.append(fld)
                values[fld.key] = self.fresh("f")
                continue
            lines += self.decode_run(run, values)
            run = []
            target = values[fld.key] = self.fresh("f")
            lines += self.decode_value(fld, target, 1, where)
        lines += self.decode_run(run, values)
        items = ", ".join(f"{key!r}: {value}" for key, value in values.items())
        lines.append(f"    d = {{{items}}}")
        if self.flexible:
            tagged = [fld for fld in fields if fld.tagged]
            reader = self.tagged_reader(tagged, where) if tagged else "_skip_tagged"
            lines += [
                "    n = buf[pos]",
                "    pos += 1",
                "    if n:",
                "        if n > 127:",
                "            n, pos = _ruv(buf, pos - 1)",
                f"        pos = {reader}(buf, pos, n, d)",
            ]
        lines.append("    return d, pos")
        self.chunks.append("\n".join(lines) + "\n")
        return name

    def decode_run(self, run: list[_Field], values: dict[str, str]) -> list[str]:
        if not run:
            return []
        codes = "".join(_FIXED[fld.kind][0] for fld in run)
        size = struct.calcsize(">" + codes)
        targets = [values[fld.key] for fld in run]
        lines = [
            f"    {', '.join(targets)}, = {self.packer(codes)}.unpack_from(buf, pos)",
            f"    pos += {size}",
        ]
        for fld, target in zip(run, targets, strict=True):
            if fld.kind == "uuid":
                lines.append(f"    {target} = _to_uuid({target})")
        return lines

    def decode_value(self, fld: _Field, t: str, depth: int, where: str) -> list[str]:
        """Statements reading field `fld` at `pos` into variable `t`, advancing `pos`."""
        pad = "    " * depth
        kind = fld.kind
        if fld.fixed:
            code, size = _FIXED[kind]
            lines = [
                f"{pad}{t} = {self.packer(code)}.unpack_from(buf, pos)[0]",
                f"{pad}pos += {size}",
            ]
            if kind == "uuid":
                lines.append(f"{pad}{t} = _to_uuid({t})")
            return lines
        if kind == "struct":
            dec = self.decoder(fld.spec.fields, f"{where}.{fld.key}")
            if not fld.nullable:
                return [f"{pad}{t}, pos = {dec}(buf, pos)"]
            return [
                f"{pad}if buf[pos] > 127:",
                f"{pad}    {t} = None",
                f"{pad}    pos += 1",
                f"{pad}else:",
                f"{pad}    {t}, pos = {dec}(buf, pos + 1)",
            ]
        n = self.fresh("n")
        what = f"field {fld.key!r}"
        if fld.compact:
            lines = [
                f"{pad}{n} = buf[pos]",
                f"{pad}pos += 1",
                f"{pad}if {n} > 127:",
                f"{pad}    {n}, pos = _ruv(buf, pos - 1)",
                # Kafka reads the varint into a Java int: above 2**31 it is negative, and so
                # is the length, a null (2**31 is the lowest int, which minus 1 wraps).
                f"{pad}    if {n} > 0x80000000:",
                f"{pad}        {n} = 0",
            ]
            if kind == "string":
                # Kafka's readers refuse a string longer than 0x7FFF ("string field ... had
                # invalid length"), as the encoder does; only a multi-byte length can say it.
                lines += [
                    f"{pad}    elif {n} > {_MAX_STRING + 1}:",
                    f"{pad}        raise _bad_length({what!r}, {n} - 1, pos)",
                ]
            lines.append(f"{pad}{n} -= 1")
        else:
            unpack = "_U16" if kind == "string" else "_U32"
            width = 2 if kind == "string" else 4
            lines = [f"{pad}{n} = {unpack}(buf, pos)[0]", f"{pad}pos += {width}"]
        lines.append(f"{pad}if {n} < 0:")
        if fld.nullable:
            # Any negative length is null, as Kafka's generated readers take it
            # (`if (length < 0)`), not -1 alone; the encoder writes -1.
            lines.append(f"{pad}    {t} = None")
        else:
            lines += [
                f"{pad}    if {n} != -1:",
                f"{pad}        raise _bad_length({what!r}, {n}, pos)",
                f"{pad}    raise _null_not_allowed({fld.key!r})",
            ]
        lines.append(f"{pad}else:")
        lines += self.decode_nonnull(fld, t, n, depth + 1, where)
        if fld.compact and kind == "array":
            # An empty array (its compact length byte is 1) read at once: most of a
            # partition state's arrays are (adding, removing and offline replicas), and a
            # 100,000-partition request has 100,000s of them.
            return [
                f"{pad}if buf[pos] == 1:",
                f"{pad}    {t} = []",
                f"{pad}    pos += 1",
                f"{pad}else:",
                *("    " + line for line in lines),
            ]
        return lines

    def decode_nonnull(self, fld: _Field, t: str, n: str, depth: int, where: str) -> list[str]:
        """Read a value whose length or count `n` (>= 0) has been read."""
        pad = "    " * depth
        kind = fld.kind
        what = f"field {fld.key!r}"
        if kind in ("string", "bytes", "records"):
            end = self.fresh("end")
            if kind == "string":
                # As Kafka's readString (Java's new String(bytes, UTF_8)): bytes that are
                # not UTF-8 become U+FFFD and the message is read; a name so read is then
                # refused for itself (a topic no topic can have), not the whole request.
                value = f'buf[pos:{end}].decode("utf-8", "replace")'
            elif kind == "bytes":
                value = f"buf[pos:{end}]"
            else:
                value = f"_memoryview(buf)[pos:{end}] if {n} else _EMPTY_RECORDS"
            return [
                f"{pad}{end} = pos + {n}",
                f"{pad}if {end} > len(buf):",
                f"{pad}    raise _truncated({what!r}, {n}, pos, buf)",
                f"{pad}{t} = {value}",
                f"{pad}pos = {end}",
            ]
        element = fld.element
        if element in _FIXED and element != "bool":
            code, size = _FIXED[element]
            end = self.fresh("end")
            lines = [
                f"{pad}{end} = pos + {n} * {size}",
                f"{pad}if {end} > len(buf):",
                f"{pad}    raise _truncated({what!r}, {n} * {size}, pos, buf)",
            ]
            if element == "uuid":
                lines.append(f"{pad}{t} = [_to_uuid(buf[p:p + 16]) for p in range(pos, {end}, 16)]")
            else:
                lines.append(
                    f"{pad}{t} = list(_AU_{code}[{n}](buf, pos) if {n} < {_SMALL} "
                    f"else _unpack_array({code!r}, buf, pos, {n}))"
                )
            lines.append(f"{pad}pos = {end}")
            return lines
        lines = []
        min_size = self.min_size(fld.spec.fields) if element == "struct" else 1
        if min_size:
            lines += [
                f"{pad}if {n} * {min_size} > len(buf) - pos:",
                f"{pad}    raise _too_many({what!r}, {n}, pos, buf)",
            ]
        ap = self.fresh("ap")
        e = self.fresh("e")
        lines += [f"{pad}{t} = []", f"{pad}{ap} = {t}.append", f"{pad}for _ in range({n}):"]
        if element == "struct":
            dec = self.decoder(fld.spec.fields, f"{where}.{fld.key}[]")
            lines += [f"{pad}    {e}, pos = {dec}(buf, pos)"]
        else:
            item = fld.element_field()
            lines += self.decode_value(item, e, depth + 1, where)
        lines.append(f"{pad}    {ap}({e})")
        return lines

    def tagged_reader(self, tagged: list[_Field], where: str) -> str:
        name = self.fresh("_tags")
        lines = [
            f"def {name}(buf, pos, count, d):",
            f"    # tagged fields of {where}",
            "    unknown = None",
            "    for _ in range(count):",
            "        tag, pos = _ruv(buf, pos)",
            "        size, pos = _ruv(buf, pos)",
            "        end = pos + size",
            "        if end > len(buf):",
            "            raise _truncated('tagged field', size, pos, buf)",
        ]
        keyword = "if"
        for fld in sorted(tagged, key=lambda f: f.spec.tag or 0):
            target = self.fresh("x")
            lines.append(f"        {keyword} tag == {fld.spec.tag}:")
            lines += self.decode_value(fld, target, 3, where)
            lines += [
                f"            d[{fld.key!r}] = {target}",
                "            if pos != end:",
                f"                raise _tag_size_mismatch({fld.key!r}, size, pos - end + size)",
            ]
            keyword = "elif"
        lines += [
            "        else:",
            "            if unknown is None:",
            f"                unknown = d[{UNKNOWN_TAGGED_FIELDS!r}] = {{}}",
            "            unknown[tag] = buf[pos:end]",
            "        pos = end",
            "    return pos",
        ]
        self.chunks.append("\n".join(lines) + "\n")
        return name

    # -- assembly ------------------------------------------------------------------------------

    def compile(self) -> Codec:
        root = self.spec.fields
        enc = self.encoder(root, self.spec.name)
        dec = self.decoder(root, self.spec.name)
        new = self.factory(root)
        source = f"# {self.label}\n\n" + "\n\n".join(self.chunks)
        code = compile(source, f"<wire codec {self.label}>", "exec")
        exec(code, self.ns)
        return Codec(
            self.spec,
            self.version,
            flexible=self.flexible,
            source=source,
            encode=self.ns[enc],
            decode=self.ns[dec],
            new=self.ns[new],
        )


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()

_GC_PAUSE_BYTES = 64 * 1024
_DECODE_FAILURES = (struct.error, IndexError, ValueError, TypeError, OverflowError, MemoryError)


class Codec:
    """Encoder and decoder for one message at one version."""

    __slots__ = ("_decode", "_encode", "_new", "flexible", "label", "source", "spec", "version")

    def __init__(
        self,
        spec: MessageSpec,
        version: int,
        *,
        flexible: bool,
        source: str,
        encode: Callable[[Mapping[str, Any], bytearray], None],
        decode: Callable[[bytes | bytearray, int], tuple[Body, int]],
        new: Callable[[], Body],
    ) -> None:
        self.spec = spec
        self.version = version
        self.flexible = flexible
        self.label = f"{spec.name} v{version}"
        self.source = source  # the generated Python, for debugging
        self._encode = encode
        self._decode = decode
        self._new = new

    def __repr__(self) -> str:
        return f"<Codec {self.label}>"

    def new(self) -> Body:
        """A body with every field at its default."""
        return self._new()

    def encode(self, body: Mapping[str, Any]) -> bytes:
        out = bytearray()
        self.encode_into(body, out)
        return bytes(out)

    def encode_into(self, body: Mapping[str, Any], out: bytearray) -> None:
        """Append the encoding to `out` (which holds partial output if this raises)."""
        try:
            self._encode(body, out)
        except EncodeError as exc:
            raise EncodeError(f"{self.label}: {exc}") from None
        except _ENCODE_FAILURES as exc:
            if not isinstance(body, Mapping):
                raise EncodeError(
                    f"{self.label}: the body must be a dict, got {type(body).__name__}"
                ) from None
            raise EncodeError(f"{self.label}: {_describe(exc)}") from None

    def decode(self, data: bytes | bytearray | memoryview) -> Body:
        """Decode a whole buffer; bytes left over are an error."""
        body, end = self.decode_from(data, 0)
        if end != len(data):
            raise DecodeError(
                f"{self.label}: {len(data) - end} unexpected bytes after the message "
                f"(it ends at offset {end} of {len(data)})"
            )
        return body

    def decode_from(
        self, data: bytes | bytearray | memoryview, offset: int = 0
    ) -> tuple[Body, int]:
        """Decode starting at `offset`; returns the body and the offset just past it."""
        # bytes and bytearray are decoded in place (a producer's records stay a writable
        # view of the frame); anything else is copied once.
        buf: bytes | bytearray = data if isinstance(data, (bytes, bytearray)) else bytes(data)
        if len(buf) - offset < _GC_PAUSE_BYTES or not gc.isenabled():
            return self._decode_checked(buf, offset)
        # A large message becomes hundreds of thousands of small dicts and lists, none of
        # them cyclic; letting the cyclic collector rescan them every few hundred
        # allocations more than doubles the decode time, so it waits until we are done.
        gc.disable()
        try:
            return self._decode_checked(buf, offset)
        finally:
            gc.enable()

    def _decode_checked(self, buf: bytes | bytearray, offset: int) -> tuple[Body, int]:
        try:
            return self._decode(buf, offset)
        except DecodeError as exc:
            raise DecodeError(f"{self.label}: {exc}") from None
        except IndexError:
            raise DecodeError(
                f"{self.label}: truncated input: ran past the end of {len(buf)} bytes"
            ) from None
        except struct.error as exc:
            raise DecodeError(f"{self.label}: truncated input: {exc}") from None
        except _DECODE_FAILURES as exc:
            raise DecodeError(f"{self.label}: malformed input: {_describe(exc)}") from None


def message_spec(name: str) -> MessageSpec:
    try:
        return MESSAGES[name]
    except KeyError:
        raise KeyError(f"no schema named {name!r}") from None


@functools.cache
def get_codec(message_name: str, version: int) -> Codec:
    """The compiled codec of a message (by schema name, e.g. "LeaderAndIsrRequest"), cached.
    KeyError for an unknown name, UnsupportedVersionError for a version it does not have."""
    return compile_codec(message_spec(message_name), version)


def compile_codec(spec: MessageSpec, version: int) -> Codec:
    """Compile a codec for any schema (uncached; `get_codec` caches the known ones)."""
    if version not in spec.versions:
        raise UnsupportedVersionError(
            f"{spec.name} has no version {version} (valid: {spec.valid_versions})"
        )
    return _Compiler(spec, version).compile()


def encode(message_name: str, version: int, body: Mapping[str, Any]) -> bytes:
    return get_codec(message_name, version).encode(body)


def decode(message_name: str, version: int, data: bytes | bytearray | memoryview) -> Body:
    return get_codec(message_name, version).decode(data)
