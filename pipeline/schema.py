"""The state-change log's lines as data: the fields the analytics read, their types, what
each event must carry, and how a line is classified.

One specification, two executors: `classify_line` (plain Python, for tests and tools) and
`pipeline.job` (Spark expressions built from the same tables, for scale). They agree line
for line; tests/unit/test_pipeline_spark.py checks that on a corpus of broken lines.

A line is exactly one of:

* ``ok``: a schema-1 (or older) line of a known event with every field it needs;
* ``blank``: only whitespace (counted, harmless);
* ``torn``: the last line of a file, without its newline, that does not parse (a writer was
  interrupted mid-line: SIGKILL, a full disk, a copy taken while the broker ran);
* ``malformed``: not a JSON object, or a known field of the wrong type;
* ``newer_version``: ``v`` above what this reader knows (kept aside and counted, never
  guessed at: a newer schema may change meanings);
* ``unknown_event``: a current-version line of an event this reader does not know;
* ``invalid``: a JSON object missing a field its event needs (``detail`` names it), or
  whose ``ts`` is no time a broker's clock gives and a calendar shows (before 1970, after
  year 9999: a corrupted stamp).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SCHEMA_VERSION = 1

STATUSES = (
    "ok",
    "blank",
    "torn",
    "malformed",
    "newer_version",
    "unknown_event",
    "invalid",
)

# The fields read, with their types: long/int (JSON integers in range), str (a string; as in
# Spark, another JSON value counts as its JSON text), double, ints (an array of integers).
FIELDS: dict[str, str] = {
    "ts": "long",
    "v": "long",
    "broker": "int",
    "event": "str",
    "controller": "int",
    "controller_epoch": "int",
    "epoch_zk_version": "int",
    "reason": "str",
    "total_ms": "double",
    "new": "ints",
    "dead": "ints",
    "bounced": "ints",
    "live": "ints",
    "topic": "str",
    "partition": "int",
    "leader": "int",
    "leader_epoch": "int",
    "isr": "ints",
    "replicas": "ints",
    "state": "str",
    "controller_id": "int",
    "result": "str",
    "error": "str",
    "api": "str",
    "attempt": "int",
    "remaining": "int",
    "zk_version": "int",
    "why": "str",
    "broker_epoch": "long",
}

COMMON = ("ts", "v", "broker", "event")

# What each event must carry beyond the common fields (docs/state-change-log.md).
REQUIRED: dict[str, tuple[str, ...]] = {
    "controller_elected": ("controller", "controller_epoch"),
    "controller_resigned": ("controller", "controller_epoch"),
    "controller_failover": ("controller_epoch",),
    "controller_seen": ("controller",),
    "broker_change": ("controller_epoch", "new", "dead"),
    "partition_state": (
        "topic",
        "partition",
        "leader",
        "leader_epoch",
        "isr",
        "controller_epoch",
        "reason",
    ),
    "requests_acknowledged": ("controller_epoch",),
    "topic_deleted": ("topic",),
    "broker_registered": (),
    "zookeeper_session": ("state",),
    "leader_and_isr": (
        "topic",
        "partition",
        "leader",
        "leader_epoch",
        "isr",
        "controller_epoch",
        "result",
    ),
    "request_rejected": ("controller_epoch", "error"),
    "isr_change": ("topic", "partition", "leader", "leader_epoch", "isr"),
    "controlled_shutdown": (),
    "truncated": ("topic", "partition", "leader", "leader_epoch"),
}
EVENTS = tuple(REQUIRED)

# Events the control-plane analysis reads (few lines: they do not grow with partitions).
CONTROL_EVENTS = (
    "controller_elected",
    "controller_resigned",
    "controller_failover",
    "controller_seen",
    "broker_change",
    "broker_registered",
    "zookeeper_session",
    "controlled_shutdown",
    "topic_deleted",
)

INT_ARRAYS = tuple(f for f, t in FIELDS.items() if t == "ints")

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
# The stamps used (ms since 1970, UTC): from 1970 to the end of year 9999, the last a
# datetime (the page) can show; a long outside them is a corrupted stamp, not a time.
TS_RANGE = (0, 253_402_300_799_999)
_NON_NUMERIC = frozenset({"NaN", "Infinity", "+Infinity", "-Infinity", "INF", "+INF", "-INF"})


@dataclass(frozen=True)
class Classified:
    status: str
    detail: str | None = None
    record: dict[str, Any] | None = None  # the typed fields, for ok lines


class _TypeMismatch(Exception):
    pass


def _convert(kind: str, value: Any) -> Any:
    """A JSON value as Spark's JSON reader converts it to `kind`; raises on a mismatch."""
    if value is None:
        return None
    if kind in ("long", "int"):
        lo, hi = _INT64 if kind == "long" else _INT32
        if type(value) is int and lo <= value <= hi:
            return value
        raise _TypeMismatch
    if kind == "str":
        if isinstance(value, str):
            return value
        return json.dumps(value, separators=(",", ":"))
    if kind == "double":
        if type(value) in (int, float):
            return float(value)
        if isinstance(value, str) and value in _NON_NUMERIC:
            return math.nan if value == "NaN" else (-math.inf if "-" in value else math.inf)
        raise _TypeMismatch
    if kind == "ints":
        if not isinstance(value, list):
            raise _TypeMismatch
        return [_convert("int", x) for x in value]
    raise ValueError(f"unknown field kind {kind!r}")


def missing_field(record: Mapping[str, Any]) -> str | None:
    """The first field an event needs that the record lacks (or holds as null), or None.

    Arrays holding a null count as missing: a replica list with a hole is no list.
    """
    for name in COMMON:
        if record.get(name) is None:
            return name
    event = record["event"]
    for name in REQUIRED.get(event, ()):
        if record.get(name) is None:
            return name
    for name in INT_ARRAYS:
        value = record.get(name)
        if value is not None and any(x is None for x in value):
            return name
    return None


def classify_line(text: str, *, torn: bool = False) -> Classified:
    """What a line is. `torn`: it is its file's last line and has no newline."""
    if not text.strip():
        return Classified("blank")
    try:
        obj = json.loads(text)
    except ValueError:
        return Classified("torn" if torn else "malformed", "not JSON")
    if not isinstance(obj, dict):
        return Classified("malformed", "not a JSON object")
    v = obj.get("v")
    if type(v) is int and v > SCHEMA_VERSION and v <= _INT64[1]:
        return Classified("newer_version", f"v={v}")
    record: dict[str, Any] = {}
    for name, kind in FIELDS.items():
        try:
            record[name] = _convert(kind, obj.get(name))
        except _TypeMismatch:
            return Classified("malformed", f"{name} has the wrong type")
    if record["v"] is not None and record["v"] < 1:
        return Classified("invalid", "v")
    for name in COMMON:
        if record[name] is None:
            return Classified("invalid", name)
        if name == "ts" and not TS_RANGE[0] <= record[name] <= TS_RANGE[1]:
            return Classified("invalid", name)
    if record["event"] not in REQUIRED:
        return Classified("unknown_event", str(record["event"]))
    missing = missing_field(record)
    if missing is not None:
        return Classified("invalid", missing)
    return Classified("ok", None, record)
