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

A topic deleted and created again starts a new generation of each of its partitions'
history at its `topic_deleted` line: zkVersions and leader epochs start again at 0.

A check that the logs are complete (no gap in zkVersions) is left out on purpose: a broker
killed between its write and its log line leaves one, and that is not a bug.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from controller.state_machines import FOUND_WRITTEN

Row = dict[str, Any]
Partition = tuple[str, int]
# A partition's incarnation: its topic's deletions before the line.
Generation = tuple[str, int, int]


def check_history(
    rows: Iterable[Row], final_versions: Mapping[Partition, int] | None = None
) -> list[str]:
    """Every violation found in ``rows``, as sentences. ``rows``: every broker's lines, each
    broker's in its file's order (the brokers' files may simply be concatenated).

    ``final_versions``: each partition state znode's version in ZooKeeper at the end.
    """
    rows = list(rows)
    # A stable sort: one broker's lines of the same millisecond keep its file's order.
    ordered = sorted(rows, key=lambda r: r["ts"])
    problems: list[str] = []
    generations = _generations(ordered)
    elected = _elections(ordered, problems)
    _controller_writes(rows, ordered, elected, problems)
    _write_versions(ordered, generations, final_versions or {}, problems)
    _one_leader_per_epoch(ordered, generations, problems)
    _applied_in_order(rows, generations, elected, problems)
    return problems


def _tp(r: Row) -> Partition:
    return (r["topic"], r["partition"])


def _generations(ordered: list[Row]) -> dict[int, int]:
    """Each partition line's generation (by the row's id): how many deletions of its topic
    were logged before it. The controller logs `topic_deleted` once the topic's znodes are
    gone, so every write of the old topic is before it in its own file, and every write of
    a new topic of the same name after (the next creation is a later write); another
    broker's lines are placed by time, which a few ms of clock skew cannot confuse, a
    creation being well after a deletion."""
    deletions: dict[str, int] = defaultdict(int)
    generations: dict[int, int] = {}
    for r in ordered:
        if r["event"] == "topic_deleted":
            deletions[r["topic"]] += 1
        elif "topic" in r and "partition" in r:
            generations[id(r)] = deletions.get(r["topic"], 0)
    return generations


def _gen(r: Row, generations: Mapping[int, int]) -> Generation:
    return (r["topic"], r["partition"], generations.get(id(r), 0))


def _named(g: Generation) -> str:
    """A partition, and its incarnation if its topic was deleted before."""
    return f"{(g[0], g[1])}" + (f" (incarnation {g[2] + 1} of its topic)" if g[2] else "")


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


def _controller_writes(
    rows: list[Row], ordered: list[Row], elected: Mapping[int, Row], problems: list[str]
) -> None:
    """Each partition state written by the broker elected with its epoch, between its
    election and its resignation. Both ends are the writer's own lines, so they are taken
    in its file's order (``rows``), not by time; only a line of another broker is placed
    by its time (an election whose line the writer did not log)."""
    resigned: dict[int, Row] = {}  # by epoch: its controller's own resignation
    for r in rows:
        event = r["event"]
        if event == "controller_resigned":
            resigned.setdefault(r["controller_epoch"], r)
        elif event == "partition_state" and r.get("why") != FOUND_WRITTEN:
            # A write found landed after its answer was lost is logged when it is read
            # back, after the resignation its lost answer brought: it was sent before.
            done = resigned.get(r["controller_epoch"])
            if done is not None and done["broker"] == r["broker"]:
                problems.append(
                    f"broker {r['broker']} wrote {_tp(r)} with controller epoch "
                    f"{r['controller_epoch']} at {r['ts']}, after it resigned that epoch at "
                    f"{done['ts']} ({done['reason']}): a fenced controller's write landed"
                )
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
    ordered: list[Row],
    generations: Mapping[int, int],
    final_versions: Mapping[Partition, int],
    problems: list[str],
) -> None:
    by_version: dict[Generation, dict[int, Row]] = defaultdict(dict)
    for r in ordered:
        if r["event"] not in ("partition_state", "isr_change") or r.get("zk_version") is None:
            continue
        if r["event"] == "isr_change" and r["leader"] != r["broker"]:
            problems.append(
                f"broker {r['broker']} changed the ISR of {_tp(r)} led by {r['leader']}"
            )
        seen = by_version[_gen(r, generations)]
        other = seen.get(r["zk_version"])
        if other is not None:
            problems.append(
                f"two writes of {_named(_gen(r, generations))} both got zkVersion "
                f"{r['zk_version']}: "
                f"{_what(other)} and {_what(r)}"
            )
            continue
        seen[r["zk_version"]] = r
    latest = {(g[0], g[1]): g[2] for g in sorted(by_version)}
    for g, seen in by_version.items():
        tp = _named(g)
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
        # ZooKeeper holds the last incarnation's znode.
        final = final_versions.get((g[0], g[1])) if latest[(g[0], g[1])] == g[2] else None
        if final is not None and max(seen) > final:
            problems.append(
                f"{tp} is at zkVersion {final} in ZooKeeper, yet a write of version "
                f"{max(seen)} was logged ({_what(seen[max(seen)])})"
            )


def _one_leader_per_epoch(
    ordered: list[Row], generations: Mapping[int, int], problems: list[str]
) -> None:
    leaders: dict[tuple[Generation, int], Row] = {}
    for r in ordered:
        event = r["event"]
        if not (
            event in ("partition_state", "isr_change")
            or (event == "leader_and_isr" and r["result"] == "applied")
        ):
            continue
        key = (_gen(r, generations), r["leader_epoch"])
        first = leaders.setdefault(key, r)
        if first["leader"] != r["leader"]:
            problems.append(
                f"{_named(key[0])} has two leaders in leader epoch {key[1]}: {first['leader']} "
                f"({_what(first)}) and {r['leader']} ({_what(r)})"
            )


def _applied_in_order(
    rows: Iterable[Row],
    generations: Mapping[int, int],
    elected: Mapping[int, Row],
    problems: list[str],
) -> None:
    """Per broker, in the order it wrote its lines (its own file's order, not time)."""
    by_broker: dict[int, list[Row]] = defaultdict(list)
    for r in rows:
        if r["event"] == "leader_and_isr" and r["result"] == "applied":
            by_broker[r["broker"]].append(r)
    for broker, applied in by_broker.items():
        controller_epoch = 0
        leader_epochs: dict[Generation, int] = {}
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
            g = _gen(r, generations)
            before = leader_epochs.get(g, -1)
            if r["leader_epoch"] < before:
                problems.append(
                    f"broker {broker} applied leader epoch {r['leader_epoch']} of {_named(g)} "
                    f"after leader epoch {before}"
                )
            leader_epochs[g] = max(before, r["leader_epoch"])


def _what(r: Row | None) -> str:
    if r is None:
        return "nothing"
    return (
        f"{r['event']} by broker {r['broker']} at {r['ts']}: leader {r.get('leader')}, "
        f"leader epoch {r.get('leader_epoch')}, ISR {r.get('isr')}, "
        f"controller epoch {r.get('controller_epoch')}"
    )
