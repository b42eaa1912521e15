"""Connection limits of a broker, as Kafka 2.8's ConnectionQuotas (KIP-402).

- ``max.connections.per.ip`` (``max.connections.per.ip.overrides`` per host): a connection
  from an address that already has that many, across every listener, is closed as soon
  as it is accepted ("Rejected connection from ...").
- ``max.connections``: with that many connections open, the listeners stop accepting: a
  new connection waits (in the listener's backlog, or in its acceptor) until one closes.
  The inter-broker listener is exempt when the broker has other listeners, so that a
  broker full of clients still takes its controller's and followers' connections; each
  of its connections past the limit closes the least recently used connection of another
  listener.

Addresses are counted as Java's InetAddress: an IPv4 client of a dual-stack listener
(::ffff:10.0.0.1) is its IPv4 address, and an IPv6 scope does not make another address.
The rules are pure (``connection_slot_available``, ``over_per_ip_limit``,
``max_connections_exceeded``); ``ConnectionQuotas`` holds the counts under one lock.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Final

log = logging.getLogger(__name__)

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: How long the acceptor waits for a free slot before checking whether it was stopped.
SLOT_WAIT_STEP_S: Final = 0.5


class TooManyConnections(Exception):
    """This address already has its maximum of connections."""

    def __init__(self, ip: IpAddress, max_count: int) -> None:
        super().__init__(
            f"Rejected connection from {ip}, address already has the configured maximum of"
            f" {max_count} connections."
        )
        self.ip = ip
        self.max_count = max_count


class QuotaStopped(Exception):
    """The listener stopped while its acceptor waited for a connection slot."""


def ip_of(host: str) -> IpAddress:
    """The address a connection is counted under (ValueError if ``host`` is no address)."""
    ip = ipaddress.ip_address(host.partition("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def resolve_per_ip_overrides(
    overrides: Mapping[str, int],
    resolve: Callable[[str], str] | None = None,
) -> dict[IpAddress, int]:
    """max.connections.per.ip.overrides with its hosts resolved, as Kafka's
    InetAddress.getByName at start; a host that does not resolve is a ValueError naming it
    (Kafka's broker fails to start with UnknownHostException)."""
    lookup = resolve or _first_address
    resolved: dict[IpAddress, int] = {}
    for host, count in overrides.items():
        try:
            resolved[ip_of(lookup(host))] = count
        except (OSError, UnicodeError, ValueError) as e:
            raise ValueError(
                f"max.connections.per.ip.overrides: cannot resolve host {host!r} ({e})"
            ) from e
    return resolved


def _first_address(host: str) -> str:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    return str(infos[0][4][0])


# ------------------------------------------------------------------ the rules (pure)


def is_protected(listener: str, inter_broker_listener: str, listener_count: int) -> bool:
    """Kafka's protectedListener: the inter-broker listener, if there is another."""
    return listener == inter_broker_listener and listener_count > 1


def connection_slot_available(total: int, max_connections: int, protected: bool) -> bool:
    """Kafka's connectionSlotAvailable (without per-listener limits, which need
    listener.name.* keys)."""
    return protected or total < max_connections


def over_per_ip_limit(count_before: int, max_for_ip: int) -> bool:
    """Whether a connection from an address with ``count_before`` others goes over."""
    return count_before >= max_for_ip


def max_connections_exceeded(total: int, max_connections: int, protected: bool) -> bool:
    """Kafka's maxConnectionsExceeded: a listener that should close a connection."""
    return not protected and total > max_connections


# ------------------------------------------------------------------ the counts


class ConnectionQuotas:
    """The counts of one broker's connections, shared by its listeners."""

    def __init__(
        self,
        *,
        max_connections_per_ip: int,
        per_ip_overrides: Mapping[IpAddress, int],
        max_connections: int,
        inter_broker_listener: str,
        listeners: Iterable[str],
    ) -> None:
        self.max_connections_per_ip = max_connections_per_ip
        self.per_ip_overrides = dict(per_ip_overrides)
        self.max_connections = max_connections
        self.inter_broker_listener = inter_broker_listener
        self._listeners = frozenset(listeners)
        self._cond = threading.Condition()
        self._by_ip: dict[IpAddress, int] = {}
        self.total = 0
        #: Per listener, how to close its least recently used connection (False when it
        #: has none): registered by each socket server.
        self._closers: dict[str, Callable[[], bool]] = {}
        #: connections rejected for their address's limit, and times an acceptor waited
        self.rejected = 0
        self.blocked = 0

    def register_closer(self, listener: str, close_lru: Callable[[], bool]) -> None:
        with self._cond:
            self._closers[listener] = close_lru

    def _protected(self, listener: str) -> bool:
        return is_protected(listener, self.inter_broker_listener, len(self._listeners))

    def max_for(self, ip: IpAddress) -> int:
        return self.per_ip_overrides.get(ip, self.max_connections_per_ip)

    def count(self, ip: IpAddress) -> int:
        with self._cond:
            return self._by_ip.get(ip, 0)

    def inc(self, listener: str, ip: IpAddress, stopped: threading.Event) -> None:
        """Count a connection just accepted on ``listener`` from ``ip``, first waiting for
        a slot under max.connections. Raises TooManyConnections (nothing counted) if the
        address is at its limit, QuotaStopped if ``stopped`` is set while waiting."""
        protected = self._protected(listener)
        with self._cond:
            if not connection_slot_available(self.total, self.max_connections, protected):
                self.blocked += 1
                log.info(
                    "listener %s: %d connections open (max.connections %d): waiting for"
                    " one to close before serving the next",
                    listener,
                    self.total,
                    self.max_connections,
                )
                while not connection_slot_available(self.total, self.max_connections, protected):
                    if stopped.is_set():
                        raise QuotaStopped(listener)
                    self._cond.wait(SLOT_WAIT_STEP_S)
            count = self._by_ip.get(ip, 0)
            max_for_ip = self.max_for(ip)
            if over_per_ip_limit(count, max_for_ip):
                self.rejected += 1
                raise TooManyConnections(ip, max_for_ip)
            self._by_ip[ip] = count + 1
            self.total += 1
            to_close = [
                close
                for name, close in sorted(self._closers.items())
                if max_connections_exceeded(self.total, self.max_connections, self._protected(name))
            ]
        # Outside the lock: closing a connection counts it down (dec) from its own thread.
        if to_close:
            for close in to_close:
                if close():
                    return

    def dec(self, ip: IpAddress) -> None:
        with self._cond:
            count = self._by_ip.get(ip, 0)
            if count <= 0:
                raise RuntimeError(f"closing a connection from {ip} that was never counted")
            if count == 1:
                del self._by_ip[ip]
            else:
                self._by_ip[ip] = count - 1
            self.total -= 1
            self._cond.notify_all()
