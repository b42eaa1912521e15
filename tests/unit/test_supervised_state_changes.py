"""SupervisedBroker.state_changes: a broker's state-change log read as it grows, each event
kind's lines parsed once (tests and benchmarks poll it while brokers write 100,000s)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from broker.state_change_log import StateChangeLog
from cluster.supervised import SupervisedBroker


def broker_with_log(tmp_path: Path) -> tuple[SupervisedBroker, StateChangeLog]:
    broker = SupervisedBroker(1, tmp_path / "broker-1", "127.0.0.1:2181")
    return broker, StateChangeLog(broker.data_dir, 1)


def test_lines_are_read_as_the_log_grows_and_filtered_by_kind(tmp_path: Path) -> None:
    broker, log = broker_with_log(tmp_path)
    assert broker.state_changes("controller_elected") == []
    log.write("controller_elected", controller_epoch=1)
    # A value quoting another kind's marker is escaped in the file: not a line of that kind.
    log.write("controller_resigned", controller_epoch=1, reason='"event":"controller_elected"')
    log.write_many("partition_state", [{"partition": p} for p in range(3)], controller_epoch=1)
    elected = broker.state_changes("controller_elected")
    assert [r["controller_epoch"] for r in elected] == [1]
    assert len(broker.state_changes()) == 5
    log.write("controller_elected", controller_epoch=2)
    assert [r["controller_epoch"] for r in broker.state_changes("controller_elected")] == [1, 2]
    assert [r["partition"] for r in broker.state_changes("partition_state")] == [0, 1, 2]
    assert [r["event"] for r in broker.state_changes()][-1] == "controller_elected"
    # The caller's list is its own.
    broker.state_changes("controller_elected").clear()
    assert len(broker.state_changes("controller_elected")) == 2
    log.close()


def test_a_line_still_being_written_waits_for_its_end(tmp_path: Path) -> None:
    broker, log = broker_with_log(tmp_path)
    log.write("controller_elected", controller_epoch=1)
    log.close()
    path = broker.data_dir / "state-change.log"
    line = json.dumps({"ts": 1, "v": 1, "broker": 1, "event": "controller_elected", "x": "é"})
    compact = line.replace(": ", ":").replace(", ", ",").encode()
    with open(path, "ab") as f:
        f.write(compact[:-5])  # cut inside the line (after a two-byte character)
    assert len(broker.state_changes("controller_elected")) == 1
    with open(path, "ab") as f:
        f.write(compact[-5:] + b"\n")
    rows = broker.state_changes("controller_elected")
    assert len(rows) == 2
    assert rows[1]["x"] == "é"


def test_a_replaced_or_removed_log_is_read_afresh(tmp_path: Path) -> None:
    broker, log = broker_with_log(tmp_path)
    log.write("controller_elected", controller_epoch=1)
    log.write("controller_elected", controller_epoch=2)
    log.close()
    assert len(broker.state_changes("controller_elected")) == 2
    path = broker.data_dir / "state-change.log"
    os.unlink(path)
    assert broker.state_changes("controller_elected") == []
    log = StateChangeLog(broker.data_dir, 1)  # a new file
    log.write("controller_elected", controller_epoch=3)
    assert [r["controller_epoch"] for r in broker.state_changes("controller_elected")] == [3]
    log.close()
    replacement = path.with_suffix(".new")
    replacement.write_text(path.read_text() * 2)
    os.replace(replacement, path)  # another file, longer than what was read
    assert [r["controller_epoch"] for r in broker.state_changes("controller_elected")] == [3, 3]


def test_each_line_of_a_kind_is_parsed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker, log = broker_with_log(tmp_path)
    log.write_many("partition_state", [{"partition": p} for p in range(1000)], controller_epoch=1)
    log.write("controller_elected", controller_epoch=1)
    parsed: list[str] = []
    real_loads = json.loads

    def counting_loads(text: str) -> object:
        parsed.append(text)
        return real_loads(text)

    monkeypatch.setattr(json, "loads", counting_loads)  # the module supervised reads with
    for _ in range(5):  # polls
        assert len(broker.state_changes("controller_elected")) == 1
    assert len(parsed) == 1  # not the 1,000 lines of another kind, and not at every poll
    log.write("controller_elected", controller_epoch=2)
    assert len(broker.state_changes("controller_elected")) == 2
    assert len(parsed) == 2
    log.close()
