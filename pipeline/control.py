"""The control plane of one cluster, from its control events (pure; no Spark).

Input: the cluster's `CONTROL_EVENTS` lines from every broker's log, as dicts of the fields
in `pipeline.schema.FIELDS`. They are few (a handful per failover, however many
partitions), so one cluster's fit in memory; `pipeline.job` runs `analyse` once per
cluster on Spark's executors.

What comes out, and how it is read from the logs:

* **Tenures.** A tenure starts at its `controller_elected` line. It ends at the earliest of:
  its controller's `controller_resigned`; the first time another broker saw the controller
  it believed in disappear (`controller_seen` -1, attributed to the tenure that broker's
  own previous sighting saw, so a late notice of an older loss never ends a newer tenure,
  even the same controller's next term); the
  election of the next epoch. `end_reason` says which. A controller that resigned after
  its successor was elected was a zombie: `overlap_ms` is how long it still believed
  itself controller.
* **Gaps**: from a tenure's end to the next election, the cluster had no controller.
* **Broker losses**: a broker is lost at its first loss evidence (its own session
  `LOST`/`CLOSED`, the controller's `broker_change` dead or bounced, or vanishing as
  controller) and back at its next registration evidence (`broker_registered`, or
  `broker_change` new or bounced). Later evidence within one loss is merged into it (its
  own session's end stamped within `tol_ms` after the controller's notice of its
  deregistration is still the cause: the session ends first), and
  so is a bounce that is the controller's late notice of a loss the broker logged and
  came back from (`losses_of`).
* **Incidents**: every tenure that ended is a controller incident (lost at the tenure's
  end; the new controller is the next tenure's); a broker loss that is not its
  controller incident's is a broker incident. `pipeline.partitions` attributes each
  partition's unavailability to the incident whose loss caused it (`deaths`).

Timestamps are the writers' clocks, which may disagree by a few milliseconds: `tol_ms`
is the disagreement tolerated where events of different brokers are compared.
"""

from __future__ import annotations

import bisect
import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

NO_CONTROLLER = -1
GRACEFUL_WINDOW_MS = 60_000  # a controlled_shutdown this soon before a loss makes it graceful
# Resignations of a broker that merely lost the controllership (it is alive): another
# controller's term began, or its own event failed (a bug: "error processing <event>:
# <type>") while its session lived on.
ALIVE_RESIGN_REASONS = ("controller moved", "fenced: another controller's epoch")
ALIVE_RESIGN_PREFIXES = ("error processing ",)
# ZooKeeper failed mid-event ("ZooKeeper error: <type>"): alive, unless the session had
# expired (then the broker was lost, its registration gone: a zombie when it resigns).
ZK_ERROR_RESIGN_PREFIX = "ZooKeeper error: "
SESSION_EXPIRED_ERRORS = ("SessionExpiredError",)


def resigned_alive(reason: str | None, session_ended: bool) -> bool:
    """Whether a controller's resignation with ``reason`` says its broker lived on, not
    lost (``session_ended``: it logged its session LOST or CLOSED between the end of its
    tenure and the resignation)."""
    if reason is None:
        return False
    if reason in ALIVE_RESIGN_REASONS or reason.startswith(ALIVE_RESIGN_PREFIXES):
        return True
    if reason.startswith(ZK_ERROR_RESIGN_PREFIX):
        error = reason[len(ZK_ERROR_RESIGN_PREFIX) :]
        return error not in SESSION_EXPIRED_ERRORS and not session_ended
    return False


@dataclass
class Tenure:
    epoch: int
    broker: int
    start_ts: int
    end_ts: int | None = None  # None: still controller when the logs end
    end_reason: str = "open"  # resigned, lost, superseded, open
    resigned_ts: int | None = None
    resign_reason: str | None = None
    failover_done_ts: int | None = None
    failover_ms: float | None = None
    overlap_ms: int | None = None  # a zombie: resigned this long after its successor's election


