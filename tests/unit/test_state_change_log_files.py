"""The state-change log's files: a torn tail left by an earlier process, rotation from
outside, the hourly roll Kafka's log4j config makes (DailyRollingFileAppender, DatePattern
'.'yyyy-MM-dd-HH), and the readers that follow the files across rolls."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from broker.state_change_log import (
    FILE_NAME,
    LogReader,
    PartitionStateRow,
    StateChangeLog,
    log_files,
    rolled_files,
)
from cluster.demo import LogFollower
from cluster.supervised import SupervisedBroker
from pipeline.inputs import LogSource, resolve
from pipeline.schema import classify_line

HOUR = time.mktime((2027, 1, 5, 10, 0, 0, 0, 0, -1))  # 10:00 local time


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def events(path: Path) -> list[str]:
    return [json.loads(line)["event"] for line in path.read_text().splitlines()]


def test_the_first_line_after_a_restart_survives_a_torn_tail(tmp_path: Path) -> None:
    """A broker killed (SIGKILL, or a full disk, then a restart) in the middle of a write
    left a torn piece without its newline: the new process's first line was glued onto
    it, and the analytics dropped both as one malformed line."""
    path = tmp_path / FILE_NAME
    path.write_text('{"ts":1,"v":1,"broker":1,"event":"controller_elected"}\n{"ts":2,"v":1,"bro')
    log = StateChangeLog(tmp_path, 1)  # the broker restarted
    log.broker_registered(77, "h", 9092)
    log.close()
    lines = path.read_text().splitlines()
    assert [classify_line(line).status for line in lines] == ["invalid", "malformed", "ok"]
    assert json.loads(lines[-1])["event"] == "broker_registered"


def test_a_renamed_log_is_reopened(tmp_path: Path) -> None:
    """A logrotate-style rename: the lines after it go to a new state-change.log, not on
    into the renamed file (which the broker kept open for its whole life)."""
    log = StateChangeLog(tmp_path, 1)
    log.session_state("CONNECTED")
    (tmp_path / FILE_NAME).rename(tmp_path / f"{FILE_NAME}.1")
    for _ in range(3):
        log.session_state("SUSPENDED")
    (tmp_path / FILE_NAME).unlink()  # removed: made again
    log.session_state("LOST")
    log.close()
    assert events(tmp_path / f"{FILE_NAME}.1") == ["zookeeper_session"]
    assert [json.loads(line)["state"] for line in (tmp_path / FILE_NAME).read_text().split()] == [
        "LOST"
    ]


def test_the_log_rolls_hourly_as_kafkas_log4j_config_does(tmp_path: Path) -> None:
    clock = Clock(HOUR + 10)
    log = StateChangeLog(tmp_path, 1, hourly=True)
    log._clock = clock
    log._start_period(clock.t)
    log.session_state("CONNECTED")
    clock.t = HOUR + 3599
    log.session_state("SUSPENDED")
    clock.t = HOUR + 3600  # 11:00: the 10:00 file is rolled at the first write
    log.session_state("LOST")
    log.session_state("CONNECTED")
    clock.t = HOUR + 3 * 3600 + 5  # hours without a line: one roll, named after 11:00
    log.session_state("CLOSED")
    log.close()
    assert [p.name for p in log_files(tmp_path)] == [
        f"{FILE_NAME}.2027-01-05-10",
        f"{FILE_NAME}.2027-01-05-11",
        FILE_NAME,
    ]
    states = [
        [json.loads(line)["state"] for line in p.read_text().splitlines()]
        for p in log_files(tmp_path)
    ]
    assert states == [["CONNECTED", "SUSPENDED"], ["LOST", "CONNECTED"], ["CLOSED"]]


def test_a_roll_never_overwrites_a_rolled_file(tmp_path: Path) -> None:
    """The same hour rolled twice (a clock set back): the second gets .1, nothing is lost."""
    (tmp_path / f"{FILE_NAME}.2027-01-05-10").write_text("earlier\n")
    clock = Clock(HOUR + 10)
    log = StateChangeLog(tmp_path, 1, hourly=True)
    log._clock = clock
    log._start_period(clock.t)
    log.session_state("CONNECTED")
    clock.t = HOUR + 3600
    log.session_state("LOST")
    log.close()
    assert [p.name for p in log_files(tmp_path)] == [
        f"{FILE_NAME}.2027-01-05-10",
        f"{FILE_NAME}.2027-01-05-10.1",
        FILE_NAME,
    ]
    assert (tmp_path / f"{FILE_NAME}.2027-01-05-10").read_text() == "earlier\n"


def test_a_file_left_by_an_earlier_run_rolls_after_its_own_hour(tmp_path: Path) -> None:
    """As log4j's appender: the file found at start-up belongs to the hour it was last
    written in."""
    path = tmp_path / FILE_NAME
    path.write_text('{"ts":1,"v":1,"broker":1,"event":"broker_registered"}\n')
    now = time.time()
    os.utime(path, (now - 2 * 3600, now - 2 * 3600))
    log = StateChangeLog(tmp_path, 1, hourly=True)
    log.session_state("CONNECTED")
    log.close()
    suffix = time.strftime("%Y-%m-%d-%H", time.localtime(now - 2 * 3600))
    assert [p.name for p in log_files(tmp_path)] == [f"{FILE_NAME}.{suffix}", FILE_NAME]
    assert events(tmp_path / FILE_NAME) == ["zookeeper_session"]


def test_a_torn_file_left_by_an_earlier_run_rolls_after_its_own_hour(tmp_path: Path) -> None:
    """The newline that ends a torn last line was written before the file's hour was read
    from its mtime, which it made now: the crashed run's file was not rolled at the first
    write, and later rolled under the new run's hour."""
    path = tmp_path / FILE_NAME
    path.write_text('{"ts":1,"v":1,"broker":1,"event":"broker_registered"}\n{"ts":2,"v"')
    then = time.time() - 3 * 3600
    os.utime(path, (then, then))
    log = StateChangeLog(tmp_path, 1, hourly=True)
    log.session_state("CONNECTED")
    log.close()
    suffix = time.strftime("%Y-%m-%d-%H", time.localtime(then))
    assert [p.name for p in log_files(tmp_path)] == [f"{FILE_NAME}.{suffix}", FILE_NAME]
    assert events(tmp_path / FILE_NAME) == ["zookeeper_session"]


