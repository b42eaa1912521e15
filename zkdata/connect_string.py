"""A ZooKeeper connect string, ``host:port[,host:port...][/chroot]``, checked as the
ZooKeeper client (kazoo) will read it, before it is handed over: pure, no resolver asked.

The broker checks its ``zookeeper.connect`` so (a bad value, named at start) and zkctl
its ``--zookeeper``.
"""

from __future__ import annotations

import urllib.parse

from kazoo.hosts import collect_hosts
from kazoo.protocol.paths import normpath


def host_name_problem(host: str) -> str | None:
    """Why the resolver cannot be asked about ``host`` (socket encodes a host with the
    IDNA codec first, which refuses an empty label, "a..b", or one over 63 characters,
    with a UnicodeError, not an OSError); None if it can."""
    try:
        host.encode("idna")
    except UnicodeError as e:
        return str(e.__cause__ or e)
    return None


def connect_string_problem(connect: str) -> str | None:
    """What the client cannot connect with in ``connect``: what kazoo refuses to read (a
    port that is none, a host missing, a relative chroot), a port 0 (kazoo's 2181), or a
    host the resolver cannot be asked about ("a..b": kazoo's connection thread dies on the
    UnicodeError, even with other hosts good, and the caller waits out its whole
    connection timeout); None if nothing."""
    try:
        hosts, chroot = collect_hosts(connect)
    except ValueError as e:
        return str(e)
    for host_port in connect.partition("/")[0].split(","):
        # kazoo reads port 0 as no port given, and connects to 2181: another ZooKeeper
        # perhaps. Kafka 2.8's client takes port 0 as it is, and never connects.
        if urllib.parse.urlsplit("xxx://" + host_port).port == 0:
            return f"{host_port.strip()!r}: port 0 is no port to connect to"
    if chroot:
        # kazoo refuses a relative chroot ("/kafka/../b") only when a client is made: the
        # broker's start then waited out its connection timeout. Kafka 2.8's client
        # refuses it at once (ConnectStringParser: PathUtils.validatePath).
        try:
            normpath(chroot)
        except ValueError as e:
            return f"chroot {chroot!r}: {e}"
    for host, _port in hosts:
        problem = host_name_problem(host)
        if problem is not None:
            return f"{host!r} is not a host name ({problem})"
    return None
