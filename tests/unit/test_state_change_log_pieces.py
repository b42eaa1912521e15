"""Many state-change lines at once (a broker loss logs 10,000s) are written in pieces of
_LINES_PER_WRITE, so they never exist as one string: every line is written, in order,
the call's lines together, and on a disk that fails midway the rest are counted lost."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from broker.state_change_log import (
    _LINES_PER_WRITE,
    FILE_NAME,
    LeaderAndIsrRow,
    PartitionStateRow,
    StateChangeLog,
)
from tests.unit.test_state_change_log_failing_disk import fill_disk, lost_counts

ROWS = 2 * _LINES_PER_WRITE + 500


def leader_and_isr(log: StateChangeLog) -> None:
    log.leader_and_isr(
        LeaderAndIsrRow("t", p, 1, 3, (1, 2), (1, 2, 3), 2, 7, "applied", None) for p in range(ROWS)
    )


def partition_states(log: StateChangeLog) -> None:
    log.partition_states(
        7, (PartitionStateRow("t", p, 1, 3, (1, 2), "offline", (1, 2, 3), 4) for p in range(ROWS))
    )


def write_many(log: StateChangeLog) -> None:
    log.write_many("partition_state", ({"topic": "t", "partition": p} for p in range(ROWS)))


WRITES = [leader_and_isr, partition_states, write_many]


def records(directory: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (directory / FILE_NAME).read_text().splitlines()]


@pytest.mark.parametrize("write", WRITES)
def test_many_lines_are_written_in_pieces_each_once_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write: Callable[[StateChangeLog], None]
) -> None:
    log = StateChangeLog(tmp_path, 1)
    pieces: list[int] = []
    real = log._write_locked

    def counted(text: str) -> None:
        pieces.append(text.count("\n"))
        real(text)

    monkeypatch.setattr(log, "_write_locked", counted)
    write(log)
    log.close()
    assert pieces == [_LINES_PER_WRITE, _LINES_PER_WRITE, 500]
    assert [r["partition"] for r in records(tmp_path)] == list(range(ROWS))


@pytest.mark.parametrize("write", WRITES)
def test_a_calls_lines_stay_together_while_another_thread_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write: Callable[[StateChangeLog], None]
) -> None:
    """Another writer (the controller's event thread beside a LeaderAndIsr's handling)
    that comes between two pieces waits for the last: the lock is held across them."""
    log = StateChangeLog(tmp_path, 1)
    real = log._write_locked
    other = threading.Thread(target=log.session_state, args=("SUSPENDED",))

    def first_piece_lets_another_writer_in(text: str) -> None:
        real(text)
        if not other.is_alive() and other.ident is None:
            other.start()
            other.join(0.2)  # it would be done by now, but for the lock

    monkeypatch.setattr(log, "_write_locked", first_piece_lets_another_writer_in)
    write(log)
    other.join(10)
    assert not other.is_alive()
    log.close()
    written = records(tmp_path)
    assert [r.get("partition") for r in written[:ROWS]] == list(range(ROWS))
    assert written[ROWS]["state"] == "SUSPENDED"
    assert len(written) == ROWS + 1


def test_a_disk_failing_midway_counts_the_rest_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    log = StateChangeLog(tmp_path, 1, retry_s=3600.0)
    real = log._write_locked
    calls = 0

    def fails_after_the_first_piece(text: str) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            fill_disk(log)
        real(text)

    with caplog.at_level(logging.WARNING, logger="broker.state_change_log"):
        with monkeypatch.context() as m:
            m.setattr(log, "_write_locked", fails_after_the_first_piece)
            leader_and_isr(log)
        log._retry_at = 0.0
        log.session_state("CONNECTED")  # written again
    log.close()
    assert lost_counts(caplog) == [f" up to {ROWS - _LINES_PER_WRITE} lines were lost"]
    written = records(tmp_path)
    assert [r["partition"] for r in written[:-1]] == list(range(_LINES_PER_WRITE))
    assert written[-1]["state"] == "CONNECTED"
