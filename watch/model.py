"""The watch view's functional core: ZooKeeper observations in, view state and events out.

`reduce(state, observation)` is pure: it returns the next `WatchState` and the timeline
events the observation caused, and does no I/O (time comes in the observation). The
ZooKeeper shell (zk_source.py) turns watch notifications into observations; the renderers
only read the state. Everything a renderer shows per frame is computed here once per
observation (the summary, the problem partitions), so drawing costs the same with ten
partitions or ten thousand. And an observation costs what it changed: above 1,000
partitions each one brings every partition's state, and only those that differ from the
last read are looked at (`_Index`).

What the state knows:

* the controller (`/controller`, `/controller_epoch`): the current tenure (from its
  election: /controller's ctime for one already there when watching began), the earlier
  ones seen while watching, and since when there has been none;
* brokers (`/brokers/ids`): each with its address, broker epoch (the czxid of its
  registration) and liveness; a broker seen once stays listed, as lost, until it is back;
* partitions (topic znodes and partition state znodes): leader, leader epoch, replicas and
  ISR; a partition is *leaderless* when its leader is -1 or a broker that is not registered
  (a dead leader leads nothing, even before the controller has written a new one), and
  *under-replicated* when fewer replicas are in the ISR and alive than are assigned;
* the timeline: one event per change, and one per kind of change when an observation
  brings many (a broker loss that moves 3,000 leaders is one line, not 3,000).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple, TypeVar

from watch.text import CONTROL, printable
from zkdata import paths
from zkdata.znodes import LEADER_DURING_DELETE, LeaderAndIsr, TopicPartition

TIMELINE_MAX = 1000  # events kept for the full-screen view (the plain one prints its own)
HISTORY_MAX = 50  # earlier controller tenures kept
AGGREGATE_OVER = 4  # more changes of one kind in one observation make one summarising event
EXAMPLES = 3  # partitions named as examples in a summarising event
PROBLEMS_MAX = 1000  # offline / under-replicated partitions listed (the rest are counted)

CONNECTED = "CONNECTED"
SUSPENDED = "SUSPENDED"  # connection lost, session perhaps alive
LOST = "LOST"  # session expired

Assignments = Mapping[str, Mapping[int, tuple[int, ...]]]


# --- observations ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ControllerSeen:
    """`/controller` and `/controller_epoch`, read together (one multiRead)."""

    ts: float
    broker: int | None  # None: no /controller
    epoch: int | None  # None: no /controller_epoch (a fresh cluster), or unknown
    problem: str | None = None  # /controller or /controller_epoch could not be decoded
    # When /controller was created (its ctime, ZooKeeper's clock): when a controller already
    # there as the watch begins was elected. None: not known (no /controller).
    elected_at: float | None = None


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    broker_id: int
    address: str  # host:port of its first endpoint
    broker_epoch: int  # czxid of /brokers/ids/<id>


@dataclass(frozen=True, slots=True)
class BrokersSeen:
    """Every registration under `/brokers/ids`."""

    ts: float
    brokers: Mapping[int, BrokerInfo]


@dataclass(frozen=True, slots=True)
class PartitionsSeen:
    """Every topic's assignment and every partition state znode, read together.

    A partition in `topics` but not in `states` has no state znode yet (a new partition the
    controller has not started) or one never readable: for a state znode that turned
    unreadable, the last state read stands in `states`.
    """

    ts: float
    topics: Assignments
    states: Mapping[TopicPartition, LeaderAndIsr]
    # Topics named under /admin/delete_topics (queued for deletion). Kafka 2.8's controller
    # writes no leader -2 to ZooKeeper: it takes their replicas offline (leader -1) and
    # then removes their znodes, so this, not the states, says they are going.
    deleting: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class ConnectionSeen:
    ts: float
    state: str  # CONNECTED, SUSPENDED or LOST


@dataclass(frozen=True, slots=True)
class Note:
    """A line from outside ZooKeeper: what the demo does, what a broker's log says."""

    ts: float
    text: str
    source: str = "demo"
    severity: str = "info"


@dataclass(frozen=True, slots=True)
class ProblemsSeen:
    """What one read of `scope` (brokers, topics, partitions, read: ZooKeeper's answer
    itself) found wrong: each source (a znode's path) with its problem. A source of the
    scope not named reads fine now, or is gone.

    A problem is reported when its source turns bad (or bad another way), not again while
    it stays so, and again if it comes back after a good read. What is remembered is what
    is wrong now, one entry per source: bounded by the znodes there are."""

    ts: float
    scope: str
    problems: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SummaryRequested:
    """Asks for one timeline line summarising the cluster as it is now."""

    ts: float


Observation = (
    ControllerSeen
    | BrokersSeen
    | PartitionsSeen
    | ConnectionSeen
    | Note
    | ProblemsSeen
    | SummaryRequested
)


# --- state ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Event:
    ts: float
    kind: str  # controller, broker, partition, topic, connection, demo, log, problem, summary
    text: str
    severity: str = "info"  # info, good, warn, bad


@dataclass(frozen=True, slots=True)
class Tenure:
    """A controller's term as seen by the watch: from when /controller named it to when not."""

    broker: int
    epoch: int | None
    since: float
    until: float | None = None
    gap_before: float | None = None  # seconds without a controller before it was elected
    seen_elected: bool = True  # False for the controller already there when watching began


@dataclass(frozen=True, slots=True)
class BrokerView:
    info: BrokerInfo | None  # its last registration seen; None if never seen registered
    alive: bool  # registered now
    since: float  # when it became alive or was lost (or the watch began)


class PartitionView(NamedTuple):
    replicas: tuple[int, ...]
    leader: int  # -1: none; -2: the topic is being deleted
    leader_epoch: int
    isr: tuple[int, ...]
    has_state: bool  # False: no state znode yet
    leaderless_since: float | None  # leader -1 or not registered, since then
    under_replicated: bool
    deleting: bool = False  # its topic is queued for deletion: neither offline nor short