def rolling_log(tmp_path: Path) -> tuple[StateChangeLog, Clock]:
    clock = Clock(HOUR + 10)
    log = StateChangeLog(tmp_path, 1, hourly=True)
    log._clock = clock
    log._start_period(clock.t)
    return log, clock


def test_the_reader_follows_the_files_across_rolls_and_rotations(tmp_path: Path) -> None:
    log, clock = rolling_log(tmp_path)
    reader = LogReader(tmp_path)
    assert reader.read_new() == []
    log.session_state("CONNECTED")
    with open(tmp_path / FILE_NAME, "a") as f:  # a line still being written
        f.write('{"ts":3,')
    assert [json.loads(line)["state"] for line in reader.read_new()] == ["CONNECTED"]
    with open(tmp_path / FILE_NAME, "a") as f:
        f.write('"v":1,"broker":1,"event":"zookeeper_session","state":"X"}\n')
    clock.t = HOUR + 3600
    log.session_state("LOST")  # rolled: the rest of the old file, then the new one
    (tmp_path / FILE_NAME).rename(tmp_path / f"{FILE_NAME}.moved")  # and rotated
    log.session_state("CLOSED")
    log.close()
    assert [json.loads(line)["state"] for line in reader.read_new()] == ["X", "LOST", "CLOSED"]
    assert reader.read_new() == []
    # A new reader reads every file, in the order written.
    assert [json.loads(line)["state"] for line in LogReader(tmp_path).read_new()] == [
        "CONNECTED",
        "X",
        "LOST",
        "CLOSED",
    ]


