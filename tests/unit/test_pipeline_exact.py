"""`zkctl report` on a small hand-written log, every table compared with answers computed by
hand (below, with the reasoning), exactly: every row, every column.

The story (three brokers; broker 2's clock runs 3 ms ahead, broker 3's 2 ms behind; times
are ms after T0, as each broker logged them):

* Broker 1 is elected controller (epoch 1) and creates t-0 (replicas 1,2,3), t-1 (2,3,1)
  and u-0 (2,3; unclean election allowed). Broker 3 falls out of t-0's ISR at 2000 and
  is back at 2400; it falls out of u-0's ISR at 3003.
* Broker 2 is SIGKILLed. At 10000 the controller sees it dead: t-1 gets leader 3 (offline
  election), u-0 gets leader 3 although 3 is not in its ISR (unclean), and 2 leaves t-0's
  ISR. Broker 3 applies u-0 at 10000 by its clock, "before" the decision at 10001. Broker
  2 registers again at 14990, a request for its old incarnation is refused
  (STALE_BROKER_EPOCH), and it rejoins the ISRs.
* The controller (broker 1) is paused. Its session expires: broker 3 sees no controller at
  25999, broker 2 at 26003; broker 3 is elected (epoch 2) at 26006, moves t-0's
  leadership to 2 and drops 1 from t-1's ISR. At 30000 the zombie wakes, its request is
  refused (STALE_CONTROLLER_EPOCH), it learns its session is gone, resigns at 30004, and
  registers again.

And the damage a reader must survive: one partition_state and one controller_seen line
twice, a garbage line, a line of schema v2, an unknown event, a line missing a field, a
blank line and a torn last line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline import inputs, job, partitions, stats, testing

T0 = 1_700_000_000_000
TOL = 50
BUCKETS = 4
NAME = "hand"

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    with testing.shared_session() as session:
        yield session


def line(ts: int, broker: int, event: str, **fields: Any) -> str:
    return json.dumps({"ts": T0 + ts, "v": 1, "broker": broker, "event": event, **fields})


def ps(
    ts: int,
    topic: str,
    leader: int,
    epoch: int,
    isr: list[int],
    reps: list[int],
    cep: int,
    reason: str,
) -> str:
    return line(
        ts,
        1 if cep == 1 else 3,
        "partition_state",
        topic=topic[:-2],
        partition=int(topic[-1]),
        leader=leader,
        leader_epoch=epoch,
        isr=isr,
        replicas=reps,
        controller_epoch=cep,
        reason=reason,
    )


def lai(
    ts: int,
    broker: int,
    topic: str,
    leader: int,
    epoch: int,
    isr: list[int],
    reps: list[int],
    cid: int,
) -> str:
    return line(
        ts,
        broker,
        "leader_and_isr",
        topic=topic[:-2],
        partition=int(topic[-1]),
        leader=leader,
        leader_epoch=epoch,
        isr=isr,
        replicas=reps,
        controller_id=cid,
        controller_epoch=1 if cid == 1 else 2,
        result="applied",
    )


def isr(ts: int, broker: int, topic: str, epoch: int, isr_: list[int], zkv: int, why: str) -> str:
    return line(
        ts,
        broker,
        "isr_change",
        topic=topic[:-2],
        partition=int(topic[-1]),
        leader=broker,
        leader_epoch=epoch,
        isr=isr_,
        zk_version=zkv,
        why=why,
    )


def seen(ts: int, broker: int, controller: int) -> str:
    return line(ts, broker, "controller_seen", controller=controller, reason="controller changed")


def change(ts: int, broker: int, cep: int, new: list[int], dead: list[int], live: list[int]) -> str:
    return line(
        ts, broker, "broker_change", controller_epoch=cep, new=new, dead=dead, bounced=[], live=live
    )


def registered(ts: int, broker: int, epoch: int) -> str:
    return line(
        ts, broker, "broker_registered", broker_epoch=epoch, host="127.0.0.1", port=9090 + broker
    )


T1_DEAD = ps(10001, "t-1", 3, 1, [3, 1], [2, 3, 1], 1, "offline")
SEEN_NONE = seen(26003, 2, -1)
TORN = '{"ts":1700000031500,"v":1,"broker":3,"event":"isr_cha'
NEWER = json.dumps(
    {
        "ts": T0 + 31010,
        "v": 2,
        "broker": 2,
        "event": "leader_and_isr",
        "partitions": [{"topic": "t", "partition": 0}],
    }
)
UNKNOWN = line(31020, 2, "broker_fenced")
INVALID = line(
    31030,
    3,
    "partition_state",
    topic="t",
    partition=0,
    leader=3,
    leader_epoch=9,
    controller_epoch=2,
    reason="offline",
)  # no isr

# fmt: off
BROKER_1 = [
    registered(100, 1, 10),
    line(110, 1, "controller_elected", controller=1, controller_epoch=1, epoch_zk_version=1),
    line(130, 1, "controller_failover", controller_epoch=1, total_ms=20.0),
    ps(1000, "t-0", 1, 0, [1, 2, 3], [1, 2, 3], 1, "new"),
    ps(1000, "t-1", 2, 0, [2, 3, 1], [2, 3, 1], 1, "new"),
    ps(1000, "u-0", 2, 0, [2, 3], [2, 3], 1, "new"),
    lai(1002, 1, "t-0", 1, 0, [1, 2, 3], [1, 2, 3], 1),
    isr(2000, 1, "t-0", 0, [1, 2], 1, "replica 3 fell behind"),
    isr(2400, 1, "t-0", 0, [1, 2, 3], 2, "replica 3 caught up"),
    change(10000, 1, 1, [], [2], [1, 3]),
    T1_DEAD,
    T1_DEAD,  # the same line twice
    ps(10001, "u-0", 3, 1, [3], [2, 3], 1, "unclean"),
    ps(10002, "t-0", 1, 1, [1, 3], [1, 2, 3], 1, "offline"),
    lai(10004, 1, "t-0", 1, 1, [1, 3], [1, 2, 3], 1),
    change(15000, 1, 1, [2], [], [1, 2, 3]),
    isr(15500, 1, "t-0", 1, [1, 3, 2], 4, "replica 2 caught up"),
    "garbage",
    line(30003, 1, "zookeeper_session", state="LOST"),
    line(30004, 1, "controller_resigned", controller=1, controller_epoch=1,
         reason="session expired"),
    registered(30100, 1, 50),
    seen(30102, 1, 3),
]
BROKER_2 = [
    registered(103, 2, 11),
    seen(116, 2, 1),
    lai(1004, 2, "t-1", 2, 0, [2, 3, 1], [2, 3, 1], 1),
    lai(1004, 2, "u-0", 2, 0, [2, 3], [2, 3], 1),
    isr(3003, 2, "u-0", 0, [2], 1, "replica 3 fell behind"),
    registered(14990, 2, 40),
    seen(14992, 2, 1),
    line(14995, 2, "request_rejected", api="LEADER_AND_ISR", controller_id=1,
         controller_epoch=1, broker_epoch=11, error="STALE_BROKER_EPOCH"),
    lai(15010, 2, "t-1", 3, 1, [3, 1], [2, 3, 1], 1),  # as a follower: not a leader's line
    SEEN_NONE,
    SEEN_NONE,  # the same line twice
    seen(26013, 2, 3),
    lai(26016, 2, "t-0", 2, 2, [3, 2], [1, 2, 3], 3),
    line(30005, 2, "request_rejected", api="UPDATE_METADATA", controller_id=1,
         controller_epoch=1, broker_epoch=40, error="STALE_CONTROLLER_EPOCH"),
    isr(31003, 2, "t-0", 2, [3, 2, 1], 6, "replica 1 caught up"),
    NEWER,
    UNKNOWN,
    "",
]
BROKER_3 = [
    registered(98, 3, 12),
    seen(110, 3, 1),
    lai(1003, 3, "t-0", 1, 0, [1, 2, 3], [1, 2, 3], 1),  # a follower's
    lai(10000, 3, "u-0", 3, 1, [3], [2, 3], 1),  # its clock is behind the controller's
    lai(10003, 3, "t-1", 3, 1, [3, 1], [2, 3, 1], 1),
    isr(15300, 3, "t-1", 1, [3, 1, 2], 2, "replica 2 caught up"),
    isr(15400, 3, "u-0", 1, [3, 2], 3, "replica 2 caught up"),
    seen(25999, 3, -1),
    line(26006, 3, "controller_elected", controller=3, controller_epoch=2, epoch_zk_version=2),
    ps(26010, "t-0", 2, 2, [3, 2], [1, 2, 3], 2, "offline"),
    ps(26010, "t-1", 3, 2, [3, 2], [2, 3, 1], 2, "offline"),
    lai(26014, 3, "t-1", 3, 2, [3, 2], [2, 3, 1], 3),
    line(26015, 3, "controller_failover", controller_epoch=2, total_ms=9.0),
    change(30103, 3, 2, [1], [], [1, 2, 3]),
    isr(31098, 3, "t-1", 2, [3, 2, 1], 4, "replica 1 caught up"),
    INVALID,
]
# fmt: on


@pytest.fixture(scope="module")
def report(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Any]:
    root = tmp_path_factory.mktemp("hand")
    for broker, lines, tail in ((1, BROKER_1, ""), (2, BROKER_2, ""), (3, BROKER_3, TORN)):
        f = root / "logs" / f"broker-{broker}" / "data" / "state-change.log"
        f.parent.mkdir(parents=True)
        f.write_text("".join(x + "\n" for x in lines) + tail)
    out = root / "report"
    options = job.ReportOptions(
        sources=inputs.parse_log_args([f"{NAME}={root / 'logs'}"]),
        out=str(out),
        tol_ms=TOL,
        buckets=BUCKETS,
    )
    summary = job.run(options, lambda _t: None, spark=spark).summary
    return root / "logs", out, summary


def rows(spark: Any, out: Path, name: str) -> list[tuple[Any, ...]]:
    df = spark.read.parquet(str(out / name))
    return sorted(
        (tuple(r) for r in df.collect()), key=lambda r: tuple((x is None, str(x)) for x in r)
    )


def columns(spark: Any, out: Path, name: str) -> list[str]:
    return list(spark.read.parquet(str(out / name)).columns)


def sort(table: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(table, key=lambda r: tuple((x is None, str(x)) for x in r))


def test_lines_are_counted(report: tuple[Path, Path, Any]) -> None:
    _logs, _out, summary = report
    # 22 + 18 + 17 lines; ok counts the two repeats, which "duplicate" then names.
    assert summary["lines"] == {
        "ok": 51,
        "blank": 1,
        "torn": 1,
        "malformed": 1,
        "newer_version": 1,
        "unknown_event": 1,
        "invalid": 1,
        "duplicate": 2,
    }


def test_rejected_lines(spark: Any, report: tuple[Path, Path, Any]) -> None:
    logs, out, _summary = report

    def file(broker: int) -> str:
        return f"file:{logs}/broker-{broker}/data/state-change.log"

    assert columns(spark, out, "rejected_lines") == ["cluster", "file", "status", "detail", "line"]
    assert rows(spark, out, "rejected_lines") == sort(
        [
            (NAME, file(1), "malformed", None, "garbage"),
            (NAME, file(2), "newer_version", "v=2", NEWER),
            (NAME, file(2), "unknown_event", "broker_fenced", UNKNOWN),
            (NAME, file(3), "invalid", "isr", INVALID),
            (NAME, file(3), "torn", None, TORN),
        ]
    )


def test_tenures_and_gaps(spark: Any, report: tuple[Path, Path, Any]) -> None:
    _logs, out, _summary = report
    assert columns(spark, out, "tenures") == list(job.TENURE_FIELDS)
    # Epoch 1 ends at the first sign of its loss: broker 3 seeing no controller at 25999
    # (before broker 2's 26003, the election at 26006 and the resignation at 30004). It
    # resigned 30004 - 26006 = 3998 ms after its successor's election: a zombie.
    # fmt: off
    want = [
        (NAME, 1, 1, T0 + 110, T0 + 25999, 25889, False, "lost", T0 + 30004, "session expired",
         T0 + 130, 20.0, 3998),
        (NAME, 2, 3, T0 + 26006, None, None, True, "open", None, None, T0 + 26015, 9.0, None),
    ]
    # fmt: on
    assert rows(spark, out, "tenures") == sort(want)
    assert columns(spark, out, "controller_gaps") == list(job.GAP_FIELDS)
    assert rows(spark, out, "controller_gaps") == [(NAME, 1, 2, T0 + 25999, T0 + 26006, 7)]


def test_incidents(spark: Any, report: tuple[Path, Path, Any]) -> None:
    _logs, out, _summary = report
    # 1: broker 2 lost at 10000 (the controller's broker_change), back at 14990 (its own
    #    registration). t-1 (led again by 3 at 10003) and u-0 (at 10001: broker 3 applied
    #    at 10000 by its clock, which cannot precede the decision at 10001) lost their
    #    leader: 3 + 1 ms, all led again 3 ms after the loss. No new controller needed.
    # 2: controller 1 lost at 25999, broker 3 elected at 26006 (7 ms), its failover done at
    #    26015 (16 ms); t-0 led again by 2 at 26016 (17 ms). Broker 1 back at 30100.
    # fmt: off
    want = [
        (NAME, 1, "broker", 2, "deregistered", 1, T0 + 10000, T0 + 14990, None, None, None,
         None, 2, T0 + 10003, False, None, None, 3, 4),
        (NAME, 2, "controller", 1, "lost; came back as a zombie (session expired)", 1,
         T0 + 25999, T0 + 30100, 3, 2, T0 + 26006, T0 + 26015, 1, T0 + 26016, False, 7, 16,
         17, 17),
    ]
    # fmt: on
    assert columns(spark, out, "incidents") == list(stats.INCIDENT_FIELDS)
    assert rows(spark, out, "incidents") == sort(want)


def test_partition_windows(spark: Any, report: tuple[Path, Path, Any]) -> None:
    _logs, out, _summary = report
    u, r = "unavailable", "under_replicated"
    # t-0: ISR [1,2] 2000-2400; [1,3] 10002-15500; [3,2] 26010-31003. Leader 1 lost at
    #      25999 until leader 2 applied epoch 2 at 26016.
    # t-1: leader 2 lost at 10000 until leader 3 applied at 10003; ISR [3,1] 10001-15300;
    #      [3,2] 26010 to its expansion at 31098 (the last line of the logs).
    # u-0: leader 2 lost at 10000; the unclean leader's state holds from 10001. Its ISR is
    #      short from 3003 ([2]) through the unclean state ([3]) to 15400: one window.
    # Columns after the partition: kind, start, end, ms, open, incident, lost leader,
    # recovered leader, the reason of the decision that recovered it.
    # fmt: off
    want = [
        ("t", 0, u, 25999, 26016, 17, False, 2, 1, 2, "offline"),
        ("t", 0, r, 2000, 2400, 400, False, None, None, None, None),
        ("t", 0, r, 10002, 15500, 5498, False, None, None, None, None),
        ("t", 0, r, 26010, 31003, 4993, False, None, None, None, None),
        ("t", 1, u, 10000, 10003, 3, False, 1, 2, 3, "offline"),
        ("t", 1, r, 10001, 15300, 5299, False, None, None, None, None),
        ("t", 1, r, 26010, 31098, 5088, False, None, None, None, None),
        ("u", 0, u, 10000, 10001, 1, False, 1, 2, 3, "unclean"),
        ("u", 0, r, 3003, 15400, 12397, False, None, None, None, None),
    ]
    # fmt: on
    assert columns(spark, out, "partition_windows") == list(partitions.WINDOW_FIELDS)
    assert rows(spark, out, "partition_windows") == sort(
        [(NAME, t, p, kind, T0 + a, T0 + b, *rest) for t, p, kind, a, b, *rest in want]
    )


def test_partition_stats(spark: Any, report: tuple[Path, Path, Any]) -> None:
    _logs, out, _summary = report
    # Shrinks and expands compare each state's ISR with the one before: t-0 shrinks at
    # 2000, 10002, 26010 and expands at 2400, 15500, 31003; u-0's unclean state both
    # shrinks (2 left) and expands (3 joined). t-1's repeated line is a duplicate.
    assert columns(spark, out, "partition_stats") == list(partitions.STATS_FIELDS) == [
        "cluster", "topic", "partition", "generations", "states", "leader_changes",
        "isr_shrinks", "isr_expands", "unclean_elections", "unavailable_ms",
        "unavailable_windows", "open_unavailable", "under_replicated_ms",
        "under_replicated_windows", "final_leader", "final_leader_epoch", "final_isr",
        "replicas", "first_ts", "last_ts", "duplicates", "orphan_applied",
    ]  # fmt: skip
    # fmt: off
    want = [
        (NAME, "t", 0, 1, 7, 1, 3, 3, 0, 17, 1, False, 400 + 5498 + 4993, 3, 2, 2, [3, 2, 1],
         [1, 2, 3], T0 + 1000, T0 + 31003, 0, 0),
        (NAME, "t", 1, 1, 5, 1, 2, 2, 0, 3, 1, False, 5299 + 5088, 2, 3, 2, [3, 2, 1],
         [2, 3, 1], T0 + 1000, T0 + 31098, 1, 0),
        (NAME, "u", 0, 1, 4, 1, 2, 2, 1, 1, 1, False, 12397, 1, 3, 1, [3, 2], [2, 3],
         T0 + 1000, T0 + 15400, 0, 0),
    ]
    # fmt: on
    assert rows(spark, out, "partition_stats") == sort(want)


def test_fencing(spark: Any, report: tuple[Path, Path, Any]) -> None:
    _logs, out, _summary = report
    # fmt: off
    want = [
        (NAME, T0 + 14995, 2, "request_rejected", "LEADER_AND_ISR", 1, 1, 11,
         "STALE_BROKER_EPOCH", None, None, None),
        (NAME, T0 + 30005, 2, "request_rejected", "UPDATE_METADATA", 1, 1, 40,
         "STALE_CONTROLLER_EPOCH", None, None, None),
    ]
    # fmt: on
    assert columns(spark, out, "fencing") == list(job.FENCING_COLUMNS)
    assert rows(spark, out, "fencing") == sort(want)


def test_leader_balance(spark: Any, report: tuple[Path, Path, Any]) -> None:
    _logs, out, _summary = report
    # The logs span 98..31098: 31001 ms in 4 buckets of 8 s, ending at 8098, 16098, 24098,
    # 32098. Broker 1 leads t-0 (its preferred partition) until 26010; broker 2 leads t-1
    # and u-0 (both prefer it) until 10001, then broker 3 does, and t-0 from 26010.
    # Columns: bucket, end, broker, leaders, preferred, preferred led, imbalance %, leaders
    # minus preferred.
    want = [
        (0, 8098, 1, 1, 1, 1, 0.0, 0),
        (1, 16098, 1, 1, 1, 1, 0.0, 0),
        (2, 24098, 1, 1, 1, 1, 0.0, 0),
        (3, 32098, 1, 0, 1, 0, 100.0, -1),
        (0, 8098, 2, 2, 2, 2, 0.0, 0),
        (1, 16098, 2, 0, 2, 0, 100.0, -2),
        (2, 24098, 2, 0, 2, 0, 100.0, -2),
        (3, 32098, 2, 1, 2, 0, 100.0, -1),
        (0, 8098, 3, 0, 0, 0, None, 0),
        (1, 16098, 3, 2, 0, 0, None, 2),
        (2, 24098, 3, 2, 0, 0, None, 2),
        (3, 32098, 3, 2, 0, 0, None, 2),
    ]
    assert columns(spark, out, "leader_balance") == [
        "cluster",
        "bucket",
        "ts",
        "broker",
        "leaders",
        "preferred",
        "preferred_led",
        "imbalance_pct",
        "leaders_minus_preferred",
    ]
    assert rows(spark, out, "leader_balance") == sort(
        [(NAME, k, T0 + end, *rest) for k, end, *rest in want]
    )


def test_summary(report: tuple[Path, Path, Any]) -> None:
    _logs, out, summary = report
    assert json.loads((out / "summary.json").read_text()) == json.loads(json.dumps(summary))
    one = {"count": 1, "p50": 7, "p90": 7, "p99": 7, "max": 7, "mean": 7.0}
    done = {"count": 1, "p50": 16, "p90": 16, "p99": 16, "max": 16, "mean": 16.0}
    # Nearest rank over [3, 17]: p50 is the first, p90 and p99 the second.
    leaders = {"count": 2, "p50": 3, "p90": 17, "p99": 17, "max": 17, "mean": 10.0}
    want = {"to_new_controller": one, "to_failover_done": done, "to_all_leaders": leaders}
    assert summary["failover_latency_ms"] == want
    c = summary["clusters"][NAME]
    assert c["failover_latency_ms"] == want
    assert (c["first_ts"], c["last_ts"], c["span_s"]) == (T0 + 98, T0 + 31098, 31.0)
    assert c["controller"] == {
        "tenures": 2,
        "epochs": [1, 2],
        "end_reasons": {"lost": 1, "open": 1},
        "no_controller_ms": {
            "total": 7,
            **{"count": 1, "p50": 7, "p90": 7, "p99": 7, "max": 7, "mean": 7.0},
        },
        "zombies": 1,
        "anomalies": {},
    }
    assert c["incidents"] == {
        "total": 2,
        "controller": 1,
        "broker": 1,
        "with_leaderless_partitions": 2,
        "unrecovered": 0,
        "causes": {"deregistered": 1, "lost; came back as a zombie (session expired)": 1},
    }
    p = c["partitions"]
    assert {k: v for k, v in p.items() if not k.endswith("windows_ms")} == {
        "count": 3,
        "leader_changes": 3,
        "isr_shrinks": 7,
        "isr_expands": 7,
        "unclean_elections": 1,
        "partitions_unavailable": 3,
        "unavailable_ms": 21,
        "under_replicated_ms": 10891 + 10387 + 12397,
        "orphan_applied": 0,
    }
    # Window percentiles are Spark's approximate ones (exact on so few values).
    assert p["unavailability_windows_ms"] == {
        "count": 3,
        "p50": 3,
        "p90": 17,
        "p99": 17,
        "max": 17,
        "total_ms": 21,
        "open": 0,
    }
    assert p["under_replication_windows_ms"] == {
        "count": 6,
        "p50": 5088,
        "p90": 12397,
        "p99": 12397,
        "max": 12397,
        "total_ms": 33675,
        "open": 0,
    }
    assert c["fencing"] == {
        "request_rejected": {
            "LEADER_AND_ISR STALE_BROKER_EPOCH": 1,
            "UPDATE_METADATA STALE_CONTROLLER_EPOCH": 1,
        },
        "leader_and_isr_rejected": {},
        "total": 2,
        "stale": 2,
        "other_refusals": {},
    }


def test_the_page_shows_the_answers(report: tuple[Path, Path, Any]) -> None:
    _logs, out, _summary = report
    page = (out / "report.html").read_text()
    for text in (
        "7 ms",  # loss -> new controller, p50
        "17 ms",  # loss -> all partitions led, p90
        "lost; came back as a zombie (session expired)",
        "Failover latency",
        "Unavailability per partition",
        "Incidents",
    ):
        assert text in page, text
    # Epoch timeline, latency histograms, leader balance, unavailability per partition.
    assert page.count("<svg") >= 4
