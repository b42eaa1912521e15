"""Free TCP ports for the servers this project starts on fixed ports (brokers, ZooKeeper).

A port picked now is bound by its server a moment later, or at each restart of a broker
that keeps its port. A port the kernel hands out itself (bind to port 0, or the local end
of an outgoing connection) may be given to any other socket in between: another broker's
listener on port 0, a client connecting to ZooKeeper. So the ports come from below the
kernel's ephemeral range (Linux's ip_local_port_range), which the kernel never hands out:
only a process binding that very port can take it. Where that range cannot be read or
leaves too little room below it, the kernel picks (bind to port 0), as before.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
# The lowest port handed out: below it are the well-known and registered services.
LOWEST = 10_000
# At least this many ports below the ephemeral range, or the kernel picks.
MIN_ROOM = 1_000
# Candidates tried per port wanted before giving up on the range.
TRIES_PER_PORT = 50
# Every port this process handed out: one may stay unbound for a while after (a ZooKeeper
# follower's quorum port is bound only by a leader, a stopped broker's until it restarts),
# so "it binds now" does not make it free for another server of this process.
_HANDED_OUT: set[int] = set()


def ephemeral_range(path: Path = EPHEMERAL_RANGE_FILE) -> tuple[int, int] | None:
    """The kernel's ephemeral port range, or None if it cannot be read."""
    try:
        low, high = (int(v) for v in path.read_text().split())
    except (OSError, ValueError):
        return None
    return low, high


def free_ports(
    count: int,
    host: str,
    *,
    range_file: Path = EPHEMERAL_RANGE_FILE,
) -> list[int]:
    """``count`` distinct ports free on ``host`` now (all bound at once, then released)."""
    ephemeral = ephemeral_range(range_file)
    if ephemeral is not None and ephemeral[0] - LOWEST >= MIN_ROOM:
        picked = _between(count, host, LOWEST, ephemeral[0], random.SystemRandom())
        if picked is not None:
            return picked
    return _kernel_picked(count, host)


def _between(count: int, host: str, low: int, high: int, rng: random.Random) -> list[int] | None:
    """``count`` distinct ports in [low, high) that bind now, or None if not found."""
    socks: list[socket.socket] = []
    try:
        for _ in range(count * TRIES_PER_PORT):
            if len(socks) == count:
                break
            port = rng.randrange(low, high)
            if port in _HANDED_OUT:
                continue
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind((host, port))
            except OSError:  # in use (or the same port drawn twice)
                sock.close()
                continue
            socks.append(sock)
        if len(socks) < count:
            return None
        picked = [s.getsockname()[1] for s in socks]
        _HANDED_OUT.update(picked)
        return picked
    finally:
        for sock in socks:
            sock.close()


def _kernel_picked(count: int, host: str) -> list[int]:
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(sock)
            sock.bind((host, 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for sock in socks:
            sock.close()
