"""Each record the state-change log writes carries exactly the fields docs/state-change-log.md
lists for its event, the common ones first (a millisecond wall-clock `ts`, `v`, the writing
broker, `event`), with the values given: the failover analytics (pipeline/) read these
lines by the documented names, as tools read Kafka's state-change.log (kafka.controller.
StateChangeLogger: every line names the controller and its epoch)."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from broker.state_change_log import (
    FILE_NAME,
    SCHEMA_VERSION,
    LeaderAndIsrRow,
    PartitionStateRow,
    StateChangeLog,
    open_for_broker,
)
from pipeline.schema import COMMON, classify_line

DOC = Path(__file__).resolve().parents[2] / "docs" / "state-change-log.md"
BROKER = 2


def documented_fields() -> dict[str, list[str]]:
    """Each event's fields beyond the common ones, from the doc's event tables."""
    fields: dict[str, list[str]] = {}
    in_events = False
    for line in DOC.read_text().splitlines():
        if line.startswith("## "):
            in_events = line == "## Events"
        match = re.match(r"\| `(\w+)` \|([^|]*)\|", line)
        if in_events and match:
            fields[match.group(1)] = re.findall(r"`(\w+)`", match.group(2))
    return fields


def record_of(tmp_path: Path, write: Callable[[StateChangeLog], None]) -> dict[str, Any]:
    """The one record broker BROKER's ``write`` logs, checked for what every line holds."""
    log = StateChangeLog(tmp_path, BROKER)
    before = time.time_ns() // 1_000_000
    write(log)
    after = time.time_ns() // 1_000_000
    log.close()
    (line,) = (tmp_path / FILE_NAME).read_text().splitlines()
    assert classify_line(line).status == "ok", line
    record: dict[str, Any] = json.loads(line)
    assert list(record)[:4] == list(COMMON)
    assert before <= record["ts"] <= after  # milliseconds since the epoch
    assert (record["v"], record["broker"]) == (SCHEMA_VERSION, BROKER)
    return record


def own_fields(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in COMMON}


PARTITION = PartitionStateRow("t", 3, 1, 9, (1, 2), "unclean", [2, 1, 4], 17)
PARTITION_FIELDS = {
    "topic": "t",
    "partition": 3,
    "leader": 1,
    "leader_epoch": 9,
    "isr": [1, 2],
    "reason": "unclean",
    "replicas": [2, 1, 4],
    "zk_version": 17,
    "controller_epoch": 7,
}
FAILOVER_MS = {
    "load_ms": 12.34,
    "update_metadata_queued_ms": 20.06,
    "update_metadata_encoded_ms": 21.0,
    "replica_state_machine_ms": 30.5,
    "partition_state_machine_ms": 41.26,
    "offline_replicas_ms": 50.0,
    "total_ms": 60.44,
    "since_elected_ms": 61.7,
}

# event, the write, the fields it must write with their values (those of the failover's
# *_ms are checked apart).
CASES: list[tuple[str, Callable[[StateChangeLog], None], dict[str, Any]]] = [
    (
        "controller_elected",
        lambda log: log.controller_elected(7, 3),
        {"controller": BROKER, "controller_epoch": 7, "epoch_zk_version": 3},
    ),
    (
        "controller_resigned",
        lambda log: log.controller_resigned(7, "controller moved"),
        {"controller": BROKER, "controller_epoch": 7, "reason": "controller moved"},
    ),
    (
        "controller_seen",
        lambda log: log.controller_seen(5, "lost the election"),
        {"controller": 5, "reason": "lost the election"},
    ),
    (
        "controller_failover",
        lambda log: log.failover_loaded(7, 3, 10, FAILOVER_MS),
        {"controller_epoch": 7, "live_brokers": 3, "partitions": 10},
    ),
    (
        "broker_change",
        lambda log: log.broker_change(7, [5, 3], {4, 1}, (6, 2), [3, 2, 6, 5]),
        {
            "controller_epoch": 7,
            "new": [3, 5],
            "dead": [1, 4],
            "bounced": [2, 6],
            "live": [2, 3, 5, 6],
        },
    ),
    ("partition_state", lambda log: log.partition_states(7, [PARTITION]), PARTITION_FIELDS),
    (
        "leader_and_isr",
        lambda log: log.leader_and_isr(
            [LeaderAndIsrRow("t", 3, 1, 9, [1, 2], (2, 1), 4, 6, "rejected", "KAFKA_STORAGE_ERROR")]
        ),
        {
            "topic": "t",
            "partition": 3,
            "leader": 1,
            "leader_epoch": 9,
            "isr": [1, 2],
            "replicas": [2, 1],
            "controller_id": 4,
            "controller_epoch": 6,
            "result": "rejected",
            "error": "KAFKA_STORAGE_ERROR",
        },
    ),
    (
        "request_rejected",
        lambda log: log.request_rejected("LeaderAndIsr", 4, 6, 1234, "STALE_BROKER_EPOCH"),
        {
            "api": "LeaderAndIsr",
            "controller_id": 4,
            "controller_epoch": 6,
            "broker_epoch": 1234,
            "error": "STALE_BROKER_EPOCH",
        },
    ),
    (
        "broker_registered",
        lambda log: log.broker_registered(1234, "h1", 9093),
        {"broker_epoch": 1234, "host": "h1", "port": 9093},
    ),
    ("zookeeper_session", lambda log: log.session_state("SUSPENDED"), {"state": "SUSPENDED"}),
]


