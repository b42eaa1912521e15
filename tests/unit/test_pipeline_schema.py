"""Line classification (pipeline.schema) and input resolution (pipeline.inputs), no Spark."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline import inputs, schema

DOC = Path(__file__).resolve().parents[2] / "docs" / "state-change-log.md"

OK = {
    "ts": 1795309417648,
    "v": 1,
    "broker": 1,
    "event": "partition_state",
    "topic": "t",
    "partition": 0,
    "leader": 2,
    "leader_epoch": 3,
    "isr": [2, 3],
    "replicas": [2, 3, 1],
    "controller_epoch": 4,
    "reason": "offline",
}


def line(**changes: object) -> str:
    obj = {**OK, **changes}
    return json.dumps({k: v for k, v in obj.items() if v is not ...})


def test_a_good_line_is_ok_with_typed_fields() -> None:
    c = schema.classify_line(line())
    assert c.status == "ok"
    assert c.record is not None
    assert c.record["isr"] == [2, 3]
    assert c.record["replicas"] == [2, 3, 1]
    assert c.record["controller"] is None  # a field of other events


@pytest.mark.parametrize(
    ("text", "status", "detail"),
    [
        ("", "blank", None),
        ("   \t", "blank", None),
        ("{not json", "malformed", "not JSON"),
        ("[1, 2]", "malformed", "not a JSON object"),
        ("null", "malformed", "not a JSON object"),
        (line(leader="2"), "malformed", "leader has the wrong type"),
        (line(leader=2.0), "malformed", "leader has the wrong type"),
        (line(leader=True), "malformed", "leader has the wrong type"),
        (line(leader=2**31), "malformed", "leader has the wrong type"),
        (line(ts=2**63), "malformed", "ts has the wrong type"),
        (line(isr="2,3"), "malformed", "isr has the wrong type"),
        (line(v=2, leader="anything"), "newer_version", "v=2"),
        (line(v=0), "invalid", "v"),
        (line(ts=...), "invalid", "ts"),
        # A valid long, but no time a page can show (a stamp with three digits too many).
        (line(ts=1_700_000_000_000_006), "invalid", "ts"),
        (line(ts=253_402_300_800_000), "invalid", "ts"),  # year 10000
        (line(ts=-1), "invalid", "ts"),  # before 1970: no wall clock of a broker
        (line(ts=-1, event="future_event"), "invalid", "ts"),
        (line(event=...), "invalid", "event"),
        (line(event="future_event"), "unknown_event", "future_event"),
        (line(leader=None), "invalid", "leader"),
        (line(reason=...), "invalid", "reason"),
        (line(isr=[2, None]), "invalid", "isr"),
        (line(replicas=[None]), "invalid", "replicas"),
    ],
)
def test_classification(text: str, status: str, detail: str | None) -> None:
    c = schema.classify_line(text)
    assert (c.status, c.detail) == (status, detail)
    assert (c.record is not None) == (status == "ok")


def test_the_first_and_last_stamps_a_page_can_show_are_ok() -> None:
    for ts in (0, 253_402_300_799_999):  # 1970-01-01, 9999-12-31T23:59:59.999
        assert schema.classify_line(line(ts=ts)).status == "ok", ts


def test_a_string_field_takes_any_json_value_as_text_like_spark() -> None:
    c = schema.classify_line(line(topic=5, reason={"a": 1}))
    assert c.status == "ok"
    assert c.record is not None
    assert (c.record["topic"], c.record["reason"]) == ("5", '{"a":1}')


def test_a_torn_last_line_is_told_from_garbage() -> None:
    text = line()[:40]
    assert schema.classify_line(text, torn=True).status == "torn"
    assert schema.classify_line(text).status == "malformed"
    # A last line that lost only its newline is whole: it is used.
    assert schema.classify_line(line(), torn=True).status == "ok"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_text_is_classified_never_raising(text: str) -> None:
    assert schema.classify_line(text).status in schema.STATUSES


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda kids: (
        st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=5), kids, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(schema.FIELDS)), json_values, max_size=10))
def test_any_json_object_is_classified_and_ok_means_complete(obj: dict[str, object]) -> None:
    c = schema.classify_line(json.dumps(obj))
    assert c.status in schema.STATUSES
    if c.status == "ok":
        assert c.record is not None
        assert schema.missing_field(c.record) is None
        assert 0 <= c.record["ts"] <= 253_402_300_799_999
        assert c.record["event"] in schema.REQUIRED


def test_every_documented_event_and_field_is_known() -> None:
    """docs/state-change-log.md and the reader agree: every event it documents is read,
    and every field the reader needs is documented for its event."""
    documented: dict[str, set[str]] = {}
    for m in re.finditer(r"^\| `(\w+)` \| ([^|]*) \|", DOC.read_text(), re.MULTILINE):
        documented[m.group(1)] = set(re.findall(r"`(\w+)`", m.group(2)))
    events = {e for e in documented if e not in schema.FIELDS}
    assert events == set(schema.REQUIRED)
    for event, needed in schema.REQUIRED.items():
        assert set(needed) <= documented[event], event
    assert {"replicas"} <= documented["partition_state"]
    assert {"replicas"} <= documented["leader_and_isr"]


# --- inputs -----------------------------------------------------------------------------------


def test_log_arguments_name_their_clusters(tmp_path: Path) -> None:
    got = inputs.parse_log_args(
        ["prod=/logs/jan", "prod=/logs/feb", "/runs/a/", "/other/a", "hdfs://nn/x/y"]
    )
    assert [(s.cluster, s.path) for s in got] == [
        ("prod", "/logs/jan"),
        ("prod", "/logs/feb"),
        ("a", "/runs/a/"),
        ("a-2", "/other/a"),
        ("y", "hdfs://nn/x/y"),
    ]
    # A path that exists is a path, even with '=' in it.
    odd = tmp_path / "k=v"
    odd.mkdir()
    assert inputs.parse_log_args([str(odd)])[0].path == str(odd)


def test_resolve_finds_logs_and_says_what_is_wrong(tmp_path: Path) -> None:
    for b in (1, 2):
        d = tmp_path / f"broker-{b}" / "data"
        d.mkdir(parents=True)
        (d / "state-change.log").write_text("{}\n")
        (d / "broker-status.json").write_text("{}")
    (tmp_path / "broker-1" / "data" / "state-change.log.1").write_text("{}\n")
    r = inputs.resolve(inputs.LogSource("c", str(tmp_path)))
    assert len(r.files) == 3
    assert r.bytes == 9
    assert not r.remote
    g = inputs.resolve(inputs.LogSource("c", str(tmp_path / "broker-*")))
    assert len(g.files) == 3
    with pytest.raises(inputs.InputError, match="no such file or directory"):
        inputs.resolve(inputs.LogSource("c", str(tmp_path / "missing")))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(inputs.InputError, match="no state-change logs"):
        inputs.resolve(inputs.LogSource("c", str(empty)))
    with pytest.raises(inputs.InputError, match="no state-change logs match"):
        inputs.resolve(inputs.LogSource("c", str(tmp_path / "nothing-*")))
    remote = inputs.resolve(inputs.LogSource("c", "hdfs://namenode/logs"))
    assert remote.remote
    assert remote.files == ()


def test_torn_tails() -> None:
    assert inputs.torn_tail(b"") is None
    assert inputs.torn_tail(b'{"a":1}\n') is None
    assert inputs.torn_tail(b'{"a":1}\r\n') is None
    assert inputs.torn_tail(b'{"a":1}\n{"b"') == b'{"b"'
    assert inputs.torn_tail(b'{"b"') == b'{"b"'
    assert inputs.normalize_uri("file:///x/y") == inputs.normalize_uri("file:/x/y") == "file:/x/y"


def test_a_default_name_never_joins_an_explicit_one_whatever_the_order() -> None:
    # An explicit NAME given after a path whose default name it equals used to merge the
    # two clusters (the other order kept them apart).
    for args in (["prod=/logs/a", "/logs/b/prod"], ["/logs/b/prod", "prod=/logs/a"]):
        got = {s.path: s.cluster for s in inputs.parse_log_args(args)}
        assert got == {"/logs/a": "prod", "/logs/b/prod": "prod-2"}, args
    # Nor a suffixed name someone gave explicitly; the same path twice stays one cluster.
    sources = inputs.parse_log_args(["/x/prod", "prod-2=/y", "prod=/z", "/x/prod"])
    assert [s.cluster for s in sources] == ["prod-3", "prod-2", "prod", "prod-3"]