NO_STATE = PartitionView((), -1, -1, (), False, None, False)


@dataclass(frozen=True, slots=True)
class Summary:
    total: int = 0
    topics: int = 0
    online: int = 0
    offline_count: int = 0
    under_replicated_count: int = 0
    no_state: int = 0
    deleting: int = 0
    # Problem partitions: the offline ones longest-leaderless first, then the
    # under-replicated ones; at most PROBLEMS_MAX of each.
    offline: tuple[TopicPartition, ...] = ()
    under_replicated: tuple[TopicPartition, ...] = ()
    leaders: Mapping[int, int] = field(default_factory=dict)  # broker -> partitions it leads
    replica_brokers: frozenset[int] = frozenset()  # every broker id an assignment names


@dataclass(frozen=True, slots=True)
class WatchState:
    started: float
    connection: str = CONNECTED
    connection_since: float = 0.0  # when the current connection state began
    seen_controller: bool = False
    seen_brokers: bool = False
    seen_partitions: bool = False
    controller: Tenure | None = None
    epoch: int | None = None  # the last /controller_epoch read
    no_controller_since: float | None = None
    history: tuple[Tenure, ...] = ()  # earlier tenures, newest first
    brokers: Mapping[int, BrokerView] = field(default_factory=dict)
    topics: Assignments = field(default_factory=dict)
    deleting: frozenset[str] = frozenset()  # topics queued for deletion (of those in topics)
    partitions: Mapping[TopicPartition, PartitionView] = field(default_factory=dict)
    summary: Summary = field(default_factory=Summary)
    timeline: tuple[Event, ...] = ()
    # What is wrong now, by scope, then by source (see ProblemsSeen).
    problems: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # What lets an update cost what it changed, not the cluster's size (see _Index).
    index: _Index | None = field(default=None, compare=False, repr=False)

    @property
    def alive(self) -> frozenset[int]:
        return frozenset(b for b, v in self.brokers.items() if v.alive)


class _Tally:
    """The summary's counts, kept as partitions change: a partition's old view taken out,
    its new one put in. Copied before a change (the state it belongs to is immutable);
    what it holds beyond counts is the problem partitions, bounded by what is wrong."""

    __slots__ = ("deleting", "leaders", "no_state", "offline", "online", "urp")

    def __init__(self) -> None:
        self.online = self.no_state = self.deleting = 0
        self.offline: dict[TopicPartition, float] = {}  # -> leaderless since
        self.urp: set[TopicPartition] = set()  # online and under-replicated
        self.leaders: dict[int, int] = {}  # broker -> online partitions it leads

    def copy(self) -> _Tally:
        t = _Tally()
        t.online, t.no_state, t.deleting = self.online, self.no_state, self.deleting
        t.offline, t.urp, t.leaders = dict(self.offline), set(self.urp), dict(self.leaders)
        return t

    def count(self, tp: TopicPartition, pv: PartitionView, sign: int) -> None:
        """Count `pv` in (sign 1) or out (sign -1), as _summarize classifies it."""
        if pv.deleting or (pv.has_state and pv.leader == LEADER_DURING_DELETE):
            self.deleting += sign
        elif not pv.has_state:
            self.no_state += sign
        elif pv.leaderless_since is not None:
            if sign > 0:
                self.offline[tp] = pv.leaderless_since
            else:
                del self.offline[tp]
        else:
            self.online += sign
            n = self.leaders.get(pv.leader, 0) + sign
            if n:
                self.leaders[pv.leader] = n
            else:
                del self.leaders[pv.leader]
            if pv.under_replicated:
                if sign > 0:
                    self.urp.add(tp)
                else:
                    self.urp.discard(tp)


@dataclass(frozen=True, slots=True)
class _Index:
    """What the reducer keeps beside the view so that an update costs what it changed.

    Above 1,000 partitions every update brings every partition's state (zk_source.py):
    rebuilding every view and recounting the summary on each took ~10 us a partition on
    the thread drawing the screen (seconds at 100,000). With this, only the states that
    differ from the last read (`states`) are looked at, the summary's counts are kept
    (`tally`), and a broker lost or back looks only at the partitions it led or was in the
    ISR of (`involved`).

    `involved` (broker -> partitions) only grows, and is shared by the states that follow
    one another: a partition is added when a view names the broker as leader or in its
    ISR, never removed, so for every state sharing it, it holds at least the partitions
    whose view names the broker (its users check the views). Rebuilt, and so bounded, on
    each full recomputation (topics or deletions changed)."""

    states: Mapping[TopicPartition, LeaderAndIsr]  # the last PartitionsSeen's
    tally: _Tally
    involved: dict[int, set[TopicPartition]]


def _involve(
    involved: dict[int, set[TopicPartition]], tp: TopicPartition, pv: PartitionView
) -> None:
    if pv.has_state:
        for b in (pv.leader, *pv.isr):
            if b >= 0:
                involved.setdefault(b, set()).add(tp)


def _index_of(
    partitions: Mapping[TopicPartition, PartitionView],
    states: Mapping[TopicPartition, LeaderAndIsr],
) -> _Index:
    tally = _Tally()
    involved: dict[int, set[TopicPartition]] = {}
    for tp, pv in partitions.items():
        tally.count(tp, pv, 1)
        _involve(involved, tp, pv)
    return _Index(states, tally, involved)


def _summary_of(tally: _Tally, total: int, prev: Summary) -> Summary:
    """The summary _summarize would count, from the tally (the topics as in `prev`)."""
    offline = heapq.nsmallest(PROBLEMS_MAX, ((since, tp) for tp, since in tally.offline.items()))
    return replace(
        prev,
        total=total,
        online=tally.online,
        offline_count=len(tally.offline),
        under_replicated_count=len(tally.urp),
        no_state=tally.no_state,
        deleting=tally.deleting,
        offline=tuple(tp for _, tp in offline),
        under_replicated=tuple(heapq.nsmallest(PROBLEMS_MAX, tally.urp)),
        leaders=dict(tally.leaders),
    )


