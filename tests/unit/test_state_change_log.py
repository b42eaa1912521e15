"""The state-change log's lines: one JSON object each, the common fields first."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from broker.state_change_log import SCHEMA_VERSION, StateChangeLog


def lines(path: Path) -> list[str]:
    return (path / "state-change.log").read_text().splitlines()


def test_write_many_lines_are_the_merged_records(tmp_path: Path) -> None:
    log = StateChangeLog(tmp_path, 4)
    rows = [
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


_VALUES = st.none() | st.booleans() | st.integers() | st.text(max_size=5)
_ROWS = st.lists(
    st.dictionaries(
        st.sampled_from(["topic", "partition", "ts", "event", "isr", "x"]),
        _VALUES | st.lists(st.integers(), max_size=3),
        max_size=5,
    ),
    max_size=5,
)


@given(_ROWS)
def test_write_many_equals_one_write_per_row(rows: list[dict[str, object]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        log = StateChangeLog(d, 1)
        log.write_many("e", rows)
        log.close()
        path = Path(d) / "state-change.log"
        got = path.read_text().splitlines() if path.exists() else []
    assert len(got) == len(rows)
    for line, row in zip(got, rows, strict=True):
        record = json.loads(line)
        head = {"ts": record.get("ts"), "v": SCHEMA_VERSION, "broker": 1, "event": "e"}
        if "ts" in row:
            head["ts"] = row["ts"]
        assert line == json.dumps({**head, **row}, separators=(",", ":"))
