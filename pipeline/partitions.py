"""One partition's history, walked in order (pure; no Spark).

`pipeline.job` shuffles every partition's rows to one place and sorts them by
(leader epoch, rank, zkVersion, time); `walk` then streams through them, one partition at
a time, holding only that partition's rows. The rows are:

* rank 0, the controller's `partition_state` (a decision it wrote to ZooKeeper);
* rank 1, the new leader's own `leader_and_isr` applied line for that leader epoch (when
  the leader actually took over: a join across brokers' logs by epoch), or its rejected
  line (reason `REFUSED`: it refused the leadership, e.g. REPLICA_NOT_AVAILABLE);
* rank 2, the leader's `isr_change` lines (same leader epoch, growing zkVersion).

Ordering by epoch and not by time is what makes clock skew harmless: a follower's clock a
few milliseconds ahead cannot put an ISR change before the decision it follows. Times are
then made monotone along that order (`eff_ts`, a running maximum). A generation is one
incarnation of the partition: a topic deleted and created again starts a new one, at its
deletion (`topic_deleted`) or its `new` state (`generations_of`), and each generation is
walked on its own, in that order.

Each state holds from its time to the next state's (the last to the topic's deletion or the
end of the logs: then the window is *open*). A partition is **unavailable** while its
leader is -1, or while its leader is a broker that was lost (from the loss, found in
`deaths`, to the next decision), or while its leader refused the state; the window ends
when a live leader applied its new state (a leader lost before it applied never did), or
when a lost leader back unseen, its state kept, applied it again (or registered again).
It is **under-replicated** while its ISR is smaller than its replica set (the `replicas`
field; for lines written before that field existed, every replica ever seen in an ISR).
States of a topic being deleted count as neither.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pipeline.control import Death

RANK_STATE = 0
RANK_APPLIED = 1
RANK_ISR = 2

# Positions in a walker row (what pipeline.job selects, in this order).
ROW_FIELDS = (
    "cluster",
    "topic",
    "partition",
    "leader_epoch",
    "rank",
    "zk_version",
    "ts",
    "broker",
    "leader",
    "isr",
    "replicas",
    "controller_epoch",
    "reason",
    "h1",
    "h2",
    "found",
)
(
    C_CLUSTER,
    C_TOPIC,
    C_PARTITION,
    C_EPOCH,
    C_RANK,
    C_ZKV,
    C_TS,
    C_BROKER,
    C_LEADER,
    C_ISR,
    C_REPLICAS,
    C_CEPOCH,
    C_REASON,
    C_H1,
    C_H2,
    C_FOUND,
) = range(len(ROW_FIELDS))
# The end of the `why` of a partition_state or isr_change line logged when its writer read
# back a write whose answer a lost connection took (docs/state-change-log.md): stamped when
# found, possibly after later writes of the partition were logged.
FOUND_WRITTEN = "found written, its answer lost"

UNAVAILABLE = "unavailable"
# Reasons of the controller's decisions that follow a broker's loss.
DEATH_REASONS = ("offline", "unclean")
SHUTDOWN_REASON = "controlled_shutdown"
UNDER_REPLICATED = "under_replicated"
# The reason of a rank-1 row that is the leader's refusal of its state (not its application).
REFUSED = "rejected"
_NEVER = float("inf")  # the return of a broker never seen back


@dataclass
class WalkContext:
    """What every partition's walk needs to know about its cluster (small; broadcast)."""

    deaths: dict[str, dict[int, list[Death]]] = field(default_factory=dict)
    log_end: dict[str, int] = field(default_factory=dict)
    deletions: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    # cluster -> (first ts, bucket width ms, bucket count) for leader balance
    buckets: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    tol_ms: int = 100
    _index: dict[tuple[str, int], tuple[list[int], list[float]]] = field(
        default_factory=dict, repr=False
    )

    def death_of(
        self, cluster: str, broker: int, start: int, end: int, slack: int = 0
    ) -> Death | None:
        """The loss of `broker` that voids a leadership held over [start, end], if any.

        The first loss not over by `start` (within the tolerance) that began by `end` (+
        `slack`: when the next state is the controller handling a loss, the loss may be
        logged by a clock a little ahead; minus the tolerance when the next state is the
        broker's controlled shutdown moving the leadership away, which comes before its
        loss): one in the interval, or one the broker was still in at `start` (a state
        naming a leader already lost: the controller had not handled that loss yet). A
        broker back within the tolerance of `start` is taken as back: the state at `start`
        elected its new incarnation. That covers a bounce (Kafka's processBrokerChange takes
        the broker offline and elects it again in one event, so its loss, its return and
        the state electing it are all within the tolerance), and the broker's own session
        loss and registration stamped just after by a clock ahead.
        """
        deaths = self.deaths.get(cluster, {}).get(broker)
        if not deaths:
            return None
        index = self._index.get((cluster, broker))
        if index is None:
            # A broker's losses are disjoint and in order, so their returns are too.
            index = self._index[(cluster, broker)] = (
                [d.lost_ts for d in deaths],
                [d.back_ts if d.back_ts is not None else _NEVER for d in deaths],
            )
        lost, back = index
        began = bisect.bisect_right(lost, end + slack)
        first = bisect.bisect_right(back, start + self.tol_ms)
        return deaths[first] if first < began else None