def initial_state(ts: float) -> WatchState:
    return WatchState(started=ts, connection_since=ts)


# --- formatting -----------------------------------------------------------------------------


def fmt_duration(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    if seconds < 1:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def fmt_clock(ts: float, *, millis: bool = True) -> str:
    text = time.strftime("%H:%M:%S", time.localtime(ts))
    return f"{text}.{int(ts * 1000) % 1000:03d}" if millis else text


def fmt_ids(ids: Iterable[int]) -> str:
    return "[" + ", ".join(map(str, ids)) + "]"


def fmt_count(n: int, what: str) -> str:
    return f"{n:,} {what}" if n == 1 else f"{n:,} {what}s"


def _examples(tps: Sequence[TopicPartition]) -> str:
    """All of a few partitions, or some of many."""
    shown = ", ".join(str(tp) for tp in tps[:EXAMPLES])
    return f"e.g. {shown}, ..." if len(tps) > EXAMPLES else shown


def _leader_text(leader: int) -> str:
    return "none" if leader < 0 else str(leader)


def _printable(obs: Observation) -> Observation:
    """`obs` with the text it brings from outside (znodes, a broker's log, an error
    message) made printable: done here, where every observation enters the state, so
    whatever a renderer shows of it is. Topic names are path components, which ZooKeeper
    keeps free of control characters; they are checked all the same (cheaply, and the
    maps rebuilt only when one needs it)."""
    if isinstance(obs, BrokersSeen):
        if any(CONTROL.search(i.address) for i in obs.brokers.values()):
            brokers = {b: replace(i, address=printable(i.address)) for b, i in obs.brokers.items()}
            return replace(obs, brokers=brokers)
    elif isinstance(obs, PartitionsSeen):
        if any(CONTROL.search(t) for t in itertools.chain(obs.topics, obs.deleting)):
            topics = {printable(t): a for t, a in obs.topics.items()}
            states = {
                TopicPartition(printable(tp.topic), tp.partition): s for tp, s in obs.states.items()
            }
            deleting = frozenset(printable(t) for t in obs.deleting)
            return replace(obs, topics=topics, states=states, deleting=deleting)
    elif isinstance(obs, ControllerSeen):
        if obs.problem is not None:
            return replace(obs, problem=printable(obs.problem))
    elif isinstance(obs, Note):
        return replace(obs, text=printable(obs.text))
    elif isinstance(obs, ProblemsSeen) and any(CONTROL.search(t) for t in obs.problems.values()):
        return replace(obs, problems={s: printable(t) for s, t in obs.problems.items()})
    return obs


# --- the reducer ----------------------------------------------------------------------------


def reduce(state: WatchState, obs: Observation) -> tuple[WatchState, list[Event]]:
    """The state after `obs`, and the timeline events it caused (also in the new timeline)."""
    obs = _printable(obs)
    if isinstance(obs, ControllerSeen):
        new, events = _controller(state, obs)
    elif isinstance(obs, BrokersSeen):
        new, events = _brokers(state, obs)
    elif isinstance(obs, PartitionsSeen):
        new, events = _partitions(state, obs)
    elif isinstance(obs, ConnectionSeen):
        new, events = _connection(state, obs)
    elif isinstance(obs, Note):
        new, events = state, [Event(obs.ts, obs.source, obs.text, obs.severity)]
    elif isinstance(obs, ProblemsSeen):
        new, events = _problems(state, obs.ts, obs.scope, obs.problems)
    else:
        new, events = state, [Event(obs.ts, "summary", summary_text(state), "info")]
    if events:
        new = replace(new, timeline=_in_time_order(new.timeline, events)[-TIMELINE_MAX:])
    return new, events


def _in_time_order(timeline: tuple[Event, ...], events: list[Event]) -> tuple[Event, ...]:
    """The timeline with `events` added where their times put them. Nearly always at the
    end; a broker's log line is read a moment after it was written, when what ZooKeeper
    showed next may already be in."""
    if not timeline or (events[0].ts >= timeline[-1].ts and _ordered(events)):
        return (*timeline, *events)
    merged = list(timeline)
    for event in events:
        merged.insert(bisect.bisect_right(merged, event.ts, key=event_time), event)
    return tuple(merged)


def _ordered(events: list[Event]) -> bool:
    return all(a.ts <= b.ts for a, b in itertools.pairwise(events))


def event_time(event: Event) -> float:
    return event.ts


def reduce_all(
    state: WatchState, observations: Iterable[Observation]
) -> tuple[WatchState, list[Event]]:
    events: list[Event] = []
    for obs in observations:
        state, more = reduce(state, obs)
        events.extend(more)
    return state, events


def _problems(
    state: WatchState, ts: float, scope: str, problems: Mapping[str, str]
) -> tuple[WatchState, list[Event]]:
    """Keyed by source, not by text: a text seen once was never reported again (a znode
    repaired and broken again the same way), and forgetting texts in bulk reported
    everything still wrong again at once."""
    held = state.problems.get(scope, {})
    if held == problems:
        return state, []
    fresh = [text for source, text in problems.items() if held.get(source) != text]
    rest = {k: v for k, v in state.problems.items() if k != scope}
    state = replace(state, problems={**rest, scope: dict(problems)} if problems else rest)
    if len(fresh) > AGGREGATE_OVER:
        return state, [Event(ts, "problem", f"{fresh[0]} (and {len(fresh) - 1:,} more)", "warn")]
    return state, [Event(ts, "problem", text, "warn") for text in fresh]


def _controller(state: WatchState, obs: ControllerSeen) -> tuple[WatchState, list[Event]]:
    ts = obs.ts
    # /controller and /controller_epoch are read together: one source.
    problem = {} if obs.problem is None else {paths.CONTROLLER: obs.problem}
    state, events = _problems(state, ts, "controller", problem)
    broker, epoch = obs.broker, obs.epoch
    epoch_text = "?" if epoch is None else str(epoch)
    if not state.seen_controller:
        if broker is None:
            last = f" (the last epoch was {epoch})" if epoch is not None else ""
            events.append(Event(ts, "controller", f"no controller{last}", "bad"))
            return replace(state, seen_controller=True, epoch=epoch, no_controller_since=ts), events
        events.append(
            Event(ts, "controller", f"controller is broker {broker}, epoch {epoch_text}", "info")
        )
        # Its term began at its election, not when the watch first looked (never later
        # than that look, whatever the ZooKeeper server's clock says).
        since = ts if obs.elected_at is None else min(obs.elected_at, ts)
        tenure = Tenure(broker, epoch, since, seen_elected=False)
        return replace(state, seen_controller=True, controller=tenure, epoch=epoch), events

    current = state.controller
    if current is None and broker is None:
        # Still none; an epoch grown meanwhile was a controller elected and gone.
        events.extend(_came_and_went(ts, state.epoch, epoch, last_gone=True))
        return (replace(state, epoch=epoch) if epoch != state.epoch else state), events
    if current is not None and current.broker == broker and current.epoch == epoch:
        return (replace(state, epoch=epoch) if epoch != state.epoch else state), events

    history = state.history
    no_controller_since = state.no_controller_since
    last_epoch = state.epoch
    if current is not None:
        history = (replace(current, until=ts), *history)[:HISTORY_MAX]
        events.append(
            Event(
                ts,
                "controller",
                f"controller resigned: broker {current.broker} (epoch "
                f"{'?' if current.epoch is None else current.epoch}) no longer holds /controller",
                "bad",
            )
        )
        no_controller_since = ts
    # Kafka bumps /controller_epoch only as it creates /controller (one multi-op): epochs
    # between the last read and this one were controllers elected and gone unseen, and so
    # is this read's epoch when /controller is empty.
    events.extend(_came_and_went(ts, last_epoch, epoch, last_gone=broker is None))
    if broker is None:
        return (
            replace(
                state,
                controller=None,
                history=history,
                epoch=epoch,
                no_controller_since=no_controller_since,
            ),
            events,
        )
    gap = None if no_controller_since is None else ts - no_controller_since
    after = f" after {fmt_duration(gap)} without a controller" if gap is not None else ""
    events.append(
        Event(
            ts,
            "controller",
            f"broker {broker} elected controller, epoch {epoch_text}{after}",
            "good",
        )
    )
    tenure = Tenure(broker, epoch, ts, gap_before=gap)
    return (
        replace(state, controller=tenure, history=history, epoch=epoch, no_controller_since=None),
        events,
    )


def _came_and_went(
    ts: float, last_epoch: int | None, epoch: int | None, *, last_gone: bool
) -> list[Event]:
    """The controller epochs after `last_epoch` never seen held: up to `epoch` if its
    controller is gone too (`last_gone`: /controller read empty), else up to before it."""
    if last_epoch is None or epoch is None:
        return []
    end = epoch if last_gone else epoch - 1
    if end <= last_epoch:
        return []
    missed = f"epoch {end}" if end == last_epoch + 1 else f"epochs {last_epoch + 1} to {end}"
    return [Event(ts, "controller", f"{missed} came and went between two reads", "warn")]


def _brokers(state: WatchState, obs: BrokersSeen) -> tuple[WatchState, list[Event]]:
    ts = obs.ts
    registered = obs.brokers
    events: list[Event] = []
    old = state.brokers
    views: dict[int, BrokerView] = dict(old)
    if not state.seen_brokers:
        for b, info in registered.items():
            views[b] = BrokerView(info, True, ts)
        text = (
            f"{fmt_count(len(registered), 'broker')} registered: {fmt_ids(sorted(registered))}"
            if registered
            else "no brokers registered"
        )
        events.append(Event(ts, "broker", text, "info" if registered else "warn"))
    else:
        for b in sorted(registered):
            info = registered[b]
            prev = old.get(b)
            where = f"{info.address}, broker epoch {info.broker_epoch}"
            if prev is None or not prev.alive:
                if prev is not None and prev.info is not None:
                    text = f"broker {b} back after {fmt_duration(ts - prev.since)}: {where}"
                else:
                    text = f"broker {b} registered: {where}"
                events.append(Event(ts, "broker", text, "good"))
                views[b] = BrokerView(info, True, ts)
            elif prev.info != info:
                if prev.info is not None and prev.info.broker_epoch != info.broker_epoch:
                    text = (
                        f"broker {b} re-registered (it bounced): broker epoch"
                        f" {prev.info.broker_epoch} -> {info.broker_epoch}"
                    )
                    events.append(Event(ts, "broker", text, "warn"))
                    views[b] = BrokerView(info, True, ts)
                else:
                    events.append(Event(ts, "broker", f"broker {b} now at {info.address}", "info"))
                    views[b] = BrokerView(info, True, prev.since)
        lost = [b for b, v in old.items() if v.alive and b not in registered]
        # One pass for every broker lost (a scan each made losing 50 at once cost 50).
        led_by: dict[int, list[TopicPartition]] = {}
        gone = set(lost)
        for tp in _involving(state, gone) if gone else ():
            pv = state.partitions[tp]
            if (
                pv.has_state
                and pv.leader in gone
                and pv.leaderless_since is None
                and not pv.deleting
            ):
                led_by.setdefault(pv.leader, []).append(tp)
        for b in sorted(lost):
            views[b] = BrokerView(old[b].info, False, ts)
            led = sorted(led_by.get(b, ()))
            text = f"broker {b} lost: its registration is gone"
            if led:
                text += f"; {fmt_count(len(led), 'partition')} it led now without a leader"
                text += f" ({_examples(led)})"
            events.append(Event(ts, "broker", text, "bad"))
    new = replace(state, brokers=views, seen_brokers=True)
    alive = new.alive
    if new.partitions and (not state.seen_brokers or alive != state.alive):
        if state.seen_brokers and state.index is not None:
            # Only a partition a broker lost or back led or had in its ISR can change.
            flipped = _involving(state, alive ^ state.alive)
            partitions, summary, index, touched = _update(state, flipped, None, alive, ts)
            new = replace(new, partitions=partitions, summary=summary, index=index)
        else:
            partitions = _recompute(new.partitions, new.topics, None, alive, ts, new.deleting)
            index = _index_of(partitions, {} if state.index is None else state.index.states)
            summary = _summarize(partitions, new.topics)
            new = replace(new, partitions=partitions, summary=summary, index=index)
            touched = list(partitions)
        if state.seen_brokers:
            # A leader that re-registered before the controller replaced it leads again.
            regained = sorted(
                tp
                for tp in touched
                if partitions[tp].leaderless_since is None
                and (before := state.partitions.get(tp)) is not None
                and before.leaderless_since is not None
            )
            if regained:
                text = (
                    f"{fmt_count(len(regained), 'partition')}"
                    f" {'has its' if len(regained) == 1 else 'have their'} leader back:"
                    f" it registered again ({_examples(regained)})"
                )
                events.append(Event(ts, "partition", text, "good"))
    return new, events


def _view(
    replicas: tuple[int, ...],
    lai: LeaderAndIsr | None,
    prev: PartitionView | None,
    alive: frozenset[int] | None,
    ts: float,
    deleting: bool = False,
) -> PartitionView:
    if lai is None:
        return NO_STATE._replace(replicas=replicas, deleting=deleting)
    leader = lai.leader
    # A partition being deleted has its leader taken away on purpose: not offline.
    if deleting or leader == LEADER_DURING_DELETE:
        leaderless = False
    else:
        leaderless = leader < 0 or (alive is not None and leader not in alive)
    since: float | None = None
    if leaderless:
        since = ts if prev is None or prev.leaderless_since is None else prev.leaderless_since
    isr = lai.isr
    urp = not deleting and (
        len(isr) < len(replicas) or (alive is not None and not alive.issuperset(isr))
    )
    if (
        prev is not None
        and prev.has_state
        and prev.leader == leader
        and prev.leader_epoch == lai.leader_epoch
        and prev.isr == isr
        and prev.replicas == replicas
        and prev.leaderless_since == since
        and prev.under_replicated == urp
        and prev.deleting == deleting
    ):
        return prev
    return PartitionView(replicas, leader, lai.leader_epoch, isr, True, since, urp, deleting)


def _involving(state: WatchState, brokers: Iterable[int]) -> list[TopicPartition]:
    """The partitions of `state` whose view may name one of `brokers` as leader or in its
    ISR (every partition if there is no index)."""
    index = state.index
    if index is None:
        return list(state.partitions)
    out: set[TopicPartition] = set()
    for b in brokers:
        out.update(index.involved.get(b, ()))
    if len(out) > len(state.partitions) // 4:
        # Many: in the views' order, which walks memory in order (a quarter faster).
        return [tp for tp in state.partitions if tp in out]
    return [tp for tp in out if tp in state.partitions]


def _update(
    state: WatchState,
    candidates: Iterable[TopicPartition],
    states: Mapping[TopicPartition, LeaderAndIsr] | None,
    alive: frozenset[int] | None,
    ts: float,
) -> tuple[Mapping[TopicPartition, PartitionView], Summary, _Index, list[TopicPartition]]:
    """_recompute and _summarize for the same topics and deletions, looking only at the
    `candidates` (every other partition's view would come out as it is): their state from
    `states` if given, else their view's own. The partitions, summary and index after,
    and the partitions whose view changed."""
    index = state.index
    assert index is not None
    old = state.partitions
    partitions: dict[TopicPartition, PartitionView] | None = None
    tally = index.tally
    touched: list[TopicPartition] = []
    for tp in candidates:
        prev = old.get(tp)
        if prev is None:
            continue  # not assigned: its state is ignored, as _recompute does
        if states is not None:
            pv = _view(prev.replicas, states.get(tp), prev, alive, ts, prev.deleting)
        elif prev.has_state and alive is not None:
            pv = _relive(prev, alive, ts)
        else:
            continue
        if pv is prev or pv == prev:
            continue
        if partitions is None:
            partitions, tally = dict(old), tally.copy()
        if (
            states is None
            and prev.leader >= 0
            and prev.leaderless_since is pv.leaderless_since is None
        ):
            # Online before and after, its leader kept: only under-replicated changed.
            if pv.under_replicated:
                tally.urp.add(tp)
            else:
                tally.urp.discard(tp)
        else:
            tally.count(tp, prev, -1)
            tally.count(tp, pv, 1)
            if states is not None and (pv.leader != prev.leader or pv.isr != prev.isr):
                _involve(index.involved, tp, pv)
        partitions[tp] = pv
        touched.append(tp)
    index = _Index(index.states if states is None else states, tally, index.involved)
    if partitions is None:
        return old, state.summary, index, touched
    return partitions, _summary_of(tally, len(partitions), state.summary), index, touched


def _changed_states(
    last: Mapping[TopicPartition, LeaderAndIsr], states: Mapping[TopicPartition, LeaderAndIsr]
) -> list[TopicPartition]:
    """The partitions whose state differs between two reads (appeared, changed or gone)."""
    changed = [tp for tp, lai in states.items() if last.get(tp) != lai]
    appeared = sum(1 for tp in changed if tp not in last)
    if len(last) + appeared != len(states):  # some state gone
        changed.extend(last.keys() - states.keys())
    return changed


def _same_topics(old: Assignments, new: Assignments) -> bool:
    """Cheap when the source hands on the topics it last read (the same assignments)."""
    if old is new:
        return True
    if len(old) != len(new):
        return False
    return all(old.get(t) is a for t, a in new.items()) or old == new


def _relive(prev: PartitionView, alive: frozenset[int], ts: float) -> PartitionView:
    """_view of a partition with a state, from its own, for the registered brokers now
    (what a broker lost or back changes: leaderless or not, under-replicated or not)."""
    leader = prev.leader
    deleting = prev.deleting
    since = prev.leaderless_since
    if deleting or leader == LEADER_DURING_DELETE or (leader >= 0 and leader in alive):
        since = None
    elif since is None:
        since = ts
    urp = not deleting and (len(prev.isr) < len(prev.replicas) or not alive.issuperset(prev.isr))
    if since == prev.leaderless_since and urp == prev.under_replicated:
        return prev
    return PartitionView(
        prev.replicas, leader, prev.leader_epoch, prev.isr, True, since, urp, deleting
    )


def _recompute(
    partitions: Mapping[TopicPartition, PartitionView],
    topics: Assignments,
    states: Mapping[TopicPartition, LeaderAndIsr] | None,
    alive: frozenset[int] | None,
    ts: float,
    deleting: frozenset[str],
) -> dict[TopicPartition, PartitionView]:
    """Every partition's view; from `states` if given, else from the views' own states."""
    out: dict[TopicPartition, PartitionView] = {}
    for topic, assignment in topics.items():
        being_deleted = topic in deleting
        for p, replicas in assignment.items():
            tp = TopicPartition(topic, p)
            prev = partitions.get(tp)
            if states is not None:
                lai = states.get(tp)
            elif prev is not None and prev.has_state:
                lai = LeaderAndIsr(prev.leader, prev.leader_epoch, prev.isr)
            else:
                lai = None
            out[tp] = _view(replicas, lai, prev, alive, ts, being_deleted)
    return out


def _summarize(partitions: Mapping[TopicPartition, PartitionView], topics: Assignments) -> Summary:
    online = no_state = deleting = 0
    offline: list[tuple[float, TopicPartition]] = []
    urp: list[TopicPartition] = []
    leaders: Counter[int] = Counter()
    replica_sets: set[tuple[int, ...]] = set()
    for tp, pv in partitions.items():
        replica_sets.add(pv.replicas)
        if pv.deleting or (pv.has_state and pv.leader == LEADER_DURING_DELETE):
            deleting += 1
        elif not pv.has_state:
            no_state += 1
        elif pv.leaderless_since is not None:
            offline.append((pv.leaderless_since, tp))
        else:
            online += 1
            leaders[pv.leader] += 1
            if pv.under_replicated:
                urp.append(tp)
    offline.sort()
    urp.sort()
    return Summary(
        total=len(partitions),
        topics=len(topics),
        online=online,
        offline_count=len(offline),
        under_replicated_count=len(urp),
        no_state=no_state,
        deleting=deleting,
        offline=tuple(tp for _, tp in offline[:PROBLEMS_MAX]),
        under_replicated=tuple(urp[:PROBLEMS_MAX]),
        leaders=dict(leaders),
        replica_brokers=frozenset(b for replicas in replica_sets for b in replicas),
    )


@dataclass
class _Changes:
    born: list[tuple[TopicPartition, int, tuple[int, ...]]] = field(default_factory=list)
    moved: list[tuple[TopicPartition, int, int, int, float | None]] = field(default_factory=list)
    offline: list[tuple[TopicPartition, tuple[int, ...]]] = field(default_factory=list)
    online: list[tuple[TopicPartition, int, int, float | None]] = field(default_factory=list)
    shrank: list[tuple[TopicPartition, tuple[int, ...], tuple[int, ...]]] = field(
        default_factory=list
    )
    grew: list[tuple[TopicPartition, tuple[int, ...], tuple[int, ...]]] = field(
        default_factory=list
    )
    isr_changed: list[tuple[TopicPartition, tuple[int, ...], tuple[int, ...]]] = field(
        default_factory=list
    )
    replicas: list[tuple[TopicPartition, tuple[int, ...], tuple[int, ...]]] = field(
        default_factory=list
    )


def _partitions(state: WatchState, obs: PartitionsSeen) -> tuple[WatchState, list[Event]]:
    ts = obs.ts
    alive = state.alive if state.seen_brokers else None
    # A request naming no topic (one left behind, or for a topic not created yet) is none.
    deleting = frozenset(t for t in obs.deleting if t in obs.topics)
    touched: Iterable[TopicPartition]
    if (
        state.seen_partitions
        and state.index is not None
        and deleting == state.deleting
        and _same_topics(state.topics, obs.topics)
    ):
        # The same partitions: only those whose state changed since the last read.
        changed = _changed_states(state.index.states, obs.states)
        partitions, summary, index, touched = _update(state, changed, obs.states, alive, ts)
        touched.sort()  # the order of a full pass (the source reads topics sorted)
        new = replace(state, topics=obs.topics, partitions=partitions, summary=summary, index=index)
        events: list[Event] = []
    else:
        partitions = _recompute(state.partitions, obs.topics, obs.states, alive, ts, deleting)
        summary = _summarize(partitions, obs.topics)
        new = replace(
            state,
            topics=obs.topics,
            deleting=deleting,
            partitions=partitions,
            summary=summary,
            seen_partitions=True,
            index=_index_of(partitions, obs.states),
        )
        if not state.seen_partitions:
            return new, [Event(ts, "partition", _overview(summary), "info")]
        events = _topic_events(state.topics, obs.topics, ts)
        events.extend(_deletion_events(state, new, ts))
        touched = partitions
    changes = _Changes()
    old = state.partitions
    for tp in touched:
        pv = partitions[tp]
        prev = old.get(tp)
        if prev is pv or pv.deleting:
            continue  # a partition being deleted loses its leader and ISR on purpose
        if prev is None or not prev.has_state:
            if pv.has_state:
                changes.born.append((tp, pv.leader, pv.isr))
            continue
        if not pv.has_state:
            continue
        if pv.replicas != prev.replicas:
            changes.replicas.append((tp, prev.replicas, pv.replicas))
        waited = None if prev.leaderless_since is None else ts - prev.leaderless_since
        if pv.leader != prev.leader and LEADER_DURING_DELETE not in (pv.leader, prev.leader):
            if pv.leader < 0:
                changes.offline.append((tp, pv.isr))
            elif prev.leader < 0:
                changes.online.append((tp, pv.leader, pv.leader_epoch, waited))
            else:
                changes.moved.append((tp, prev.leader, pv.leader, pv.leader_epoch, waited))
        if set(pv.isr) != set(prev.isr):
            left, joined = set(prev.isr) - set(pv.isr), set(pv.isr) - set(prev.isr)
            if left and joined:
                changes.isr_changed.append((tp, prev.isr, pv.isr))
            elif left:
                changes.shrank.append((tp, prev.isr, pv.isr))
            else:
                changes.grew.append((tp, prev.isr, pv.isr))
    events.extend(_partition_events(changes, ts))
    return new, events


def _overview(summary: Summary) -> str:
    if summary.total == 0:
        return "no topics yet"
    text = (
        f"{fmt_count(summary.total, 'partition')} in {fmt_count(summary.topics, 'topic')}:"
        f" {summary.online:,} online, {summary.offline_count:,} offline,"
        f" {summary.under_replicated_count:,} under-replicated"
    )
    if summary.no_state:
        text += f", {summary.no_state:,} without a state yet"
    if summary.deleting:
        text += f", {summary.deleting:,} being deleted"
    return text


def summary_text(state: WatchState) -> str:
    s = state.summary
    c = state.controller
    controller = "no controller" if c is None else f"controller broker {c.broker}, epoch {c.epoch}"
    leaders = ", ".join(f"{b}: {n:,}" for b, n in sorted(s.leaders.items()))
    return f"{controller}; {_overview(s)}" + (f"; leaders by broker {leaders}" if leaders else "")


def _topic_events(old: Assignments, new: Assignments, ts: float) -> list[Event]:
    events: list[Event] = []
    created = sorted(set(new) - set(old))
    deleted = sorted(set(old) - set(new))
    if len(created) > AGGREGATE_OVER:
        events.append(
            Event(
                ts,
                "topic",
                f"{len(created):,} topics created: {', '.join(created[:EXAMPLES])}, ...",
            )
        )
    else:
        for t in created:
            a = new[t]
            rf = max((len(r) for r in a.values()), default=0)
            events.append(
                Event(
                    ts,
                    "topic",
                    f"topic {t} created: {fmt_count(len(a), 'partition')}, replication factor {rf}",
                )
            )
    if len(deleted) > AGGREGATE_OVER:
        events.append(
            Event(
                ts,
                "topic",
                f"{len(deleted):,} topics deleted: {', '.join(deleted[:EXAMPLES])}, ...",
            )
        )
    else:
        events.extend(Event(ts, "topic", f"topic {t} deleted") for t in deleted)
    for t in sorted(set(old) & set(new)):
        if len(new[t]) != len(old[t]):
            events.append(
                Event(ts, "topic", f"topic {t}: {len(old[t]):,} -> {len(new[t]):,} partitions")
            )
    return events


def _deletion_events(old: WatchState, new: WatchState, ts: float) -> list[Event]:
    """A topic queued for deletion (its name under /admin/delete_topics), or no longer
    (a controller with delete.topic.enable=false removes the request and keeps the topic).
    Its going is told by _topic_events when its znode goes."""
    events: list[Event] = []
    marked = sorted(new.deleting - old.deleting)
    if len(marked) > AGGREGATE_OVER:
        shown = ", ".join(marked[:EXAMPLES])
        events.append(
            Event(ts, "topic", f"{len(marked):,} topics marked for deletion: {shown}, ...")
        )
    else:
        events.extend(
            Event(
                ts,
                "topic",
                f"topic {t} marked for deletion: {fmt_count(len(new.topics[t]), 'partition')}",
            )
            for t in marked
        )
    kept = sorted(t for t in old.deleting - new.deleting if t in new.topics)
    events.extend(Event(ts, "topic", f"topic {t}: deletion request gone, topic kept") for t in kept)
    return events


def _partition_events(c: _Changes, ts: float) -> list[Event]:
    events: list[Event] = []

    def add(text: str, severity: str = "info") -> None:
        events.append(Event(ts, "partition", text, severity))

    def after(waited: float | None, *, up_to: bool = False) -> str:
        if waited is None:
            return ""
        return f" after {'up to ' if up_to else ''}{fmt_duration(waited)} without a leader"

    def by_broker(counts: Counter[int]) -> str:
        return ", ".join(f"{b} ({n:,})" for b, n in _ranked(counts, 6))

    if len(c.offline) > AGGREGATE_OVER:
        tps = sorted(tp for tp, _ in c.offline)
        add(f"{len(tps):,} partitions offline: no leader ({_examples(tps)})", "bad")
    else:
        for tp, isr in c.offline:
            add(f"{tp} offline: no leader (ISR {fmt_ids(isr)})", "bad")

    if len(c.online) > AGGREGATE_OVER:
        longest = max((w for *_, w in c.online if w is not None), default=None)
        leaders = Counter(leader for _, leader, _, _ in c.online)
        add(
            f"{len(c.online):,} partitions back online{after(longest, up_to=True)};"
            f" leaders {by_broker(leaders)}",
            "good",
        )
    else:
        for tp, leader, epoch, waited in c.online:
            add(f"{tp} back online: leader {leader} (leader epoch {epoch}){after(waited)}", "good")

    if len(c.moved) > AGGREGATE_OVER:
        pairs = Counter((old, new) for _, old, new, _, _ in c.moved)
        longest = max((w for *_, w in c.moved if w is not None), default=None)
        shown = ", ".join(f"{o} -> {n} ({k:,})" for (o, n), k in _ranked(pairs, 6))
        tps = sorted(tp for tp, *_ in c.moved)
        add(
            f"leader moved for {len(c.moved):,} partitions: {shown}"
            f"{after(longest, up_to=True)} ({_examples(tps)})",
            "good" if longest is not None else "info",
        )
    else:
        for tp, old, new, epoch, waited in c.moved:
            add(
                f"leader of {tp} moved {old} -> {new} (leader epoch {epoch}){after(waited)}",
                "good" if waited is not None else "info",
            )

    if len(c.born) > AGGREGATE_OVER:
        leaders = Counter(leader for _, leader, _ in c.born if leader >= 0)
        add(f"{len(c.born):,} new partitions started; leaders {by_broker(leaders)}")
    else:
        for tp, leader, isr in c.born:
            add(f"{tp} started: leader {_leader_text(leader)}, ISR {fmt_ids(isr)}")

    for label, items, verb, severity in (
        ("shrank", c.shrank, "left", "warn"),
        ("grew", c.grew, "rejoined", "good"),
    ):
        if len(items) > AGGREGATE_OVER:
            groups: Counter[tuple[int, ...]] = Counter()
            for _, old_isr, new_isr in items:
                diff = set(old_isr) ^ set(new_isr)
                groups[tuple(sorted(diff))] += 1
            shown = ", ".join(
                f"{'broker' if len(ids) == 1 else 'brokers'} {', '.join(map(str, ids))} {verb}"
                f" ({k:,})"
                for ids, k in _ranked(groups, 4)
            )
            tps = sorted(tp for tp, _, _ in items)
            add(f"ISR {label} for {len(items):,} partitions: {shown} ({_examples(tps)})", severity)
        else:
            for tp, old_isr, new_isr in items:
                add(f"ISR of {tp} {label}: {fmt_ids(old_isr)} -> {fmt_ids(new_isr)}", severity)

    for what, items in (("ISR", c.isr_changed), ("replicas", c.replicas)):
        if len(items) > AGGREGATE_OVER:
            tps = sorted(tp for tp, _, _ in items)
            add(f"{what} changed for {len(items):,} partitions ({_examples(tps)})")
        else:
            for tp, old_ids, new_ids in items:
                add(f"{what} of {tp} changed: {fmt_ids(old_ids)} -> {fmt_ids(new_ids)}")
    return events


# What the events count by: a broker, brokers, an (old, new) leader pair.
_Key = TypeVar("_Key", int, tuple[int, ...], tuple[int, int])


def _ranked(counts: Counter[_Key], n: int) -> list[tuple[_Key, int]]:
    """The ``n`` most common, ties by key: ``most_common`` breaks them by first insertion,
    which follows the order partitions were looked at, and a view kept up to date looks at
    them in another order than one recomputed (found by hypothesis)."""
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:n]