@pytest.mark.parametrize(("event", "write", "expected"), CASES, ids=[c[0] for c in CASES])
def test_each_record_has_its_documented_fields_and_values(
    tmp_path: Path, event: str, write: Callable[[StateChangeLog], None], expected: dict[str, Any]
) -> None:
    record = record_of(tmp_path, write)
    assert record["event"] == event
    fields = own_fields(record)
    documented = [f for f in documented_fields()[event] if f != "why"]  # why: found writes only
    assert sorted(fields) == sorted(documented)
    if event == "controller_failover":
        for name, ms in FAILOVER_MS.items():  # milliseconds, to a tenth at least
            assert fields.pop(name) == pytest.approx(ms, abs=0.05), name
    assert fields == expected


def test_a_partition_state_found_written_carries_why(tmp_path: Path) -> None:
    why = "found written, its answer lost"
    record = record_of(tmp_path, lambda log: log.partition_states_found(7, [PARTITION], why))
    assert record["event"] == "partition_state"
    fields = own_fields(record)
    assert sorted(fields) == sorted(documented_fields()["partition_state"])
    assert fields == {**PARTITION_FIELDS, "why": why}


def test_write_puts_the_common_fields_first_and_the_records_own_after(tmp_path: Path) -> None:
    record = record_of(tmp_path, lambda log: log.write("controlled_shutdown", attempt=1, ms=2))
    assert list(record) == [*COMMON, "attempt", "ms"]


def test_write_many_stamps_every_line_in_milliseconds(tmp_path: Path) -> None:
    record = record_of(tmp_path, lambda log: log.write_many("controlled_shutdown", [{"ms": 1}]))
    assert own_fields(record) == {"ms": 1}


def test_a_leader_and_isr_row_applied_has_a_null_error(tmp_path: Path) -> None:
    row = LeaderAndIsrRow("t", 0, 1, 2, [1], [1], 4, 6, "applied", None)
    record = record_of(tmp_path, lambda log: log.leader_and_isr([row]))
    assert (record["result"], record["error"]) == ("applied", None)


def test_the_broker_logs_in_its_first_log_directory(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    log = open_for_broker([str(first), str(second)], 3)
    log.session_state("CONNECTED")
    log.close()
    assert log.path == first / FILE_NAME
    assert json.loads((first / FILE_NAME).read_text())["broker"] == 3
    assert not (second / FILE_NAME).exists()


def test_a_first_log_directory_that_cannot_be_made_leaves_the_broker_without_a_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The broker starts anyway (the directory is offline, KIP-112): nothing raises, at
    open or at a write, and the error is logged."""
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("x")
    with caplog.at_level(logging.ERROR, logger="broker.state_change_log"):
        log = open_for_broker([str(not_a_directory)], 3)
    assert log.path is None
    log.session_state("CONNECTED")
    log.close()
    assert [r.levelno for r in caplog.records] == [logging.ERROR]
    assert "cannot open the state-change log" in caplog.records[0].getMessage()
    assert open_for_broker([], 3).path is None
