"""The loss check of the data-plane tests: an acknowledged message not read back at its
offset is lost, and so is one whose offset was acknowledged again for another message
(a truncation gave the offset away; the later message is what is read back there)."""

from __future__ import annotations

from dataclasses import dataclass

from tests.integration.dataplane import Acked, lost_acknowledged


@dataclass
class Delivered:
    """What confluent-kafka hands a delivery callback, as far as Acked reads it."""

    p: int
    o: int
    v: bytes

    def partition(self) -> int:
        return self.p

    def offset(self) -> int:
        return self.o

    def value(self) -> bytes:
        return self.v


def acked(*messages: tuple[int, int, bytes]) -> Acked:
    a = Acked()
    for p, o, v in messages:
        a.callback(None, Delivered(p, o, v))
    return a


def test_everything_read_back_is_no_loss() -> None:
    a = acked((0, 0, b"a"), (0, 1, b"b"), (1, 0, b"c"))
    assert lost_acknowledged({0: [(0, b"a"), (1, b"b")], 1: [(0, b"c")]}, a) == []


def test_a_message_missing_or_changed_at_its_offset_is_lost() -> None:
    a = acked((0, 0, b"a"), (0, 1, b"b"))
    assert lost_acknowledged({0: [(0, b"a"), (1, b"other")]}, a) == [((0, 1), b"b")]
    assert lost_acknowledged({0: [(0, b"a")]}, a) == [((0, 1), b"b")]


def test_an_offset_acknowledged_twice_loses_the_first_message_once() -> None:
    a = acked((0, 5, b"first"), (0, 5, b"later"))
    assert a.reassigned == [((0, 5), b"first", b"later")]
    # What is read back there is the later message: only the first is lost, counted once.
    assert lost_acknowledged({0: [(5, b"later")]}, a) == [((0, 5), b"first")]


def test_the_same_offset_acknowledged_to_two_producers_is_a_loss() -> None:
    stream, last = acked((0, 7, b"stream")), acked((0, 7, b"last"))
    assert lost_acknowledged({0: [(7, b"last")]}, stream, last) == [((0, 7), b"stream")]