class State:
    __slots__ = (
        "applied",
        "applied_ts",
        "cepoch",
        "deleting",
        "isr",
        "leader",
        "leader_epoch",
        "reason",
        "refused",
        "replicas",
        "ts",
    )

    def __init__(
        self,
        ts: int,
        leader: int,
        leader_epoch: int,
        isr: Sequence[int],
        replicas: Sequence[int] | None,
        cepoch: int | None,
        reason: str,
        deleting: bool,
    ) -> None:
        self.ts = ts
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.isr = tuple(isr)
        self.replicas = tuple(replicas) if replicas is not None else None
        self.cepoch = cepoch
        self.reason = reason
        self.deleting = deleting
        self.applied_ts: int | None = None
        # Every applied line of its leader for its leader epoch (a leader back unseen, its
        # state kept, applies it again), shared with that epoch's ISR changes.
        self.applied: list[int] = []
        self.refused = False  # its leader refused it (and did not apply it)


@dataclass
class PartitionStats:
    cluster: str
    topic: str
    partition: int
    generations: int = 0
    states: int = 0
    leader_changes: int = 0
    isr_shrinks: int = 0
    isr_expands: int = 0
    unclean_elections: int = 0
    unavailable_ms: int = 0
    unavailable_windows: int = 0
    open_unavailable: bool = False
    under_replicated_ms: int = 0
    under_replicated_windows: int = 0
    final_leader: int | None = None
    final_leader_epoch: int | None = None
    final_isr: list[int] | None = None
    replicas: list[int] | None = None
    first_ts: int | None = None
    last_ts: int | None = None
    duplicates: int = 0
    orphan_applied: int = 0  # a leader's applied line with no decision to attach it to

    def as_tuple(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f) for f in self.__dataclass_fields__)


STATS_FIELDS = tuple(PartitionStats.__dataclass_fields__)

WINDOW_FIELDS = (
    "cluster",
    "topic",
    "partition",
    "kind",
    "start_ts",
    "end_ts",
    "duration_ms",
    "open",
    "incident_id",
    "lost_leader",
    "recovered_leader",
    "recovered_reason",
)