def test_a_supervised_brokers_state_changes_include_the_rolled_files(tmp_path: Path) -> None:
    broker = SupervisedBroker(1, tmp_path, "127.0.0.1:1")
    log, clock = rolling_log(broker.first_log_dir)
    log.session_state("CONNECTED")
    assert [r["state"] for r in broker.state_changes("zookeeper_session")] == ["CONNECTED"]
    clock.t = HOUR + 3600
    log.session_state("LOST")
    log.broker_registered(5, "h", 1)
    log.close()
    assert len(log_files(broker.first_log_dir)) == 2
    assert [r["state"] for r in broker.state_changes("zookeeper_session")] == ["CONNECTED", "LOST"]
    assert [r["event"] for r in broker.state_changes()] == [
        "zookeeper_session",
        "zookeeper_session",
        "broker_registered",
    ]


def test_the_demo_follows_the_logs_across_rolls(tmp_path: Path) -> None:
    noted: list[str] = []
    follower = LogFollower([tmp_path], lambda text, ts: noted.append(text))
    log, clock = rolling_log(tmp_path)
    log.controller_resigned(1, "controller moved")
    follower.flush()
    clock.t = HOUR + 3600
    log.controller_resigned(2, "session expired")
    log.close()
    follower.flush()
    assert len(log_files(tmp_path)) == 2
    assert len(noted) == 2, noted


def test_the_report_reads_the_rolled_files(tmp_path: Path) -> None:
    log, clock = rolling_log(tmp_path / "broker-1")
    log.controller_elected(1, 0)
    clock.t = HOUR + 3600
    log.controller_elected(2, 1)
    log.close()
    files = resolve(LogSource("c", str(tmp_path))).files
    assert sorted(Path(f).name for f in files) == [FILE_NAME, f"{FILE_NAME}.2027-01-05-10"]


def states(path: Path) -> list[str]:
    return [json.loads(line)["state"] for line in path.read_text().splitlines()]


def test_rolled_files_are_listed_in_the_order_written_and_only_plain_files(
    tmp_path: Path,
) -> None:
    """Second rolls of an hour by number (.10 after .2), the compressed ones and anything
    not a file left out."""
    names = ["2027-01-05-10.10", "2027-01-05-10", "2027-01-05-10.2", "2027-01-05-09"]
    for name in names:
        (tmp_path / f"{FILE_NAME}.{name}").write_text("x\n")
    (tmp_path / f"{FILE_NAME}.2027-01-05-08.gz").write_bytes(b"\x1f\x8b")
    (tmp_path / f"{FILE_NAME}.2027-01-05-11").mkdir()
    (tmp_path / FILE_NAME).write_text("x\n")
    expected = ["2027-01-05-09", "2027-01-05-10", "2027-01-05-10.2", "2027-01-05-10.10"]
    assert [p.name for p in rolled_files(tmp_path)] == [f"{FILE_NAME}.{n}" for n in expected]
    assert [p.name for p in log_files(tmp_path)][-1] == FILE_NAME


def test_the_reader_reads_every_file_again_when_one_it_read_is_gone(tmp_path: Path) -> None:
    log, clock = rolling_log(tmp_path)
    log.session_state("CONNECTED")
    clock.t = HOUR + 3600
    log.session_state("SUSPENDED")  # rolled: two files
    reader = LogReader(tmp_path)

    def read() -> tuple[list[str], bool]:
        return [json.loads(line)["state"] for line in reader.read_new()], reader.restarted

    assert read() == (["CONNECTED", "SUSPENDED"], False)
    # Moved out of the directory (kept, so that the new file cannot reuse its inode).
    (tmp_path / FILE_NAME).rename(tmp_path.parent / f"{tmp_path.name}-moved.log")
    log.session_state("LOST")
    log.close()
    assert read() == (["CONNECTED", "LOST"], True)
    assert read() == ([], False)  # restarted: by the last read only


def test_the_reader_reads_a_file_truncated_in_place_from_its_start(tmp_path: Path) -> None:
    """logrotate's copytruncate: the same file, shorter than what was read of it."""
    log = StateChangeLog(tmp_path, 1)
    log.session_state("CONNECTED")
    log.session_state("SUSPENDED")
    reader = LogReader(tmp_path)
    assert len(reader.read_new()) == 2
    os.truncate(tmp_path / FILE_NAME, 0)
    log.session_state("LOST")
    log.close()
    assert [json.loads(line)["state"] for line in reader.read_new()] == ["LOST"]
    assert not reader.restarted