def _connection(state: WatchState, obs: ConnectionSeen) -> tuple[WatchState, list[Event]]:
    ts = obs.ts
    prev = state.connection
    if obs.state == prev:
        return state, []
    if obs.state == SUSPENDED:
        event = Event(ts, "connection", "ZooKeeper connection lost; reconnecting", "bad")
    elif obs.state == LOST:
        event = Event(
            ts,
            "connection",
            "ZooKeeper session expired; reconnecting with a new session",
            "bad",
        )
    else:
        away = fmt_duration(ts - state.connection_since)
        if prev == LOST:
            text = f"ZooKeeper reconnected with a new session after {away}; watches set again"
        else:
            text = f"ZooKeeper connection back after {away}"
        event = Event(ts, "connection", text, "good")
    # The time since which the connection has been down spans SUSPENDED and then LOST.
    since = ts if CONNECTED in (prev, obs.state) else state.connection_since
    return replace(state, connection=obs.state, connection_since=since), [event]


# --- what renderers ask ---------------------------------------------------------------------


def running_clocks(state: WatchState, now: float) -> list[str]:
    """The failovers under way, each with how long it has lasted so far."""
    clocks: list[str] = []
    if state.connection != CONNECTED:
        clocks.append(
            f"ZooKeeper connection lost {fmt_duration(now - state.connection_since)} ago;"
            " reconnecting (what is shown may be stale)"
        )
    if state.seen_controller and state.controller is None and state.no_controller_since is not None:
        last = state.history[0] if state.history else None
        was = f" (last: broker {last.broker}, epoch {last.epoch})" if last is not None else ""
        clocks.append(f"no controller for {fmt_duration(now - state.no_controller_since)}{was}")
    s = state.summary
    if s.offline_count:
        first = state.partitions.get(s.offline[0]) if s.offline else None
        longest = (
            fmt_duration(now - first.leaderless_since)
            if first is not None and first.leaderless_since is not None
            else "?"
        )
        if s.offline_count <= 3:
            for tp in s.offline:
                pv = state.partitions.get(tp)
                if pv is not None and pv.leaderless_since is not None:
                    waited = fmt_duration(now - pv.leaderless_since)
                    clocks.append(f"partition {tp} without leader for {waited}")
        else:
            clocks.append(
                f"{s.offline_count:,} partitions without leader, the longest for {longest}"
            )
    return clocks


def broker_ids(state: WatchState) -> list[int]:
    """Every broker worth a row: registered, seen before, or named by an assignment."""
    return sorted(set(state.brokers) | state.summary.replica_brokers)
