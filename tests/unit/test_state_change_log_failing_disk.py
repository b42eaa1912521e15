"""The state-change log on a failing disk: its writer never raises into the thread
writing (the controller's event thread, a broker's LeaderAndIsr handling), as Kafka's
log4j appenders never do; it logs an error, loses the lines and tries the file again
(docs/state-change-log.md)."""

from __future__ import annotations

import errno
import json
import logging
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from broker.state_change_log import FILE_NAME, ROLL_SUFFIX, StateChangeLog
from controller import events as ev
from tests.unit.fake_cluster import add_topic, empty_cluster, process, register, start_controller


def failing_disk(monkeypatch: pytest.MonkeyPatch, directory: Path, code: int) -> None:
    """Every stat of a path under ``directory`` fails with ``code`` (a disk returning EIO,
    a directory lost its search permission: errors Path.exists does not swallow)."""
    real_stat = os.stat

    def stat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if str(path).startswith(str(directory)):
            raise OSError(code, os.strerror(code), str(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)


@pytest.mark.parametrize("code", [errno.EIO, errno.EACCES])
def test_a_roll_on_a_failing_disk_does_not_raise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    """The hour's roll looked for a free name with Path.exists outside any try: the write
    raised, and every later one too (the roll stayed due)."""
    log = StateChangeLog(tmp_path, 1, hourly=True)
    log.session_state("CONNECTED")
    log._clock = lambda: time.time() + 2 * 3600  # the hour is over: the next write rolls
    with monkeypatch.context() as m:
        failing_disk(m, tmp_path, code)
        log.session_state("SUSPENDED")  # lost, logged
        log.session_state("LOST")
    log._retry_at = 0.0  # the retry is due, the disk back: written again
    log.session_state("CONNECTED")
    log.close()
    assert [p.name for p in tmp_path.iterdir()] == [FILE_NAME]  # rolled in the next hour
    states = [json.loads(line)["state"] for line in (tmp_path / FILE_NAME).read_text().split()]
    assert states == ["CONNECTED", "CONNECTED"]


def test_a_roll_whose_rename_fails_keeps_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rename refused (a directory not writable) while the file is still there: written
    on, rolled in the next hour, no line lost."""
    log = StateChangeLog(tmp_path, 1, hourly=True)
    log.session_state("CONNECTED")
    log._clock = lambda: time.time() + 2 * 3600

    def rename(src: Any, dst: Any) -> None:
        raise OSError(errno.EACCES, "Permission denied", str(src))

    with monkeypatch.context() as m:
        m.setattr(os, "rename", rename)
        log.session_state("SUSPENDED")
        log.session_state("LOST")
    log.close()
    assert [p.name for p in tmp_path.iterdir()] == [FILE_NAME]
    states = [json.loads(line)["state"] for line in (tmp_path / FILE_NAME).read_text().split()]
    assert states == ["CONNECTED", "SUSPENDED", "LOST"]


def test_no_file_error_escapes_a_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever of the file's handling fails (here the check that the path still names the
    open file, by an error no branch expects), the write logs it and returns."""
    log = StateChangeLog(tmp_path, 1, retry_s=0.0)
    log.session_state("CONNECTED")

    def follow_path() -> None:
        raise OSError(errno.EIO, "Input/output error")

    with monkeypatch.context() as m:
        m.setattr(log, "_follow_path", follow_path)
        log.session_state("LOST")
    log.session_state("CONNECTED")
    log.close()
    states = [json.loads(line)["state"] for line in (tmp_path / FILE_NAME).read_text().split()]
    assert states == ["CONNECTED", "CONNECTED"]


def test_a_broker_loss_at_the_hours_end_on_a_failing_disk_keeps_the_controller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reviewer's case: the roll's error raised into the event thread, the BrokerChange
    failed and the controller resigned ("error processing BrokerChange: OSError")."""
    zk = empty_cluster()
    for b in (1, 2, 3):
        register(zk, b)
    add_topic(zk, "t", {0: (2, 3, 1)})
    log = StateChangeLog(tmp_path, 1, hourly=True)
    c = start_controller(zk, state_log=log)
    assert c.is_active
    log._clock = lambda: time.time() + 2 * 3600  # an hour has ended
    with monkeypatch.context() as m:
        failing_disk(m, tmp_path, errno.EIO)
        zk.delete("/brokers/ids/2")  # the leader of t-0 is lost
        process(c, ev.BrokerChange())
    log.close()
    assert c.is_active
    stored = zk.get("/brokers/topics/t/partitions/0/state")
    assert stored is not None
    state = json.loads(stored[0])
    assert state["leader"] == 3


# A real full disk: RLIMIT_FSIZE at the file's size makes every write past it fail (EFBIG;
# SIGXFSZ ignored), in a process of its own; lifting it is the operator freeing space.
FULL_DISK_START = textwrap.dedent(
    """
    import json, os, resource, signal, sys
    from broker import state_change_log as scl

    d = sys.argv[1]
    path = os.path.join(d, scl.FILE_NAME)
    with open(path, "wb") as f:  # a line, then the piece the full disk cut off
        f.write(b'{"ts":1,"v":1,"broker":1,"event":"zookeeper_session","state":"OLD"}\\n{"ts":2')
    then = float(sys.argv[2])
    os.utime(path, (then, then))  # last written in an earlier hour
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path), hard))
    log = scl.open_for_broker([d], 1)  # the broker starts on the full disk
    started_with = str(log.path)
    log.session_state("LOST")  # lost: the disk is full
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))  # space freed
    log._retry_at = 0.0  # the retry is due
    log.session_state("FREED")
    log.close()
    print(json.dumps({"path": started_with}))
    """
)


def test_a_broker_started_on_a_full_disk_with_a_torn_log_writes_it_once_freed(
    tmp_path: Path,
) -> None:
    """The newline ending the torn last line could not be written: open_for_broker gave the
    broker a log without a file, never tried again. Now it is tried again as any failed
    write is, the retry ends the torn line, and the file, of an earlier hour, is rolled."""
    then = time.time() - 3 * 3600
    out = subprocess.run(
        [sys.executable, "-c", FULL_DISK_START, str(tmp_path), str(then)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1])["path"] == str(tmp_path / FILE_NAME)
    # The torn line ended in the crashed run's file, which was then rolled after its hour.
    rolled = tmp_path / f"{FILE_NAME}.{time.strftime(ROLL_SUFFIX, time.localtime(then))}"
    assert sorted(tmp_path.iterdir()) == [tmp_path / FILE_NAME, rolled]
    assert rolled.read_text().splitlines()[1:] == ['{"ts":2']
    states = [json.loads(line)["state"] for line in (tmp_path / FILE_NAME).read_text().split()]
    assert states == ["FREED"]


class FullDisk:
    """An open file whose every write fails as on a full disk."""

    def __init__(self) -> None:
        self.closed = False

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def fill_disk(log: StateChangeLog) -> FullDisk:
    """The log's disk is full from now on (until its file is opened again)."""
    assert log._file is not None
    log._file.close()
    full = FullDisk()
    log._file = full  # type: ignore[assignment]
    return full