@dataclass(frozen=True)
class Gap:
    after_epoch: int
    before_epoch: int
    start_ts: int
    end_ts: int
    duration_ms: int


@dataclass
class Loss:
    broker: int
    lost_ts: int
    evidence: str
    back_ts: int | None = None
    incident_id: int = 0
    own: bool = False  # lost_ts is the broker's own stamp (its session's end), not another's
    # A bounce's: the broker's registration just before it that closed no loss, which it
    # reports (it came after the loss).
    reported_ts: int | None = None


@dataclass
class Incident:
    incident_id: int
    kind: str  # controller or broker
    broker: int
    lost_ts: int
    cause: str
    controller_epoch: int | None  # controller: the epoch lost; broker: the epoch at the loss
    back_ts: int | None = None
    new_controller: int | None = None
    new_epoch: int | None = None
    new_controller_ts: int | None = None
    failover_done_ts: int | None = None


@dataclass(frozen=True)
class Death:
    """A broker lost from `lost_ts` (back at `back_ts`), for partition windows."""

    broker: int
    lost_ts: int
    back_ts: int | None
    incident_id: int


@dataclass
class ControlResult:
    tenures: list[Tenure] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    incidents: list[Incident] = field(default_factory=list)
    deaths: list[Death] = field(default_factory=list)
    deletions: dict[str, list[int]] = field(default_factory=dict)  # topic -> deletion times
    anomalies: dict[str, int] = field(default_factory=dict)
    duplicates: int = 0
    events: int = 0


