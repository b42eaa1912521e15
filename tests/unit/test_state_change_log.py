"""The state-change log's lines: one JSON object each, the common fields first."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from broker.state_change_log import (
    REASONS,
    SCHEMA_VERSION,
    LeaderAndIsrRow,
    PartitionStateRow,
    StateChangeLog,
    _encode,
)


def lines(path: Path) -> list[str]:
    return (path / "state-change.log").read_text().splitlines()


def test_write_many_lines_are_the_merged_records(tmp_path: Path) -> None:
    log = StateChangeLog(tmp_path, 4)
    rows: list[dict[str, object]] = [
        {"topic": "t", "partition": 0, "leader": 1, "isr": [1, 2], "reason": "offline"},
        {},
        {"event": "overridden", "topic": "é", "note": None},  # a row may name a common field
    ]
    log.write_many("partition_state", rows)
    log.close()
    got = lines(tmp_path)
    records = [json.loads(line) for line in got]
    ts = records[0]["ts"]
    head = {"ts": ts, "v": SCHEMA_VERSION, "broker": 4, "event": "partition_state"}
    assert got == [json.dumps({**head, **row}, separators=(",", ":")) for row in rows]
    assert list(records[0])[:4] == ["ts", "v", "broker", "event"]
    assert records[2]["event"] == "overridden"


def test_a_tail_field_named_by_a_row_is_written_once_the_tails(tmp_path: Path) -> None:
    log = StateChangeLog(tmp_path, 4)
    log.write_many("e", [{"controller_epoch": 1, "x": 2}], controller_epoch=5)
    log.close()
    (line,) = lines(tmp_path)
    head = {"ts": json.loads(line)["ts"], "v": SCHEMA_VERSION, "broker": 4, "event": "e"}
    assert line == json.dumps({**head, "controller_epoch": 5, "x": 2}, separators=(",", ":"))


_VALUES = st.none() | st.booleans() | st.integers() | st.text(max_size=5)
_ROWS = st.lists(
    st.dictionaries(
        st.sampled_from(["topic", "partition", "ts", "event", "isr", "x"]),
        _VALUES | st.lists(st.integers(), max_size=3),
        max_size=5,
    ),
    max_size=5,
)


def written(rows: list[dict[str, object]], **tail: object) -> list[str]:
    """The lines broker 1's write_many("e", rows, **tail) writes."""
    with tempfile.TemporaryDirectory() as d:
        log = StateChangeLog(d, 1)
        log.write_many("e", rows, **tail)
        log.close()
        path = Path(d) / "state-change.log"
        return path.read_text().splitlines() if path.exists() else []


@given(_ROWS)
def test_write_many_equals_one_write_per_row(rows: list[dict[str, object]]) -> None:
    got = written(rows)
    assert len(got) == len(rows)
    for line, row in zip(got, rows, strict=True):
        record = json.loads(line)
        head = {"ts": record.get("ts"), "v": SCHEMA_VERSION, "broker": 1, "event": "e"}
        if "ts" in row:
            head["ts"] = row["ts"]
        assert line == json.dumps({**head, **row}, separators=(",", ":"))


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(_JSON)
@example('a "quoted" é\n')  # a bare string: escaped as JSONEncoder.encode escapes it
def test_the_line_encoder_is_json_dumps(value: object) -> None:
    # One C encoder made once (no circular-reference check) writes what json.dumps would.
    assert _encode(value) == json.dumps(value, separators=(",", ":"))


def test_the_line_encoder_refuses_what_json_refuses() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        _encode({"x": object()})


@given(_ROWS, st.integers())
def test_a_tail_ends_every_row(rows: list[dict[str, object]], epoch: int) -> None:
    # What partition_states writes: each row, then the controller epoch.
    got = written(rows, controller_epoch=epoch)
    assert len(got) == len(rows)
    for line, row in zip(got, rows, strict=True):
        ts = json.loads(line)["ts"] if "ts" not in row else None
        head = {"ts": ts, "v": SCHEMA_VERSION, "broker": 1, "event": "e"}
        expected = {**head, **row, "controller_epoch": epoch}
        assert line == json.dumps(expected, separators=(",", ":"))