def test_a_log_rotated_with_a_new_file_made_for_it_writes_into_that_file(tmp_path: Path) -> None:
    """logrotate's `create`: the file renamed and an empty one made in its place."""
    log = StateChangeLog(tmp_path, 1)
    log.session_state("CONNECTED")
    (tmp_path / FILE_NAME).rename(tmp_path / f"{FILE_NAME}.1")
    (tmp_path / FILE_NAME).touch()
    log.session_state("LOST")
    log.close()
    assert states(tmp_path / f"{FILE_NAME}.1") == ["CONNECTED"]
    assert states(tmp_path / FILE_NAME) == ["LOST"]


def test_the_hours_roll_renames_only_its_own_file(tmp_path: Path) -> None:
    """The file rotated from outside (and an empty one made in its place) within the hour:
    the hour's lines are in the rotated file; the roll gives the hour's name to no other."""
    log, clock = rolling_log(tmp_path)
    log.session_state("CONNECTED")
    (tmp_path / FILE_NAME).rename(tmp_path / f"{FILE_NAME}.1")
    (tmp_path / FILE_NAME).touch()
    clock.t = HOUR + 3600
    log.session_state("LOST")
    log.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [FILE_NAME, f"{FILE_NAME}.1"]
    assert states(tmp_path / FILE_NAME) == ["LOST"]


def test_the_hours_roll_of_a_file_removed_from_outside_begins_a_new_one(tmp_path: Path) -> None:
    log, clock = rolling_log(tmp_path)
    log.session_state("CONNECTED")
    (tmp_path / FILE_NAME).unlink()
    clock.t = HOUR + 3600
    log.session_state("LOST")  # not lost
    log.session_state("CLOSED")
    log.close()
    assert [p.name for p in tmp_path.iterdir()] == [FILE_NAME]
    assert states(tmp_path / FILE_NAME) == ["LOST", "CLOSED"]


def test_a_write_of_no_lines_does_not_roll(tmp_path: Path) -> None:
    """As log4j rolls at an appended event: an empty batch appends none."""
    log, clock = rolling_log(tmp_path)
    log.session_state("CONNECTED")
    clock.t = HOUR + 3600
    log.partition_states(1, [])
    log.leader_and_isr([])
    log.write_many("isr_change", [])
    assert [p.name for p in tmp_path.iterdir()] == [FILE_NAME]
    log.partition_states(1, [PartitionStateRow("t", 0, 1, 1, [1], "new", [1], 0)])
    log.close()
    assert [p.name for p in log_files(tmp_path)] == [f"{FILE_NAME}.2027-01-05-10", FILE_NAME]


def test_an_empty_file_replaced_is_no_restart(tmp_path: Path) -> None:
    """Nothing was read from it: nothing the caller kept is stale."""
    (tmp_path / f"{FILE_NAME}.2027-01-05-10").write_text('{"state":"A"}\n')
    (tmp_path / FILE_NAME).touch()
    reader = LogReader(tmp_path)
    assert reader.read_new() == [b'{"state":"A"}']
    (tmp_path / FILE_NAME).rename(tmp_path.parent / f"{tmp_path.name}-moved.log")
    (tmp_path / FILE_NAME).write_text('{"state":"B"}\n')
    assert (reader.read_new(), reader.restarted) == ([b'{"state":"B"}'], False)


def test_the_reader_reads_the_rolled_files_when_there_is_no_current_one(tmp_path: Path) -> None:
    """Between a roll's rename and the next line, say: only rolled files."""
    (tmp_path / f"{FILE_NAME}.2027-01-05-10").write_text('{"state":"A"}\n')
    (tmp_path / f"{FILE_NAME}.2027-01-05-11").write_text('{"state":"B"}\n')
    assert LogReader(tmp_path).read_new() == [b'{"state":"A"}', b'{"state":"B"}']