def _key(e: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(
        (k, tuple(v) if isinstance(v, list) else v) for k, v in sorted(e.items()) if v is not None
    )


# A broker's own lines of one millisecond, in the order it writes them: it registers,
# resigns, sees who the controller is, then is elected (after a -1, or a resignation).
# (Its election and a resignation of that term both end its belief: either order.)
_WRITE_ORDER = {
    "broker_registered": 0,
    "controller_resigned": 1,
    "controller_seen": 2,
    "controller_elected": 3,
}


def _order(e: Mapping[str, Any]) -> tuple[Any, ...]:
    """Where a line goes: by (ts, broker), then, for one writer's lines in one millisecond,
    as it writes them (`_WRITE_ORDER`; a sighting of no controller, -1 or -2, before one
    of a controller: a broker that saw /controller go logs its -1, then whom it lost the
    next election to), the rest by event and fields. Total, so the order is never the
    order the lines were read in (Spark's shuffle sets none)."""
    controller = e.get("controller")
    return (
        e["ts"],
        e["broker"],
        _WRITE_ORDER.get(e["event"], len(_WRITE_ORDER)),
        e["event"],
        -3 if controller is None else controller,
        repr(_key(e)),
    )


def dedupe(events: Iterable[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The events without exact repeats, in `_order`; and how many repeats."""
    seen: set[tuple[Any, ...]] = set()
    out: list[dict[str, Any]] = []
    duplicates = 0
    for e in events:
        k = _key(e)
        if k in seen:
            duplicates += 1
            continue
        seen.add(k)
        out.append(dict(e))
    out.sort(key=_order)
    return out, duplicates


def tenures_of(
    events: list[dict[str, Any]], tol_ms: int, anomalies: dict[str, int]
) -> list[Tenure]:
    """Controller tenures in epoch order (events sorted by time)."""
    by_epoch: dict[int, Tenure] = {}
    for e in events:
        if e["event"] != "controller_elected":
            continue
        epoch = e["controller_epoch"]
        if epoch in by_epoch:
            # Two elections of one epoch: logs of two clusters mixed, or a broken writer.
            anomalies["duplicate_epoch"] = anomalies.get("duplicate_epoch", 0) + 1
            continue
        by_epoch[epoch] = Tenure(epoch, e["controller"], e["ts"])
    tenures = [by_epoch[k] for k in sorted(by_epoch)]
    for a, b in itertools.pairwise(tenures):
        if b.start_ts + tol_ms < a.start_ts:
            anomalies["epoch_order"] = anomalies.get("epoch_order", 0) + 1
    starts = [t.start_ts for t in tenures]

    terms: dict[int, list[Tenure]] = defaultdict(list)  # each controller's, in epoch order
    for tenure in tenures:
        terms[tenure.broker].append(tenure)

    def sighted(controller: int, ts: int, floor: int) -> Tenure | None:
        """The tenure of `controller` a broker saw at `ts`, of epoch `floor` or later (a
        broker sees epochs in order, and after seeing /controller absent a newer one): the
        controller's term live at `ts` by the stamps (begun, not yet superseded or
        resigned); else its next one begun within `tol_ms` (the writer's clock behind, or
        it read the new /controller before the election's line was written); else its
        latest one begun before (the writer's clock ahead). Of two terms of one controller
        within `tol_ms`, the live one (a -1 ending a term the writer had not seen would be
        a false loss); after a resignation, the next (a resigned controller's /controller
        stands unchanged until it is deleted, so a read its watch prompted found the next
        term, and a -1 ending the resigned one would end nothing). No tolerance on
        liveness: widened, it would keep a resigned term; narrowed, end a live one."""
        i = bisect.bisect_right(starts, ts)
        if i:
            t = tenures[i - 1]
            resigned = t.resigned_ts is not None and t.resigned_ts <= ts
            if t.broker == controller and t.epoch >= floor and not resigned:
                return t
        mine = [t for t in terms.get(controller, ()) if t.epoch >= floor]
        j = bisect.bisect_right([t.start_ts for t in mine], ts)
        if j < len(mine) and mine[j].start_ts <= ts + tol_ms:
            return mine[j]
        return mine[j - 1] if j else None

    ends: dict[int, list[tuple[int, str]]] = defaultdict(list)  # epoch -> (ts, reason)
    for e in events:
        kind = e["event"]
        if kind == "controller_resigned":
            t = by_epoch.get(e["controller_epoch"])
            if t is None or t.broker != e["controller"]:
                anomalies["resignation_without_election"] = (
                    anomalies.get("resignation_without_election", 0) + 1
                )
                continue
            if t.resigned_ts is None:
                t.resigned_ts = e["ts"]
                t.resign_reason = e.get("reason")
                ends[t.epoch].append((e["ts"], "resigned"))
        elif kind == "controller_failover":
            t = by_epoch.get(e["controller_epoch"])
            if t is not None and t.broker == e["broker"] and t.failover_done_ts is None:
                t.failover_done_ts = e["ts"]
                t.failover_ms = e.get("total_ms")
    # Sightings: the tenure each broker believed in (resolved when it saw it, so a -1
    # ends only a tenure its writer saw, never a later term of the same controller), in
    # its own log's order; `floor`: the lowest epoch its next sighting can be.
    belief: dict[int, Tenure | None] = {}
    floor: dict[int, int] = {}
    for e in events:
        kind, b = e["event"], e["broker"]
        if kind == "controller_elected":
            belief[b] = None  # its own tenure: its own -1s end nothing
            floor[b] = max(floor.get(b, 0), e["controller_epoch"])
        elif kind in ("controller_resigned", "broker_registered"):
            belief[b] = None
        elif kind == "controller_seen":
            seen = e["controller"]
            believed = belief.get(b)
            if seen >= 0:
                saw = None if seen == b else sighted(seen, e["ts"], floor.get(b, 0))
                belief[b] = saw
                if saw is not None:
                    floor[b] = saw.epoch
                continue
            if believed is not None:
                if e["ts"] + tol_ms >= believed.start_ts:
                    ends[believed.epoch].append((e["ts"], "lost"))
                floor[b] = believed.epoch + 1
            belief[b] = None
    for i, t in enumerate(tenures):
        candidates = list(ends.get(t.epoch, ()))
        successor = tenures[i + 1] if i + 1 < len(tenures) else None
        if successor is not None:
            candidates.append((successor.start_ts, "superseded"))
        if not candidates:
            continue
        # The earliest evidence ends the tenure; at a tie a resignation explains it best.
        order = {"resigned": 0, "lost": 1, "superseded": 2}
        end_ts, reason = min(candidates, key=lambda c: (c[0], order[c[1]]))
        if reason == "lost" and t.resigned_ts is not None and t.resigned_ts <= end_ts + tol_ms:
            # Another broker's -1 stamped by a clock behind the controller's, within the
            # tolerance of its resignation: that resignation is what it saw.
            reason = "resigned"
        t.end_ts = max(end_ts, t.start_ts)
        t.end_reason = reason
        if (
            successor is not None
            and t.resigned_ts is not None
            and t.resigned_ts > successor.start_ts + tol_ms
        ):
            t.overlap_ms = t.resigned_ts - successor.start_ts
    return tenures


def gaps_of(tenures: list[Tenure]) -> list[Gap]:
    out = []
    for a, b in itertools.pairwise(tenures):
        if a.end_ts is None:
            continue
        out.append(
            Gap(
                a.epoch, b.epoch, a.end_ts, max(a.end_ts, b.start_ts), max(0, b.start_ts - a.end_ts)
            )
        )
    return out


def losses_of(
    events: list[dict[str, Any]], tenures: list[Tenure], tol_ms: int
) -> dict[int, list[Loss]]:
    """Each broker's losses, from every kind of evidence, merged.

    A bounce (`broker_change` bounced: the controller found a new registration under the
    id) is the controller's late notice of a loss it never saw: a broker whose session
    expired while its process lived on logs its session LOST and its registration first
    (each broker's Controller._on_zk_state and RegisterBrokerAndReelect), one stopped and
    restarted at once its session CLOSED and its registration. So a bounce after the
    registration that closed such a loss, with nothing of the broker's between, is part of
    that loss; so is a session end stamped up to `tol_ms` after a bounce that was the
    broker's latest evidence (the same loss, seen by a clock ahead), and so is one stamped
    up to `tol_ms` after the controller saw the broker registered again, closing a loss,
    with nothing between (the broker's session ended before it registered). A bounce right after a
    registration that closed no loss (a process that died unseen, restarted) reports that
    registration (`reported_ts`): the loss came before it. A loss with a bounce in it is
    `bounced`: the controller took the broker offline and back in one event."""
    evidence: list[tuple[int, int, int, str]] = []  # (ts, order, broker, what); dead sorts first
    dead, alive = 0, 1
    session_ends: dict[int, list[int]] = defaultdict(list)
    for e in events:
        kind, b = e["event"], e["broker"]
        if kind == "broker_registered":
            evidence.append((e["ts"], alive, b, "registered"))
        elif kind == "zookeeper_session" and e["state"] in ("LOST", "CLOSED"):
            evidence.append((e["ts"], dead, b, f"session {e['state'].lower()}"))
            session_ends[b].append(e["ts"])
        elif kind == "broker_change":
            for x in e.get("dead") or ():
                evidence.append((e["ts"], dead, x, "deregistered"))
            for x in e.get("bounced") or ():
                evidence.append((e["ts"], dead, x, "bounced"))  # lost and back at once
            for x in e.get("new") or ():
                evidence.append((e["ts"], alive, x, "seen registered"))
    for t in tenures:
        # Vanished as controller (others noticed, or a successor was elected, before it
        # resigned): the broker is gone, unless its late resignation says it merely lost
        # the controllership (it is alive and will say so).
        if t.end_reason in ("lost", "superseded") and t.end_ts is not None:
            end_ts, resigned_ts = t.end_ts, t.resigned_ts
            session_ended = resigned_ts is not None and any(
                end_ts - tol_ms <= ts <= resigned_ts for ts in session_ends.get(t.broker, ())
            )
            if resigned_alive(t.resign_reason, session_ended):
                continue
            evidence.append((t.end_ts, dead, t.broker, "vanished as controller"))
    evidence.sort()
    out: dict[int, list[Loss]] = defaultdict(list)
    unseen: dict[int, bool] = {}  # the open loss is only the broker's own (no controller's)
    closed_unseen: dict[int, Loss] = {}  # such a loss its own registration closed, just now
    bounced_at: dict[int, int] = {}  # a bounce that was the broker's latest evidence
    registered_at: dict[int, int] = {}  # a registration that closed no loss, its latest
    seen_back_at: dict[int, int] = {}  # the controller's sighting that closed a loss, its latest
    for ts, order, b, what in evidence:
        losses = out[b]
        open_loss = losses[-1] if losses and losses[-1].back_ts is None else None
        # Each holds only until the broker's next evidence.
        late = closed_unseen.pop(b, None)
        bounce_ts = bounced_at.pop(b, None)
        unnoticed = registered_at.pop(b, None)
        seen_back = seen_back_at.pop(b, None)
        own = what.startswith("session ")
        if what == "bounced":
            loss = open_loss or late
            if loss is None:
                loss = Loss(b, ts, what, reported_ts=unnoticed)
                losses.append(loss)
            loss.evidence = what
            if loss.back_ts is None:
                loss.back_ts = ts
            bounced_at[b] = ts
        elif order == dead:
            if open_loss is not None:
                unseen[b] = unseen.get(b, False) and own
                # Its session ended before the controller could see its registration
                # go (an ephemeral znode): stamped within tol_ms after, it is the cause.
                if (
                    own
                    and open_loss.evidence == "deregistered"
                    and ts <= open_loss.lost_ts + tol_ms
                ):
                    open_loss.evidence = what
            elif not own or not any(
                back is not None and ts <= back + tol_ms for back in (bounce_ts, seen_back)
            ):
                losses.append(Loss(b, ts, what, own=own))
                unseen[b] = own
        elif open_loss is not None:
            open_loss.back_ts = ts
            if what == "seen registered":
                seen_back_at[b] = ts
            if what == "registered" and unseen.get(b):
                closed_unseen[b] = open_loss
        elif what == "registered":
            registered_at[b] = ts
    return out


def analyse(events: Iterable[Mapping[str, Any]], tol_ms: int = 100) -> ControlResult:
    """The control plane of one cluster."""
    evs, duplicates = dedupe(events)
    anomalies: dict[str, int] = {}
    tenures = tenures_of(evs, tol_ms, anomalies)
    result = ControlResult(
        tenures=tenures,
        gaps=gaps_of(tenures),
        anomalies=anomalies,
        duplicates=duplicates,
        events=len(evs),
    )
    for e in evs:
        if e["event"] == "topic_deleted":
            result.deletions.setdefault(e["topic"], []).append(e["ts"])
    # Each broker's controlled_shutdown lines: (ts, remaining; null: the attempt failed).
    shutdowns: dict[int, list[tuple[int, int | None]]] = defaultdict(list)
    # A broker's returns, each with whether it is the broker's own stamp: its registration
    # (its own clock), or the controller seeing it back (the controller's).
    returns: dict[int, list[tuple[int, bool]]] = defaultdict(list)
    for e in evs:
        kind = e["event"]
        if kind == "controlled_shutdown":
            shutdowns[e["broker"]].append((e["ts"], e.get("remaining")))
        elif kind == "broker_registered":
            returns[e["broker"]].append((e["ts"], True))
        elif kind == "broker_change":
            for x in (*(e.get("new") or ()), *(e.get("bounced") or ())):
                returns[x].append((e["ts"], False))

    def graceful(loss: Loss) -> bool:
        """A controlled shutdown that succeeded shortly before the loss, and the broker not
        back since: a return after it means that stop was over, and this loss is another.
        Only the latest attempt counts: one that left partitions led (or failed) was
        retried, and when all failed (Kafka's "Proceeding to do an unclean shutdown as all
        the controlled shutdown attempts failed") the leaderships were not moved."""
        ts = loss.lost_ts
        tried = [
            a
            for a in shutdowns.get(loss.broker, ())
            if ts - GRACEFUL_WINDOW_MS <= a[0] <= ts + tol_ms
        ]
        if not tried:
            return False
        s, remaining = max(tried, key=lambda a: a[0])
        # A return stamped by another clock than the shutdown's or the loss's is between
        # them only if more than tol_ms inside, whatever the clocks' order; the
        # registration a bounce reports came after its loss.
        return remaining == 0 and not any(
            s + (0 if own else tol_ms) < r < ts - (0 if own == loss.own else tol_ms)
            and not (own and r == loss.reported_ts)
            for r, own in returns.get(loss.broker, ())
        )

    starts = [t.start_ts for t in tenures]

    def epoch_at(ts: int) -> int | None:
        i = bisect.bisect_right(starts, ts)
        return tenures[i - 1].epoch if i else None

    # Controller incidents: every tenure that ended.
    incidents: list[Incident] = []
    by_tenure: dict[int, Incident] = {}
    for i, t in enumerate(tenures):
        if t.end_ts is None:
            continue
        successor = tenures[i + 1] if i + 1 < len(tenures) else None
        if t.end_reason == "resigned":
            cause = f"resigned: {t.resign_reason}"
        elif t.overlap_ms is not None:
            cause = f"{t.end_reason}; came back as a zombie ({t.resign_reason})"
        else:
            cause = t.end_reason
        inc = Incident(
            0,
            "controller",
            t.broker,
            t.end_ts,
            cause,
            t.epoch,
            new_controller=successor.broker if successor else None,
            new_epoch=successor.epoch if successor else None,
            new_controller_ts=successor.start_ts if successor else None,
            failover_done_ts=successor.failover_done_ts if successor else None,
        )
        incidents.append(inc)
        by_tenure[t.epoch] = inc
    # Broker losses: part of their controller incident, or incidents of their own.
    losses = losses_of(evs, tenures, tol_ms)
    owned: list[tuple[Loss, Incident]] = []
    taken: set[int] = set()
    for i, t in enumerate(tenures):
        ctl = by_tenure.get(t.epoch)
        if ctl is None:
            continue
        successor = tenures[i + 1] if i + 1 < len(tenures) else None
        until = (successor.start_ts if successor else ctl.lost_ts) + tol_ms
        for loss in losses.get(t.broker, ()):
            if ctl.lost_ts - tol_ms <= loss.lost_ts <= until and id(loss) not in taken:
                owned.append((loss, ctl))
                taken.add(id(loss))
                ctl.back_ts = loss.back_ts
                break
    for b, bl in losses.items():
        for loss in bl:
            if id(loss) in taken:
                continue
            cause = "controlled shutdown" if graceful(loss) else loss.evidence
            lost_broker = Incident(
                0, "broker", b, loss.lost_ts, cause, epoch_at(loss.lost_ts), back_ts=loss.back_ts
            )
            incidents.append(lost_broker)
            owned.append((loss, lost_broker))
    incidents.sort(key=lambda x: (x.lost_ts, x.kind != "controller", x.broker))
    for n, inc in enumerate(incidents, start=1):
        inc.incident_id = n
    for loss, inc in owned:
        loss.incident_id = inc.incident_id
        result.deaths.append(Death(loss.broker, loss.lost_ts, loss.back_ts, inc.incident_id))
    result.deaths.sort(key=lambda d: (d.broker, d.lost_ts))
    result.incidents = incidents
    return result