def lost_counts(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage().rsplit(";", 1)[1] for r in caplog.records if r.levelno == logging.WARNING
    ]


def test_the_lines_lost_while_failing_are_counted_per_failure(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Those of the write refused, and those while the file is not tried again."""
    log = StateChangeLog(tmp_path, 1, retry_s=3600.0)
    with caplog.at_level(logging.WARNING, logger="broker.state_change_log"):
        full = fill_disk(log)
        log.write_many("zookeeper_session", [{"state": "A"}, {"state": "B"}, {"state": "C"}])
        assert full.closed  # dropped: its buffer would hold every later line
        log.session_state("D")  # not tried: the retry is not due
        log.session_state("E")
        log._retry_at = 0.0
        log.session_state("F")  # written again
        fill_disk(log)
        log.session_state("G")
        log._retry_at = 0.0
        log.session_state("H")
    log.close()
    assert lost_counts(caplog) == [" up to 5 lines were lost", " up to 1 lines were lost"]
    assert states(tmp_path) == ["F", "H"]


def states(directory: Path) -> list[str]:
    return [json.loads(line)["state"] for line in (directory / FILE_NAME).read_text().split()]


def test_a_log_closed_while_failing_is_not_opened_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A broker's shutdown closes its log; a thread still writing after that (the retry
    due) opens no file and logs no error."""
    log = StateChangeLog(tmp_path, 1, retry_s=0.0)
    log.session_state("CONNECTED")
    fill_disk(log)
    log.session_state("LOST")
    log.close()
    log._retry_at = 0.0
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="broker.state_change_log"):
        log.session_state("AFTER CLOSE")
    assert caplog.records == []
    assert log._file is None
    assert states(tmp_path) == ["CONNECTED"]


