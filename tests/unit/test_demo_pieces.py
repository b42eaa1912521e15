"""Pieces of `zkctl demo` that need no cluster: the clients' tally."""

from __future__ import annotations

from cluster.demo_workload import Tally


class Msg:
    def __init__(self, partition: int, offset: int, value: bytes) -> None:
        self._p, self._o, self._v = partition, offset, value

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def value(self) -> bytes:
        return self._v


# --- the tally -------------------------------------------------------------------------------


def test_an_offset_acknowledged_for_two_messages_is_a_loss() -> None:
    t = Tally()
    # demo-000000005 is acknowledged at partition 0, offset 5, and read there.
    t.on_delivery(None, Msg(0, 5, b"demo-000000005"))
    t.read[(0, 5)] = b"demo-000000005"
    # A failover truncates offset 5 away; the next message is acknowledged there.
    t.on_delivery(None, Msg(0, 5, b"demo-000000011"))
    t.read[(0, 5)] = b"demo-000000011"
    # demo-000000005 was acknowledged and is in the log nowhere.
    assert t.lost() == [(0, 5)]
    assert t.acknowledged() == 2


def test_every_acknowledged_message_read_back_is_no_loss() -> None:
    t = Tally()
    for offset in range(3):
        value = f"demo-{offset:09d}".encode()
        t.on_delivery(None, Msg(1, offset, value))
        t.read[(1, offset)] = value
    t.on_delivery(None, Msg(1, 2, b"demo-000000002"))  # the same answer twice: no loss
    assert t.lost() == []
    assert t.acknowledged() == 3
