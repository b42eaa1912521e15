"""Message bodies drawn from the wire schemas, for the codec's round trips and for
requests of every API sent to a live broker.

``default_for`` restates the schema language's default rules independently of the codec.
``struct_strategy`` draws a body of a message (or struct) in one version: every field the
version has, arrays of up to three, nullable fields sometimes null; fields the version
lacks only where the codec must drop them (ignorable) or left at their defaults. Given
``names``, strings are often one of them and integers often small (0 to 3, -1, -2), so
that requests to a broker name its topics, groups and partitions and reach past the
lookups that random values stop at.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from wire.codec import ZERO_UUID
from wire.schema_types import FieldSpec

INT_BOUNDS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
SMALL_INTS = (0, 1, 2, 3, -1, -2)


def default_for(field: FieldSpec) -> Any:
    """The schema language's default rules, restated for the tests."""
    raw = field.default
    if field.is_array:
        return None if raw == "null" else []
    if field.is_struct:
        return None if raw == "null" else {f.key: default_for(f) for f in field.fields}
    kind = field.type
    if kind in INT_BOUNDS:
        return 0 if raw is None else int(raw, 0)
    if kind == "bool":
        return raw == "true"
    if kind == "float64":
        return float(raw or 0)
    if kind in ("string", "bytes"):
        empty: Any = "" if kind == "string" else b""
        return None if raw == "null" else (raw or empty)
    assert kind in ("records", "uuid"), kind
    return None if kind == "records" else ZERO_UUID


def primitive(kind: str, names: tuple[str, ...] = ()) -> st.SearchStrategy[Any]:
    if kind in INT_BOUNDS:
        lo, hi = INT_BOUNDS[kind]
        any_int = st.integers(lo, hi)
        if not names:
            return any_int
        return st.sampled_from([i for i in SMALL_INTS if lo <= i <= hi]) | any_int
    if kind == "string" and names:
        return st.sampled_from(names) | st.text(max_size=6)
    return {
        "bool": st.booleans(),
        "float64": st.floats(allow_nan=False),
        "string": st.text(max_size=6),
        "bytes": st.binary(max_size=6),
        "records": st.binary(max_size=12),
        "uuid": st.uuids() | st.just(ZERO_UUID),
    }[kind]


def value_strategy(
    field: FieldSpec, version: int, names: tuple[str, ...] = ()
) -> st.SearchStrategy[Any]:
    if field.is_struct:
        element: st.SearchStrategy[Any] = struct_strategy(field.fields, version, names)
    else:
        element = primitive(field.element_type, names)
    strategy = st.lists(element, max_size=3) if field.is_array else element
    if field.nullable_in(version):
        strategy = st.none() | strategy
    return strategy


def default_encodable(field: FieldSpec, version: int) -> bool:
    return default_for(field) is not None or field.nullable_in(version)


def struct_strategy(
    fields: tuple[FieldSpec, ...], version: int, names: tuple[str, ...] = ()
) -> st.SearchStrategy[Any]:
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for field in fields:
        if field.present_in(version):
            target = optional if default_encodable(field, version) else required
            target[field.key] = value_strategy(field, version, names)
        elif field.ignorable:
            # Dropped silently whatever its value.
            optional[field.key] = value_strategy(field, field_any_version(field), names)
        else:
            optional[field.key] = st.just(default_for(field))
    return st.fixed_dictionaries(required, optional=optional)


def field_any_version(field: FieldSpec) -> int:
    for version in range(0, 64):
        if field.present_in(version):
            return version
    return 0
