"""A watch session (watch/session.py): the real Watcher and ZkSource over an in-memory
ZooKeeper, its reader thread running. A summary line the demo asks for reflects every line
printed before it, however its request falls among the source's ZooKeeper reads."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable
from typing import cast

from kazoo.protocol.states import ZnodeStat

from tests.unit.fake_zk import FakeZk
from watch.model import Event, event_time
from watch.session import Watcher
from zkdata import paths
from zkdata.znodes import (
    BrokerRegistration,
    EndPoint,
    LeaderAndIsr,
    TopicAssignment,
    encode_broker,
    encode_controller,
    encode_controller_epoch,
    encode_partition_state,
    encode_topic,
)

T0 = 1_800_000_000.0


class RequestDuringRead(FakeZk):
    """A FakeZk that runs `hook` (once) when a read of the paths `hook_on` picks comes:
    another thread's request, made while the source waits for ZooKeeper's answer."""

    connected = True

    def __init__(self) -> None:
        super().__init__()
        self.hook: Callable[[], None] | None = None
        self.hook_on: Callable[[list[str], bool], bool] = lambda _paths, _watch: False

    def get_many(
        self, path_list: Iterable[str], *, watch: bool = False, batch: int = 0
    ) -> list[tuple[bytes, ZnodeStat] | None]:
        path_list = list(path_list)
        if self.hook is not None and self.hook_on(path_list, watch):
            hook, self.hook = self.hook, None
            hook()
        return super().get_many(path_list, watch=watch, batch=batch)


def broker(zk: FakeZk, b: int) -> None:
    reg = BrokerRegistration(b, (EndPoint("PLAINTEXT", "127.0.0.1", 9090 + b),))
    zk.put(paths.broker(b), encode_broker(reg))


def a_cluster(brokers: tuple[int, ...], lai: LeaderAndIsr) -> RequestDuringRead:
    """`brokers` registered, broker 1 the controller, topic t: t-0 on (1, 2) in `lai`."""
    zk = RequestDuringRead()
    for path in (paths.BROKER_IDS, paths.BROKER_TOPICS, paths.topic_partitions("t")):
        zk.put(path, b"")
    for b in brokers:
        broker(zk, b)
    zk.put(paths.CONTROLLER, encode_controller(1))
    zk.put(paths.CONTROLLER_EPOCH, encode_controller_epoch(5))
    zk.put(paths.topic("t"), encode_topic(TopicAssignment("t", {0: (1, 2)})))
    zk.put(paths.partition("t", 0), b"")
    zk.put(paths.partition_state("t", 0), encode_partition_state(lai, 5))
    return zk


def printed_until_summary(zk: RequestDuringRead, change: Callable[[], None]) -> list[Event]:
    """The timeline in time order, as the plain view prints it, up to the summary line
    requested during the read `zk.hook_on` picks, after `change`."""
    ticks = itertools.count()
    watcher = Watcher(zk, clock=lambda: T0 + next(ticks) / 1000)  # type: ignore[arg-type]
    watcher.start()
    try:
        assert watcher.wait_ready(5)
        watcher.pump(0.1)
        zk.hook = cast("Callable[[], None] | None", watcher.request_summary)  # not narrowed
        change()
        events: list[Event] = []
        deadline = time.monotonic() + 5
        while not [e for e in events if e.kind == "summary"] and time.monotonic() < deadline:
            events += watcher.pump(0.1)
        assert zk.hook is None, "the request was never made"
    finally:
        watcher.stop()
    events.sort(key=event_time)  # as render_plain prints them: stable
    n = next(i for i, e in enumerate(events) if e.kind == "summary")
    return events[: n + 1]


def test_a_summary_requested_while_the_source_arms_its_watches_counts_what_it_follows() -> None:
    """The demo saw a summary of "56 under-replicated" just after "ISR grew for 50
    partitions: broker 1 rejoined" (6 was right): the partition states were stamped when
    read, then handed on after the round trip re-arming their watches, and a summary asked
    for in between was computed without them yet printed after them."""
    zk = a_cluster((1, 2), LeaderAndIsr(1, 3, (1,)))
    zk.hook_on = lambda path_list, watch: watch and paths.partition_state("t", 0) in path_list
    state = paths.partition_state("t", 0)

    def isr_grows() -> None:
        zk.set_data(state, encode_partition_state(LeaderAndIsr(1, 3, (1, 2)), 5))
        zk.fire(state, "CHANGED")

    printed = printed_until_summary(zk, isr_grows)
    grew = [e for e in printed if e.text.startswith("ISR of t-0 grew")]
    if grew:
        assert "0 under-replicated" in printed[-1].text, [e.text for e in printed]
    else:
        assert "1 under-replicated" in printed[-1].text, [e.text for e in printed]


def test_a_summary_requested_after_a_broker_came_back_counts_what_it_leads() -> None:
    """Broker 2 registers, leader of t-0: the registrations were stamped when read, then
    the partition states read before all was handed on; a summary asked for during that
    read counted t-0 offline, printed after "broker 2 registered"."""
    zk = a_cluster((1,), LeaderAndIsr(2, 3, (2,)))
    state = paths.partition_state("t", 0)
    zk.hook_on = lambda path_list, watch: state in path_list and not watch

    def broker_2_registers() -> None:
        broker(zk, 2)
        zk.fire(paths.BROKER_IDS, "CHILD")

    printed = printed_until_summary(zk, broker_2_registers)
    back = [e for e in printed if e.kind == "broker" and "broker 2" in e.text]
    if back:
        assert "1 online, 0 offline" in printed[-1].text, [e.text for e in printed]
    else:
        assert "0 online, 1 offline" in printed[-1].text, [e.text for e in printed]


def test_a_failed_read_is_reported_again_when_it_fails_again_after_reads_went_through() -> None:
    """A failure of ZooKeeper's answer reported once, the reads going through again, then
    the same failure: it was not reported, its text having been seen once already."""
    zk = a_cluster((1, 2), LeaderAndIsr(1, 3, (1, 2)))
    zk.fail_next = [RuntimeError("the answer could not be decoded")]
    watcher = Watcher(zk)  # type: ignore[arg-type]
    watcher.start()

    def problems() -> list[str]:
        return [e.text for e in watcher.state.timeline if e.kind == "problem"]

    def pump_until(pred: Callable[[], bool]) -> bool:
        deadline = time.monotonic() + 5
        while not pred() and time.monotonic() < deadline:
            watcher.pump(0.1)
        return pred()

    try:
        assert watcher.wait_ready(5)  # after the failure, the retry went through
        assert pump_until(lambda: len(problems()) == 1), problems()
        refreshes = watcher.source.refreshes
        zk.fail_next = [RuntimeError("the answer could not be decoded")]
        zk.fire(paths.CONTROLLER, "CHANGED")
        assert pump_until(lambda: watcher.source.refreshes > refreshes)
        assert pump_until(lambda: len(problems()) == 2), problems()
        assert problems()[0] == problems()[1]
        assert (
            "reading ZooKeeper failed (RuntimeError: the answer could not be decoded)"
            in (problems()[1])
        )
    finally:
        watcher.stop()
