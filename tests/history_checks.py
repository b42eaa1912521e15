"""Safety checks over a cluster's history: every broker's state-change log, merged.

The fault tests (tests/integration/test_nemesis.py) run a cluster through a schedule of
real faults and then hand the logs here. Each check is a property that holds however the
faults fell, so a violation is a bug, never bad luck:

* one broker per controller epoch, and epochs elected in order (ZooKeeper's);
* a partition state is written only by the controller of the epoch it carries (fencing);
* every successful write to a partition's state znode has its own zkVersion (two writers
  never both won a conditional write), and as versions grow, leader epochs never go back
  and no controller's write lands after a newer controller's;
* one leader per leader epoch, whoever wrote or applied the state;
* each broker applies leader epochs (per partition) and controller epochs in order;
* what ZooKeeper holds at the end is not older than what the logs say was written.

A check that the logs are complete (no gap in zkVersions) is left out on purpose: a broker
killed between its write and its log line leaves one, and that is not a bug.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

Row = dict[str, Any]
Partition = tuple[str, int]


def check_history(
    rows: Iterable[Row], final_versions: Mapping[Partition, int] | None = None
) -> list[str]:
    """Every violation found in ``rows``, as sentences. ``rows``: every broker's lines, each
    broker's in its file's order (the brokers' files may simply be concatenated).

    ``final_versions``: each partition state znode's version in ZooKeeper at the end.
    """
    ordered = sorted(rows, key=lambda r: r["ts"])
    problems: list[str] = []
    elected = _elections(ordered, problems)
    _controller_writes(ordered, elected, problems)
    _write_versions(ordered, final_versions or {}, problems)
    _one_leader_per_epoch(ordered, problems)
    _applied_in_order(rows, elected, problems)
    return problems


def _tp(r: Row) -> Partition:
    return (r["topic"], r["partition"])


def _elections(ordered: list[Row], problems: list[str]) -> dict[int, Row]:
    elected: dict[int, Row] = {}
    for r in ordered:
        if r["event"] != "controller_elected":
            continue
        epoch = r["controller_epoch"]
        if epoch in elected:
            problems.append(
                f"controller epoch {epoch} elected twice: broker {elected[epoch]['broker']} "
                f"at {elected[epoch]['ts']} and broker {r['broker']} at {r['ts']}"
            )
            continue
        elected[epoch] = r
    # In ZooKeeper's order, not the lines' times: each election's conditional write moves
    # /controller_epoch's zkVersion on, so a newer epoch has a higher one. A term can be a
    # few ms long (an admin deletes /controller), and its controller may log its election
    # after the next one's.
    by_epoch = sorted(elected.items())
    for (older, a), (newer, b) in itertools.pairwise(by_epoch):
        if a["epoch_zk_version"] >= b["epoch_zk_version"]:
            problems.append(
                f"broker {b['broker']} elected with epoch {newer} at /controller_epoch version "
                f"{b['epoch_zk_version']}, not after epoch {older}'s version "
                f"{a['epoch_zk_version']} (broker {a['broker']})"
            )
    return elected


def _controller_writes(ordered: list[Row], elected: Mapping[int, Row], problems: list[str]) -> None:
    for r in ordered:
        if r["event"] != "partition_state":
            continue
        election = elected.get(r["controller_epoch"])
        if election is None or election["broker"] != r["broker"] or election["ts"] > r["ts"]:
            who = "nobody" if election is None else f"broker {election['broker']}"
            problems.append(
                f"broker {r['broker']} wrote {_tp(r)} with controller epoch "
                f"{r['controller_epoch']} at {r['ts']}, an epoch {who} was elected with"
                + ("" if election is None else f" at {election['ts']}")
            )


def _write_versions(
    ordered: list[Row], final_versions: Mapping[Partition, int], problems: list[str]
) -> None:
    by_version: dict[Partition, dict[int, Row]] = defaultdict(dict)
    for r in ordered:
        if r["event"] not in ("partition_state", "isr_change") or r.get("zk_version") is None:
            continue
        if r["event"] == "isr_change" and r["leader"] != r["broker"]:
            problems.append(
                f"broker {r['broker']} changed the ISR of {_tp(r)} led by {r['leader']}"
            )
        seen = by_version[_tp(r)]
        other = seen.get(r["zk_version"])
        if other is not None:
            problems.append(
                f"two writes of {_tp(r)} both got zkVersion {r['zk_version']}: "
                f"{_what(other)} and {_what(r)}"
            )
            continue
        seen[r["zk_version"]] = r
    for tp, seen in by_version.items():
        last_epoch, last = -1, None
        controller_epoch, controller_write = 0, None
        for version in sorted(seen):
            r = seen[version]
            if r["leader_epoch"] < last_epoch:
                problems.append(
                    f"{tp}'s leader epoch went back from {last_epoch} ({_what(last)}) to "
                    f"{r['leader_epoch']} ({_what(r)})"
                )
            last_epoch, last = r["leader_epoch"], r
            if r["event"] != "partition_state":
                continue
            # A controller's write landing after a newer controller's: fencing failed.
            if r["controller_epoch"] < controller_epoch:
                problems.append(
                    f"{tp} was written by controller epoch {r['controller_epoch']} at zkVersion "
                    f"{version}, after controller epoch {controller_epoch} had written it "
                    f"({_what(r)}; before it {_what(controller_write)})"
                )
            else:
                controller_epoch, controller_write = r["controller_epoch"], r
        final = final_versions.get(tp)
        if final is not None and max(seen) > final:
            problems.append(
                f"{tp} is at zkVersion {final} in ZooKeeper, yet a write of version "
                f"{max(seen)} was logged ({_what(seen[max(seen)])})"
            )


def _one_leader_per_epoch(ordered: list[Row], problems: list[str]) -> None:
    leaders: dict[tuple[Partition, int], Row] = {}
    for r in ordered:
        event = r["event"]
        if not (
            event in ("partition_state", "isr_change")
            or (event == "leader_and_isr" and r["result"] == "applied")
        ):
            continue
        key = (_tp(r), r["leader_epoch"])
        first = leaders.setdefault(key, r)
        if first["leader"] != r["leader"]:
            problems.append(
                f"{key[0]} has two leaders in leader epoch {key[1]}: {first['leader']} "
                f"({_what(first)}) and {r['leader']} ({_what(r)})"
            )


def _applied_in_order(rows: Iterable[Row], elected: Mapping[int, Row], problems: list[str]) -> None:
    """Per broker, in the order it wrote its lines (its own file's order, not time)."""
    by_broker: dict[int, list[Row]] = defaultdict(list)
    for r in rows:
        if r["event"] == "leader_and_isr" and r["result"] == "applied":
            by_broker[r["broker"]].append(r)
    for broker, applied in by_broker.items():
        controller_epoch = 0
        leader_epochs: dict[Partition, int] = {}
        for r in applied:
            election = elected.get(r["controller_epoch"])
            if election is None or election["broker"] != r["controller_id"]:
                problems.append(
                    f"broker {broker} applied {_tp(r)} from controller {r['controller_id']} "
                    f"with epoch {r['controller_epoch']}, which it was not elected with"
                )
            if r["controller_epoch"] < controller_epoch:
                problems.append(
                    f"broker {broker} applied {_tp(r)} from controller epoch "
                    f"{r['controller_epoch']} after one from epoch {controller_epoch}"
                )
            controller_epoch = max(controller_epoch, r["controller_epoch"])
            before = leader_epochs.get(_tp(r), -1)
            if r["leader_epoch"] < before:
                problems.append(
                    f"broker {broker} applied leader epoch {r['leader_epoch']} of {_tp(r)} "
                    f"after leader epoch {before}"
                )
            leader_epochs[_tp(r)] = max(before, r["leader_epoch"])


def _what(r: Row | None) -> str:
    if r is None:
        return "nothing"
    return (
        f"{r['event']} by broker {r['broker']} at {r['ts']}: leader {r.get('leader')}, "
        f"leader epoch {r.get('leader_epoch')}, ISR {r.get('isr')}, "
        f"controller epoch {r.get('controller_epoch')}"
    )
