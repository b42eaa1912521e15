"""Typed description of Kafka message schemas, as generated into `wire.schemas`.

The generated module holds the JSON schemas' content verbatim (version ranges stay in the
schema syntax, "0+", "3-7", "none"; defaults stay as the schema's strings) so it can be read
side by side with the upstream files. The helpers here interpret that syntax; `wire.codec`
is the only consumer that needs them on a hot path, and it calls them at compile time only.

Field keys: a message is a plain dict whose keys are `snake_case(field.name)`:
  * "KRaft" is one word (`isKRaftController` -> `is_kraft_controller`);
  * an underscore goes between a lower-case letter or digit and an upper-case letter
    (`ControllerEpoch` -> `controller_epoch`, `V0Host` -> `v0_host`);
  * a run of capitals is one word, split before its last capital when a lower-case letter
    follows (`ISR` -> `isr`, `HTTPServer` -> `http_server`);
  * the result is lower-cased.
`wire.codec` refuses a struct in which two fields would get the same key.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Literal

MessageType = Literal["request", "response", "header"]

PRIMITIVE_TYPES = frozenset(
    {
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
)

MAX_VERSION = 0x7FFF


@dataclass(frozen=True, slots=True)
class VersionRange:
    """An inclusive range of versions; `lo > hi` is the empty range ("none")."""

    lo: int
    hi: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.lo <= version <= self.hi

    @property
    def empty(self) -> bool:
        return self.lo > self.hi

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.hi == MAX_VERSION:
            return f"{self.lo}+"
        if self.lo == self.hi:
            return str(self.lo)
        return f"{self.lo}-{self.hi}"


NO_VERSIONS = VersionRange(1, 0)


@functools.cache
def parse_versions(spec: str) -> VersionRange:
    """Parse the schema syntax: "none", "3", "3+", "3-7"."""
    text = spec.strip()
    if text == "none":
        return NO_VERSIONS
    if text.endswith("+"):
        return VersionRange(int(text[:-1]), MAX_VERSION)
    if "-" in text:
        lo, hi = text.split("-", 1)
        return VersionRange(int(lo), int(hi))
    return VersionRange(int(text), int(text))


_KRAFT = re.compile(r"KRaft")
_ACRONYM = re.compile(r"([A-Z]+)([A-Z][a-z])")
_WORD = re.compile(r"([a-z0-9])([A-Z])")


@functools.cache
def snake_case(name: str) -> str:
    """The dict key for a schema field name (rule in the module docstring)."""
    text = _KRAFT.sub("Kraft", name)
    text = _ACRONYM.sub(r"\1_\2", text)
    text = _WORD.sub(r"\1_\2", text)
    return text.lower()


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One field of a message or struct, as written in the JSON schema."""

    name: str
    type: str
    versions: str
    nullable_versions: str = "none"
    tagged_versions: str = "none"
    tag: int | None = None
    default: str | None = None
    ignorable: bool = False
    flexible_versions: str | None = None
    entity_type: str | None = None
    map_key: bool = False
    zero_copy: bool = False
    about: str = ""
    fields: tuple[FieldSpec, ...] = field(default=())

    @property
    def key(self) -> str:
        return snake_case(self.name)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        """The element type of an array, or the type itself."""
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        """True for a struct or an array of structs."""
        return self.element_type not in PRIMITIVE_TYPES

    def present_in(self, version: int) -> bool:
        return version in parse_versions(self.versions)

    def nullable_in(self, version: int) -> bool:
        return version in parse_versions(self.nullable_versions)

    def tagged_in(self, version: int) -> bool:
        return self.tag is not None and version in parse_versions(self.tagged_versions)


@dataclass(frozen=True, slots=True)
class MessageSpec:
    """A request, response or header schema, with common structs resolved into its fields."""

    name: str
    type: MessageType
    api_key: int | None
    valid_versions: str
    flexible_versions: str
    fields: tuple[FieldSpec, ...]
    deprecated_versions: str = "none"
    latest_version_unstable: bool = False
    listeners: tuple[str, ...] = ()
    common_structs: tuple[str, ...] = ()

    @property
    def versions(self) -> range:
        valid = parse_versions(self.valid_versions)
        return range(valid.lo, valid.hi + 1)

    def flexible_in(self, version: int) -> bool:
        return version in parse_versions(self.flexible_versions)
