"""The controller's event queue: one thread, FIFO, and events that owe an answer give one
whether they are processed, pre-empted, or fail."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from controller import events as ev
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition

TIMEOUT_S = 10


class Recorder:
    """A process function: records the events it runs on the event thread, or raises for
    the ones it is told to fail."""

    def __init__(self) -> None:
        self.seen: list[ev.ControllerEvent] = []
        self.threads: set[str] = set()
        self.fail: set[int] = set()
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self, event: ev.ControllerEvent) -> None:
        assert self.gate.wait(TIMEOUT_S)
        self.threads.add(threading.current_thread().name)
        self.seen.append(event)
        if id(event) in self.fail:
            raise RuntimeError("this event fails")


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def manager(recorder: Recorder) -> Iterator[ev.ControllerEventManager]:
    m = ev.ControllerEventManager(recorder)
    m.start()
    yield m
    m.close()


def replies() -> tuple[list[tuple[int, list[TopicPartition]]], ev.ShutdownReply]:
    got: list[tuple[int, list[TopicPartition]]] = []
    return got, lambda code, tps: got.append((code, tps))


def test_events_run_in_order_on_one_thread(
    manager: ev.ControllerEventManager, recorder: Recorder
) -> None:
    events = [ev.BrokerChange(), ev.TopicChange(), ev.IsrChangeNotification()]
    for e in events:
        manager.put(e)
    manager.run_on_thread(lambda: None, TIMEOUT_S)
    assert recorder.seen == events
    assert len(recorder.threads) == 1
    assert threading.current_thread().name not in recorder.threads
    assert manager.queue_time.snapshot()["count"] == 4  # the probe too


def test_a_failing_event_does_not_stop_the_thread(
    manager: ev.ControllerEventManager, recorder: Recorder
) -> None:
    failing = ev.TopicChange()
    recorder.fail.add(id(failing))
    manager.put(failing)
    after = manager.put(ev.BrokerChange())
    assert manager.run_on_thread(lambda: 42, TIMEOUT_S) == 42
    assert recorder.seen == [failing, after]


def test_clearing_the_queue_pre_empts_each_queued_event_and_answers_who_waits(
    manager: ev.ControllerEventManager, recorder: Recorder
) -> None:
    recorder.gate.clear()  # the thread holds the first event; the rest stay queued
    running = manager.put(ev.BrokerChange())
    deadline = time.monotonic() + TIMEOUT_S
    while manager.current_event != "BrokerChange":
        assert time.monotonic() < deadline, "the event thread did not take the first event"
        time.sleep(0.001)
    got, reply = replies()
    manager.put(ev.ControlledShutdown(2, 5, reply))
    manager.put(ev.TopicChange())
    expire = manager.clear_and_put(ev.Expire())
    assert got == [(int(ErrorCode.NOT_CONTROLLER), [])]
    recorder.gate.set()
    manager.run_on_thread(lambda: None, TIMEOUT_S)
    assert recorder.seen == [running, expire]


def test_an_event_put_after_close_is_pre_empted(
    manager: ev.ControllerEventManager, recorder: Recorder
) -> None:
    manager.close()
    got, reply = replies()
    manager.put(ev.ControlledShutdown(2, 5, reply))
    assert got == [(int(ErrorCode.NOT_CONTROLLER), [])]
    assert recorder.seen == []


def test_a_controlled_shutdown_is_answered_once() -> None:
    got, reply = replies()
    event = ev.ControlledShutdown(2, 5, reply)
    tp = TopicPartition("t", 0)
    assert event.answer(int(ErrorCode.NONE), [tp])
    event.preempt()  # processing failed after the answer: the answer stands
    assert not event.answer(int(ErrorCode.NONE), [])
    assert got == [(int(ErrorCode.NONE), [tp])]


def test_answers_from_many_threads_give_one_reply() -> None:
    got, reply = replies()
    event = ev.ControlledShutdown(2, 5, reply)
    start = threading.Barrier(8)

    def answer(code: int) -> None:
        start.wait(TIMEOUT_S)
        event.answer(code, [])

    threads = [threading.Thread(target=answer, args=(code,)) for code in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT_S)
    assert len(got) == 1


def test_a_pre_empted_election_request_answers_not_controller_once(
    manager: ev.ControllerEventManager, recorder: Recorder
) -> None:
    """An admin's ElectLeaders dropped from the queue (the controller resigned) is answered
    NOT_CONTROLLER for each partition it named, so the client asks the new controller."""
    manager.close()
    got: list[object] = []
    tps = [TopicPartition("t", 0), TopicPartition("t", 1)]
    event = ev.ElectLeaders(tps, 0, got.append)
    manager.put(event)
    not_controller = (int(ErrorCode.NOT_CONTROLLER), "this broker is not the controller", -1)
    assert got == [{tp: not_controller for tp in tps}]
    assert not event.answer({})
    every = ev.ElectLeaders(None, 1, got.append)
    every.preempt()
    assert got[1:] == [{}]
    assert recorder.seen == []
