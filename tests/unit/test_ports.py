"""Ports for servers started on fixed ports: from below the kernel's ephemeral range, which
neither a listener on port 0 nor an outgoing connection is ever given."""

from __future__ import annotations

import random
import socket
from pathlib import Path

import pytest

from cluster import ports

HOST = "127.0.0.1"


def range_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ip_local_port_range"
    path.write_text(text)
    return path


def test_ports_are_distinct_free_and_below_the_ephemeral_range(tmp_path: Path) -> None:
    got = ports.free_ports(20, HOST, range_file=range_file(tmp_path, "32768\t60999\n"))
    assert len(set(got)) == 20
    assert all(ports.LOWEST <= p < 32768 for p in got)
    socks = []
    try:
        for p in got:  # free: each binds
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(s)
            s.bind((HOST, p))
    finally:
        for s in socks:
            s.close()


def test_a_port_in_use_is_not_given() -> None:
    busy = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        busy.bind((HOST, 0))
        taken = busy.getsockname()[1]
        rng = random.Random(7)
        assert ports._between(1, HOST, taken, taken + 1, rng) is None  # the only one, busy
        got = ports._between(1, HOST, taken - 1, taken + 1, rng)
        assert got in ([taken - 1], None)  # None: that one was busy too
    finally:
        busy.close()


@pytest.mark.parametrize("text", ["", "garbage", "1024 2000\n"])
def test_without_room_below_a_readable_range_the_kernel_picks(tmp_path: Path, text: str) -> None:
    got = ports.free_ports(3, HOST, range_file=range_file(tmp_path, text))
    assert len(set(got)) == 3


def test_the_machines_range_is_read() -> None:
    got = ports.ephemeral_range()
    if got is not None:  # Linux
        low, high = got
        assert 0 < low <= high <= 65535


class _Draws(random.Random):
    """Draws the given ports in turn (then the last again)."""

    def __init__(self, draws: list[int]) -> None:
        super().__init__(0)
        self.draws = draws

    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int:
        return self.draws.pop(0) if len(self.draws) > 1 else self.draws[0]


def test_a_port_handed_out_is_not_handed_out_again_though_still_free() -> None:
    # A port handed out may stay unbound for a while (a ZooKeeper follower's quorum port is
    # bound only if it becomes the leader): another pick must not take it meanwhile.
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.bind((HOST, 0))
    first, second = probe.getsockname()[1], 0
    probe.close()
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.bind((HOST, 0))
    second = probe.getsockname()[1]
    probe.close()
    low, high = min(first, second), max(first, second) + 1
    assert ports._between(1, HOST, low, high, _Draws([first])) == [first]
    assert ports._between(1, HOST, low, high, _Draws([first, first, second])) == [second]