class _Windows:
    """Merges contiguous segments of one kind into windows."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.start: int | None = None
        self.end = 0
        self.open = False
        self.incident: int | None = None
        self.lost_leader: int | None = None
        self.done: list[tuple[Any, ...]] = []

    def add(
        self, start: int, end: int, *, open_: bool, incident: int | None, lost: int | None
    ) -> None:
        if self.start is not None and start <= self.end:
            self.end = max(self.end, end)
            self.open = open_
            if self.incident is None:
                self.incident = incident
            if self.lost_leader is None:
                self.lost_leader = lost
            return
        self.close(None, None)
        self.start, self.end, self.open = start, end, open_
        self.incident, self.lost_leader = incident, lost

    def close(self, end: int | None, by: State | None) -> None:
        """End the current window; `end` may extend it (a new leader applying late)."""
        if self.start is None:
            return
        if end is not None and not self.open:
            self.end = max(self.end, end)
        # Kept even at 0 ms: shorter than the logs' millisecond resolution, but it happened.
        if self.end >= self.start:
            self.done.append(
                (
                    self.kind,
                    self.start,
                    self.end,
                    self.end - self.start,
                    self.open,
                    self.incident,
                    self.lost_leader,
                    by.leader if by is not None else None,
                    by.reason if by is not None else None,
                )
            )
        self.start = None


def _states(rows: Sequence[Sequence[Any]], tol: int, stats: PartitionStats) -> list[State]:
    """One generation's states, with applied times attached and times made monotone."""
    states: list[State] = []
    replicas: Sequence[int] | None = None
    cepoch: int | None = None
    deleting = False
    last_ts: int | None = None
    # A write found landed was made before every line after it in the epoch order (each
    # written or applied after it): its stamp, when it was found, is at most theirs, so
    # a late finding does not move the later states' times.
    after: list[float] = [0.0] * len(rows)
    least = float("inf")
    for i in range(len(rows) - 1, -1, -1):
        after[i] = least
        least = min(least, rows[i][C_TS])
    for i, r in enumerate(rows):
        rank = r[C_RANK]
        ts = r[C_TS]
        if r[C_FOUND] and after[i] < ts:
            ts = int(after[i])
        if rank == RANK_APPLIED:
            s = states[-1] if states else None
            if (
                s is not None
                and s.leader_epoch == r[C_EPOCH]
                and s.leader == r[C_BROKER]
                and ts >= s.ts - tol
            ):
                if r[C_REASON] != REFUSED:
                    s.applied.append(ts)
                if r[C_REASON] == REFUSED:
                    s.refused = s.applied_ts is None
                elif s.applied_ts is None:
                    s.applied_ts = ts
                    s.refused = False
            elif r[C_REASON] != REFUSED:
                stats.orphan_applied += 1
            continue
        if last_ts is not None and ts < last_ts:
            ts = last_ts  # monotone along the epoch order
        last_ts = ts
        if r[C_REPLICAS] is not None:
            replicas = r[C_REPLICAS]
        if r[C_CEPOCH] is not None:
            cepoch = r[C_CEPOCH]
        reason = r[C_REASON] if rank == RANK_STATE else "isr_change"
        if reason == "deleted":
            deleting = True
        new = State(ts, r[C_LEADER], r[C_EPOCH], r[C_ISR], replicas, cepoch, reason, deleting)
        if (
            rank == RANK_ISR
            and states
            and (states[-1].leader_epoch, states[-1].leader) == (new.leader_epoch, new.leader)
        ):
            new.applied = states[-1].applied
        states.append(new)
    for s in states:
        if s.applied_ts is not None and s.applied_ts < s.ts:
            s.applied_ts = s.ts  # the leader's clock runs behind the controller's
    return states


def _fallback_replicas(states: Sequence[State]) -> tuple[int, ...]:
    seen: dict[int, None] = {}
    for s in states:
        for r in s.isr:
            seen.setdefault(r, None)
    return tuple(seen)