def test_a_write_after_close_is_dropped_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = StateChangeLog(tmp_path, 1)
    log.session_state("CONNECTED")
    log.close()
    with caplog.at_level(logging.WARNING, logger="broker.state_change_log"):
        log.session_state("AFTER CLOSE")
    assert caplog.records == []
    assert states(tmp_path) == ["CONNECTED"]


def test_a_log_that_cannot_be_opened_again_after_a_rotation_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Renamed from outside, and the new file refused (a failing disk): the lines are
    lost until the retry, then written, not lost for good; the renamed file is let go."""
    log = StateChangeLog(tmp_path, 1, retry_s=3600.0)
    log.session_state("CONNECTED")
    renamed = log._file
    (tmp_path / FILE_NAME).rename(tmp_path / f"{FILE_NAME}.1")

    def refused() -> Any:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    with monkeypatch.context() as m:
        m.setattr(log, "_open_file", refused)
        log.session_state("LOST")
    assert renamed is not None
    assert renamed.closed
    log._retry_at = 0.0
    log.session_state("CONNECTED")
    log.close()
    assert states(tmp_path) == ["CONNECTED"]
    rolled = (tmp_path / f"{FILE_NAME}.1").read_text().splitlines()
    assert [json.loads(line)["state"] for line in rolled] == ["CONNECTED"]


def test_a_rotated_log_is_let_go(tmp_path: Path) -> None:
    log = StateChangeLog(tmp_path, 1)
    log.session_state("CONNECTED")
    renamed = log._file
    (tmp_path / FILE_NAME).rename(tmp_path / f"{FILE_NAME}.1")
    log.session_state("LOST")
    log.close()
    assert renamed is not None
    assert renamed.closed


def test_a_failure_is_reported_once_while_it_lasts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The file opens again but every write still fails: one error, not one per write."""
    log = StateChangeLog(tmp_path, 1, retry_s=0.0)
    with caplog.at_level(logging.WARNING, logger="broker.state_change_log"):
        fill_disk(log)
        with monkeypatch.context() as m:
            m.setattr(log, "_open", FullDisk)  # opened, but the disk is still full
            for _ in range(3):
                log.session_state("LOST")
        log.session_state("BACK")
    log.close()
    assert [r.levelno for r in caplog.records] == [logging.ERROR, logging.WARNING]
    assert lost_counts(caplog) == [" up to 3 lines were lost"]
    assert states(tmp_path) == ["BACK"]


def test_a_file_that_cannot_be_opened_is_tried_once_per_retry_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = StateChangeLog(tmp_path, 1, retry_s=3600.0)
    fill_disk(log)
    log.session_state("LOST")
    tries: list[int] = []

    def refused() -> Any:
        tries.append(1)
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    with monkeypatch.context() as m:
        m.setattr(log, "_open", refused)
        log._retry_at = 0.0  # due: tried, refused, and not again before retry_s
        for _ in range(3):
            log.session_state("LOST")
    log.close()
    assert len(tries) == 1


def test_a_start_on_a_full_disk_loses_no_line_before_the_first_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The torn line could not be ended at start-up: the lines lost are those written
    while the file was not tried again, none for the start itself."""
    (tmp_path / FILE_NAME).write_text('{"ts":1,"v":1,"br')

    def cannot_end(self: StateChangeLog, file: Any, stat: os.stat_result) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with caplog.at_level(logging.WARNING, logger="broker.state_change_log"):
        with monkeypatch.context() as m:
            m.setattr(StateChangeLog, "_end_torn_line", cannot_end)
            log = StateChangeLog(tmp_path, 1, retry_s=3600.0)
        log.session_state("LOST")  # not tried before retry_s
        log._retry_at = 0.0
        log.session_state("BACK")
    log.close()
    assert lost_counts(caplog) == [" up to 1 lines were lost"]
    torn, *written = (tmp_path / FILE_NAME).read_text().splitlines()
    assert torn == '{"ts":1,"v":1,"br'  # ended by the retry, on a line of its own
    assert [json.loads(line)["state"] for line in written] == ["BACK"]
