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

- ``max.connection.creation.rate`` (KIP-612): every connection accepted by a listener other
  than the protected inter-broker one is recorded in the broker's connection rate; once the
  rate is above the limit, the acceptor waits the throttle time Kafka's quota computes
  (``(rate - limit) / limit * window``, at most one ``quota.window.size.seconds``) before
  serving the connection, so that the listeners accept at about that rate. The rate is
  Kafka's ``Rate`` over ``quota.window.num`` samples of ``quota.window.size.seconds`` each
  (``SampledRate``, pure, over times given to it).

Addresses are counted as Java's InetAddress: an IPv4 client of a dual-stack listener
(::ffff:10.0.0.1) is its IPv4 address, and an IPv6 scope does not make another address.
The rules are pure (``connection_slot_available``, ``over_per_ip_limit``,
``max_connections_exceeded``); ``ConnectionQuotas`` holds the counts under one lock.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

log = logging.getLogger(__name__)

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: How long the acceptor waits for a free slot before checking whether it was stopped.
SLOT_WAIT_STEP_S: Final = 0.5
#: Kafka's default of max.connection.creation.rate (Int.MaxValue): no limit in practice.
INT_MAX: Final = 2**31 - 1


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


@dataclass
class _Sample:
    last_window_ms: int
    value: float = 0.0


class SampledRate:
    """Kafka's Rate of a WindowedSum (org.apache.kafka.common.metrics.stats), per second:
    at most ``samples`` samples of ``window_ms`` each, a sample reset once it is
    ``samples * window_ms`` old, the sum divided by the time since the oldest sample
    began, counted as at least ``samples - 1`` whole windows (a rate just started is not
    taken for a burst)."""

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        """SampledStat.record: into the current sample, or the next one once the current
        is a window old (the oldest reused once there are ``samples``)."""
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        sample = self._samples[self._current]
        if now_ms - sample.last_window_ms >= self.window_ms:
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._samples):
                sample = _Sample(now_ms)
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample.last_window_ms, sample.value = now_ms, 0.0
        sample.value += value

    def _purge(self, now_ms: int) -> None:
        expire_age = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.last_window_ms >= expire_age:
                sample.last_window_ms, sample.value = now_ms, 0.0

    def window_size_ms(self, now_ms: int) -> int:
        """Rate.windowSize: the elapsed time the rate is measured over."""
        self._purge(now_ms)
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        oldest = min(s.last_window_ms for s in self._samples)
        elapsed = now_ms - oldest
        full_windows = elapsed // self.window_ms
        if full_windows < self.samples - 1:
            elapsed += (self.samples - 1 - full_windows) * self.window_ms
        return elapsed

    def measure(self, now_ms: int) -> float:
        """The rate per second at ``now_ms``."""
        self._purge(now_ms)
        total = sum(s.value for s in self._samples)
        window_ms = self.window_size_ms(now_ms)
        if window_ms == 0:
            # Java's double division (quota.window.num=1, no time elapsed yet)
            return math.inf if total > 0 else math.nan
        return total / (window_ms / 1000)


def _java_round(x: float) -> int:
    """Java's Math.round: half up, infinity saturating at Long.MAX_VALUE, NaN 0."""
    if math.isnan(x):
        return 0
    return (1 << 63) - 1 if math.isinf(x) else math.floor(x + 0.5)


def connection_throttle_ms(
    rate: SampledRate, max_rate: int, max_throttle_ms: int, now_ms: int
) -> int:
    """Record one connection in ``rate``; the time to wait before serving it (Kafka's
    recordAndGetThrottleTimeMs: QuotaUtils.boundedThrottleTime of the violation, 0 when the
    rate is at most ``max_rate``)."""
    rate.record(1.0, now_ms)
    value = rate.measure(now_ms)
    if value <= max_rate:
        return 0
    # Over a window of 0 ms (one sample, just begun) the product is NaN, which Kafka's
    # Math.round makes 0: no wait.
    over = (value - max_rate) / max_rate if max_rate else math.inf
    return min(_java_round(over * rate.window_size_ms(now_ms)), max_throttle_ms)


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
        max_connection_creation_rate: int = INT_MAX,
        quota_window_num: int = 11,
        quota_window_size_seconds: int = 1,
        clock_ms: Callable[[], int] = lambda: time.monotonic_ns() // 1_000_000,
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
        #: (for a slot, or for its connection rate)
        self.rejected = 0
        self.blocked = 0
        #: max.connection.creation.rate over the listeners but the protected one
        self.max_connection_creation_rate = max_connection_creation_rate
        self.connection_rate = SampledRate(quota_window_num, quota_window_size_seconds * 1000)
        #: Kafka's ConnectionQuotas.maxThrottleTimeMs: one quota window
        self.max_throttle_ms = quota_window_size_seconds * 1000
        self._clock_ms = clock_ms

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
            start_ms = self._clock_ms()
            throttle_ms = (
                0
                if protected
                else connection_throttle_ms(
                    self.connection_rate,
                    self.max_connection_creation_rate,
                    self.max_throttle_ms,
                    start_ms,
                )
            )
            slot = connection_slot_available(self.total, self.max_connections, protected)
            if throttle_ms > 0 or not slot:
                self.blocked += 1
                if not slot:
                    log.info(
                        "listener %s: %d connections open (max.connections %d): waiting for"
                        " one to close before serving the next",
                        listener,
                        self.total,
                        self.max_connections,
                    )
                else:
                    log.debug(
                        "listener %s: connection rate above max.connection.creation.rate %d:"
                        " waiting %d ms",
                        listener,
                        self.max_connection_creation_rate,
                        throttle_ms,
                    )
                end_ms = start_ms + throttle_ms
                while True:
                    remaining_ms = end_ms - self._clock_ms()
                    if remaining_ms <= 0 and connection_slot_available(
                        self.total, self.max_connections, protected
                    ):
                        break
                    if stopped.is_set():
                        raise QuotaStopped(listener)
                    step = SLOT_WAIT_STEP_S
                    if remaining_ms > 0:
                        step = min(step, remaining_ms / 1000)
                    self._cond.wait(step)
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