# --- the typed rows: partition_state and leader_and_isr lines ------------------------

_INT_LISTS = st.lists(st.integers(min_value=-1, max_value=2**31 - 1), max_size=4)
_INT_SEQS = _INT_LISTS | _INT_LISTS.map(tuple)
_INT32 = st.integers(min_value=0, max_value=2**31 - 1)
_LEADER = st.integers(min_value=-2, max_value=2**31 - 1)
_TOPIC = st.text(max_size=6)
_PARTITION_STATE_ROWS = st.builds(
    PartitionStateRow,
    _TOPIC,
    _INT32,
    _LEADER,
    _INT32,
    _INT_SEQS,
    st.sampled_from(REASONS),
    _INT_SEQS,
    _INT32,
)
_LEADER_AND_ISR_ROWS = st.builds(
    LeaderAndIsrRow,
    _TOPIC,
    _INT32,
    _LEADER,
    _INT32,
    _INT_SEQS,
    _INT_SEQS,
    _INT32,
    _INT32,
    st.sampled_from(["applied", "rejected"]),
    st.none() | st.sampled_from(["STALE_CONTROLLER_EPOCH", "UNKNOWN_TOPIC_OR_PARTITION"]),
)


def _as_record(row: PartitionStateRow | LeaderAndIsrRow) -> dict[str, object]:
    return {k: list(v) if isinstance(v, (list, tuple)) else v for k, v in row._asdict().items()}


def lines_written(write: Callable[[StateChangeLog], None]) -> list[str]:
    """The lines broker 1's log holds after ``write``."""
    with tempfile.TemporaryDirectory() as d:
        log = StateChangeLog(d, 1)
        write(log)
        log.close()
        path = Path(d) / "state-change.log"
        return path.read_text().splitlines() if path.exists() else []


@given(st.lists(_PARTITION_STATE_ROWS, max_size=6), st.integers(min_value=0, max_value=99))
def test_partition_state_lines_are_json_dumps_of_the_records(
    rows: list[PartitionStateRow], epoch: int
) -> None:
    got = lines_written(lambda log: log.partition_states(epoch, rows))
    assert len(got) == len(rows)
    for line, row in zip(got, rows, strict=True):
        record = json.loads(line)
        head = {"ts": record["ts"], "v": SCHEMA_VERSION, "broker": 1, "event": "partition_state"}
        expected = {**head, **_as_record(row), "controller_epoch": epoch}
        assert line == json.dumps(expected, separators=(",", ":"))


@given(st.lists(_LEADER_AND_ISR_ROWS, max_size=6))
def test_leader_and_isr_lines_are_json_dumps_of_the_records(rows: list[LeaderAndIsrRow]) -> None:
    got = lines_written(lambda log: log.leader_and_isr(rows))
    assert len(got) == len(rows)
    for line, row in zip(got, rows, strict=True):
        record = json.loads(line)
        head = {"ts": record["ts"], "v": SCHEMA_VERSION, "broker": 1, "event": "leader_and_isr"}
        assert line == json.dumps({**head, **_as_record(row)}, separators=(",", ":"))


def test_a_row_value_that_is_not_an_int_is_refused_not_written(tmp_path: Path) -> None:
    log = StateChangeLog(tmp_path, 1)
    bad = PartitionStateRow("t", 0, None, 1, (1,), "new", (1,), 0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        log.partition_states(1, [bad])
    log.close()
    assert not (tmp_path / "state-change.log").read_text()


def test_a_request_state_row_names_its_result_by_its_error() -> None:
    state = {"partition_index": 3, "leader": 2, "leader_epoch": 7, "isr": [2], "replicas": [1, 2]}
    applied = LeaderAndIsrRow.of_request("t", state, 1, 4, None)
    rejected = LeaderAndIsrRow.of_request("t", state, 1, 4, "STALE_CONTROLLER_EPOCH")
    assert applied == LeaderAndIsrRow("t", 3, 2, 7, [2], [1, 2], 1, 4, "applied", None)
    assert (rejected.result, rejected.error) == ("rejected", "STALE_CONTROLLER_EPOCH")
