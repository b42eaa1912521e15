"""The analytics over a bounce the real controller handled (over the in-memory ZooKeeper):
a broker that was the sole ISR member of the partition it led restarts; the controller
takes it offline and elects its new incarnation in the same event. The partition is
unavailable for those few milliseconds, not until the end of the logs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from broker.state_change_log import LeaderAndIsrRow, StateChangeLog
from controller import events as ev
from pipeline import control, partitions, schema
from tests.unit import fake_cluster
from zkdata.znodes import LeaderAndIsr


def controller_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    logdir = tmp_path / "broker-1"
    monkeypatch.setattr(fake_cluster, "StateChangeLog", lambda _d, b: StateChangeLog(logdir, b))
    data = fake_cluster.ZooKeeperData(brokers=(1, 2, 3))
    # t-0 on (2, 3), led by 2, ISR (2,): 3 fell behind.
    data.topic("t", {0: (2, 3)}, {0: LeaderAndIsr(2, 0, (2,), 0)})
    with fake_cluster.Controller(data) as c:
        c.elect()
        data.unregister(2)
        data.register(2)  # the same id, a new czxid: bounced
        c.run(ev.BrokerChange())
        c.drain()
        c.controller.state_log.close()
    text = (logdir / "state-change.log").read_text()
    return [json.loads(x) for x in text.splitlines()]


def walker_rows(lines: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What pipeline.job._walk_partitions selects, in its order."""
    out = []
    for i, d in enumerate(lines):
        rec = schema.classify_line(json.dumps(d)).record
        assert rec is not None
        kind = rec["event"]
        if kind == "partition_state":
            rank = partitions.RANK_STATE
        elif kind == "leader_and_isr" and rec["result"] == "applied":
            rank = partitions.RANK_APPLIED
        else:
            continue
        state = kind == "partition_state"
        out.append(
            (
                "c",
                rec["topic"],
                rec["partition"],
                rec["leader_epoch"],
                rank,
                rec["zk_version"] if state else None,
                rec["ts"],
                rec["broker"],
                rec["leader"],
                rec["isr"],
                rec["replicas"],
                rec["controller_epoch"] if state else None,
                rec["reason"] if state else None,
                i,
                0,
                (rec["why"] or "").endswith(partitions.FOUND_WRITTEN),
            )
        )
    return sorted(out, key=lambda r: (r[3], r[4], -1 if r[5] is None else r[5], r[6], r[7]))


def test_a_bounced_sole_isr_leader_elected_again_is_unavailable_only_briefly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = controller_log(tmp_path, monkeypatch)
    states = [d for d in lines if d["event"] == "partition_state"]
    assert [(d["leader"], d["reason"]) for d in states[-2:]] == [(-1, "offline"), (2, "offline")]
    assert any(d["event"] == "broker_change" and d["bounced"] == [2] for d in lines)
    last = states[-1]
    # The new incarnation applies the state 3 ms later; the logs go on for a minute.
    row = LeaderAndIsrRow(
        "t", 0, 2, last["leader_epoch"], last["isr"], last["replicas"], 1,
        last["controller_epoch"], "applied", None,
    )  # fmt: skip
    lines.append(
        {"ts": last["ts"] + 3, "v": 1, "broker": 2, "event": "leader_and_isr", **row._asdict()}
    )
    log_end = last["ts"] + 60_000
    lines.append(
        {"ts": log_end, "v": 1, "broker": 2, "event": "zookeeper_session", "state": "CONNECTED"}
    )
    records = [schema.classify_line(json.dumps(d)).record for d in lines]
    result = control.analyse([r for r in records if r and r["event"] in schema.CONTROL_EVENTS])
    [death] = result.deaths
    ctx = partitions.WalkContext(
        deaths={"c": {death.broker: [death]}},
        log_end={"c": log_end},
        deletions={"c": result.deletions},
        buckets={"c": (lines[0]["ts"], 1000, 100)},
        tol_ms=100,
    )
    out = list(partitions.walk(walker_rows(lines), ctx))
    windows = [
        dict(zip(partitions.WINDOW_FIELDS, w, strict=True))
        for tag, w in out
        if tag == "window" and w[3] == partitions.UNAVAILABLE
    ]
    # From the -1 decision (the first state logged: the partition's earlier history is
    # not) until the new incarnation applied its state. Was: open, to the end of the logs.
    assert [(w["start_ts"], w["end_ts"], w["open"]) for w in windows] == [
        (states[-2]["ts"], last["ts"] + 3, False)
    ]