class BalanceDeltas:
    """Changes of per-broker counts, summed per time bucket: leaders led by each broker
    (-1: partitions without a leader), partitions preferring it (first replica), and those
    of them it leads. `pipeline.stats.leader_balance` turns the sums into counts over time."""

    def __init__(self, buckets: Mapping[str, tuple[int, int, int]]) -> None:
        self.buckets = buckets
        self.sums: dict[tuple[str, int, int], list[int]] = {}

    def add(self, cluster: str, ts: int, broker: int, what: int, delta: int) -> None:
        t0, width, n = self.buckets.get(cluster, (ts, 1, 1))
        k = min(max((ts - t0) // width, 0), n - 1)
        key = (cluster, broker, k)
        sums = self.sums.get(key)
        if sums is None:
            sums = self.sums[key] = [0, 0, 0]
        sums[what] += delta

    def run(self, cluster: str, ts: int, leader: int, preferred: int | None, sign: int) -> None:
        self.add(cluster, ts, leader, 0, sign)
        if preferred is not None:
            self.add(cluster, ts, preferred, 1, sign)
            if leader == preferred:
                self.add(cluster, ts, preferred, 2, sign)

    def rows(self) -> Iterator[tuple[str, int, int, int, int, int]]:
        for (cluster, broker, k), (dl, dp, dpl) in self.sums.items():
            if dl or dp or dpl:
                yield cluster, broker, k, dl, dp, dpl


def generations_of(
    rows: Sequence[Sequence[Any]], deletions: Iterable[int], tol: int
) -> list[tuple[list[Sequence[Any]], int | None]]:
    """One partition's rows (in the walker's order) split into its topic's incarnations.

    A topic deleted and created again starts its zkVersions and leader epochs again, so each
    incarnation is walked on its own. Its boundaries are the topic's deletions (the
    controller's `topic_deleted` lines) and each `new` state that no deletion precedes
    since the last `new` (the deletion's line missing from the logs). A `new` state stamped
    up to `tol` before a deletion follows it (a new controller's clock behind the old
    one's). Rows are given a generation by their stamp, except near a boundary (within
    `tol` of it), where their sequence decides:

    * a `new` state begins its incarnation, a `deleted` state ends the one deleted (it is
      before the deletion it belongs to);
    * a leader's line (its applied state, its ISR change) goes to the incarnation on
      either side of the boundary that has a decision of its leader epoch naming it leader
      (and, for an ISR change, a zkVersion below its own): the old one's sequence
      continued by a clock ahead, or the new one's begun by a clock behind. When both or
      neither have one, its stamp decides.

    Returns each generation's rows, in the order given, and where it ends: the boundary
    after it, or None (the last, open to the end of the logs).
    """
    news = sorted(r[C_TS] for r in rows if r[C_RANK] == RANK_STATE and r[C_REASON] == "new")
    dels = sorted(set(deletions))
    if not dels and len(news) <= 1:
        return [(list(rows), None)]
    # Boundaries (ts, is a deletion), found in order: a `new` state counts as if stamped
    # `tol` later, so that one logged a little before the deletion it follows is after it.
    events = sorted([(d, 0, d) for d in dels] + [(n + tol, 1, n) for n in news])
    bounds: list[tuple[int, bool]] = []
    has_new = False
    for _key, kind, ts in events:
        if kind == 0:
            bounds.append((ts, True))
            has_new = False
        else:
            if has_new:
                bounds.append((ts, False))
            has_new = True
    bounds.sort()
    bts = [b[0] for b in bounds]
    n = len(bounds)
    starts = {b: i + 1 for i, (b, is_del) in enumerate(bounds) if not is_del}

    def by_stamp(ts: int, dslack: int) -> int:
        """Segment of a time: boundaries at or before it (deletions `dslack` later)."""
        return sum(1 for b, is_del in bounds if (b + dslack if is_del else b) <= ts)

    seg: list[int] = []
    decisions: dict[tuple[int, int, int], list[int | None]] = {}  # (seg, epoch, leader)
    for r in rows:
        if r[C_RANK] != RANK_STATE:
            seg.append(-1)
            continue
        ts, reason = r[C_TS], r[C_REASON]
        if reason == "new":
            # Its own boundary if it is one; else after the deletions it follows.
            k = starts[ts] if ts in starts else by_stamp(ts, -tol)
        elif reason == "deleted":
            k = by_stamp(ts, tol + 1)
        else:
            k = by_stamp(ts, 0)
        seg.append(k)
        decisions.setdefault((k, r[C_EPOCH], r[C_LEADER]), []).append(r[C_ZKV])

    def fits(k: int, r: Sequence[Any]) -> bool:
        zkvs = decisions.get((k, r[C_EPOCH], r[C_LEADER]))
        if zkvs is None:
            return False
        z = r[C_ZKV] if r[C_RANK] == RANK_ISR else None
        return z is None or any(d is None or d < z for d in zkvs)

    out: list[list[Sequence[Any]]] = [[] for _ in range(n + 1)]
    for r, k in zip(rows, seg, strict=True):
        if k >= 0:
            out[k].append(r)
            continue
        ts = r[C_TS]
        g = bisect.bisect_right(bts, ts)
        near = [g]
        if g > 0 and ts - bts[g - 1] <= tol:
            near.append(g - 1)
        if g < n and bts[g] - ts <= tol:
            near.append(g + 1)
        if len(near) > 1:
            fit = [c for c in near if fits(c, r)]
            if len(fit) == 1:
                g = fit[0]
        out[g].append(r)
    return [(g, bts[k] if k < n else None) for k, g in enumerate(out) if g]


def walk_partition(
    cluster: str,
    topic: str,
    partition: int,
    rows: Sequence[Sequence[Any]],
    ctx: WalkContext,
    balance: BalanceDeltas,
) -> tuple[PartitionStats, list[tuple[Any, ...]]]:
    """Stats and windows of one partition from its sorted rows (every generation)."""
    tol = ctx.tol_ms
    stats = PartitionStats(cluster, topic, partition)
    seen: set[tuple[int, int]] = set()
    unique: list[Sequence[Any]] = []
    for r in rows:
        h = (r[C_H1], r[C_H2])
        if h in seen:
            stats.duplicates += 1
            continue
        seen.add(h)
        unique.append(r)
    log_end = ctx.log_end.get(cluster)
    gens = generations_of(unique, ctx.deletions.get(cluster, {}).get(topic, ()), tol)
    unavailable = _Windows(UNAVAILABLE)
    under = _Windows(UNDER_REPLICATED)
    generations = [(st, end) for st, end in ((_states(g, tol, stats), e) for g, e in gens) if st]
    for states, end in generations:
        stats.generations += 1
        stats.states += len(states)
        # Where this generation's last state ends: the boundary after it (its topic's
        # deletion, or the next incarnation's `new` state), or the end of the logs (open).
        last_ts = states[-1].ts
        gen_end: int
        gen_open = False
        if end is not None:
            gen_end = max(end, last_ts)
        else:
            gen_end = max(log_end if log_end is not None else last_ts, last_ts)
            gen_open = True
        fallback = _fallback_replicas(states)
        run: tuple[int, int | None] | None = None
        prev: State | None = None
        for i, s in enumerate(states):
            a = s.ts
            last = i + 1 == len(states)
            b = gen_end if last else states[i + 1].ts
            open_ = last and gen_open
            replicas = s.replicas if s.replicas is not None else fallback
            preferred = replicas[0] if replicas else None
            if stats.first_ts is None:
                stats.first_ts = a
            # Churn, against the previous state of this generation.
            if prev is not None:
                before, after = set(prev.isr), set(s.isr)
                if before - after:
                    stats.isr_shrinks += 1
                if after - before:
                    stats.isr_expands += 1
                if s.leader != prev.leader and s.leader >= 0:
                    stats.leader_changes += 1
            if s.reason == "unclean":
                stats.unclean_elections += 1
            # Availability: unavailable from `seg` (None: available throughout). A state
            # available at its start ends the running window once its leader applied it.
            seg: int | None = None
            back: int | None = None  # where a leader back unseen ended the window
            incident: int | None = None
            lost: int | None = None
            if s.deleting:
                pass
            elif s.leader < 0 or s.refused:
                seg = a  # no leader, or one that refused to lead
            else:
                nxt = None if last else states[i + 1]
                # Only a decision moving the leadership away handled this leader's loss:
                # one keeping it dropped another broker lost (a follower) from the ISR.
                handled = nxt is not None and nxt.reason in DEATH_REASONS and nxt.leader != s.leader
                # A controlled shutdown moves a broker's leaderships away before it goes:
                # its loss logged up to the tolerance before that move came after it, by
                # clocks behind the controller's.
                moved = nxt is not None and nxt.reason == SHUTDOWN_REASON and nxt.leader != s.leader
                slack = tol if handled else -tol if moved else 0
                death = ctx.death_of(cluster, s.leader, a, b, slack)
                if death is not None:
                    # Possibly empty here: the window then lasts until the next leader applied.
                    seg, incident, lost = min(max(a, death.lost_ts), b), death.incident_id, s.leader
                    if s.applied_ts is None and unavailable.start is not None:
                        # Lost before it applied the state: it never led, the running
                        # window goes on (its incident kept).
                        seg = a
                    elif death.back_ts is not None and death.back_ts < b:
                        # Back before the next decision, its state kept (no decision
                        # re-elected it: all sessions expired, or none to take over): it
                        # leads again once it applied that state again, or, logging
                        # nothing (its process lived on), at its registration. Not when
                        # the next decision handled its loss (a restart leads nothing).
                        again = [t for t in s.applied if t >= death.back_ts - tol]
                        if again and again[0] < b:
                            back = max(again[0], seg)
                        elif not again and not handled:
                            back = max(death.back_ts, seg)
            if seg is None or seg > a:
                unavailable.close(s.applied_ts if not s.deleting else None, s)
            if seg is not None and back is not None:
                unavailable.add(seg, back, open_=False, incident=incident, lost=lost)
                unavailable.close(None, s)
            elif seg is not None:
                unavailable.add(seg, b, open_=open_, incident=incident, lost=lost)
            if not s.deleting and len(s.isr) < len(replicas):
                under.add(a, b, open_=open_, incident=None, lost=None)
            else:
                under.close(None, None)
            # Leader balance: runs of one (leader, preferred replica).
            key = (s.leader, preferred)
            if key != run:
                if run is not None:
                    balance.run(cluster, a, run[0], run[1], -1)
                balance.run(cluster, a, s.leader, preferred, +1)
                run = key
            prev = s
        if run is not None and not gen_open:
            balance.run(cluster, gen_end, run[0], run[1], -1)
        unavailable.close(None, None)
        under.close(None, None)
        final = states[-1]
        stats.final_leader = final.leader
        stats.final_leader_epoch = final.leader_epoch
        stats.final_isr = list(final.isr)
        reps = final.replicas if final.replicas is not None else fallback
        stats.replicas = list(reps)
        stats.last_ts = final.ts
    windows = []
    for w in unavailable.done:
        stats.unavailable_windows += 1
        stats.unavailable_ms += w[3]
        stats.open_unavailable = stats.open_unavailable or w[4]
    for w in under.done:
        stats.under_replicated_windows += 1
        stats.under_replicated_ms += w[3]
    for w in unavailable.done + under.done:
        windows.append((cluster, topic, partition, *w))
    return stats, windows


def walk(rows: Iterable[Sequence[Any]], ctx: WalkContext) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """Tagged outputs for sorted rows of many partitions: ("stats", ...), ("window", ...),
    and at the end ("balance", ...) sums for this batch of partitions."""
    balance = BalanceDeltas(ctx.buckets)
    current: tuple[str, str, int] | None = None
    buf: list[Sequence[Any]] = []
    for r in rows:
        key = (r[C_CLUSTER], r[C_TOPIC], r[C_PARTITION])
        if key != current:
            if current is not None:
                yield from _emit(current, buf, ctx, balance)
            current, buf = key, []
        buf.append(r)
    if current is not None:
        yield from _emit(current, buf, ctx, balance)
    for b in balance.rows():
        yield "balance", b


def _emit(
    key: tuple[str, str, int],
    rows: list[Sequence[Any]],
    ctx: WalkContext,
    balance: BalanceDeltas,
) -> Iterator[tuple[str, tuple[Any, ...]]]:
    stats, windows = walk_partition(key[0], key[1], key[2], rows, ctx, balance)
    yield "stats", stats.as_tuple()
    for w in windows:
        yield "window", w
