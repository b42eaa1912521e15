"""Broker registration: the ephemeral `/brokers/ids/<id>` and the broker epoch.

The broker epoch is the registration znode's czxid (KIP-380): it grows every time the
broker registers in a new session, so the controller can tell a bounced broker from one
that never left, and a broker can refuse requests meant for its previous incarnation.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from kazoo.protocol.states import ZnodeStat

from zkdata import paths
from zkdata.client import CancelledWhileDisconnected, NodeExistsError, ZkClient
from zkdata.znodes import BrokerRegistration, MalformedZnode, decode_broker, encode_broker

log = logging.getLogger(__name__)

T = TypeVar("T")


class BrokerIdInUse(RuntimeError):
    """Another live broker holds this broker id."""


class EndpointsInUse(ValueError):
    """Another registered broker advertises a host:port this broker would advertise."""


class RegistrationCancelled(RuntimeError):
    """The broker was asked to stop while it registered: waiting for its earlier
    session's znode to go, or (start-up) for a lost connection to come back."""


def check_endpoints_unclaimed(zk: ZkClient, registration: BrokerRegistration) -> None:
    """Refuse (EndpointsInUse) to register endpoints another registered broker advertises,
    as Kafka 2.8's KafkaServer.createBrokerInfo does before its registration: clients,
    followers and the controller would reach that broker for this one. Kafka compares the
    configured advertised listeners, so a port 0 one (host:0) never matches; here the
    endpoints compared are those that would be registered, their real ports in. A
    registration that cannot be read is skipped with a warning (Kafka's decoder throws,
    and the start fails on another broker's znode)."""
    mine = [f"{ep.host}:{ep.port}" for ep in registration.endpoints]
    children = zk.get_children(paths.BROKER_IDS) or []
    others = sorted(
        broker_id
        for child in children
        if (broker_id := paths.parse_broker_id(child)) is not None
        and broker_id != registration.broker_id
    )
    for broker_id, got in zip(others, zk.get_many([paths.broker(b) for b in others]), strict=True):
        if got is None:
            continue  # gone since the listing
        try:
            other = decode_broker(broker_id, got[0])
        except MalformedZnode as e:
            log.warning("%s; not checked for endpoints this broker advertises", e)
            continue
        common = [e for e in (f"{ep.host}:{ep.port}" for ep in other.endpoints) if e in mine]
        if common:
            raise EndpointsInUse(
                f"Configured end points {','.join(common)} in advertised listeners are"
                f" already registered by broker {broker_id}"
            )


def register_broker(
    zk: ZkClient,
    registration: BrokerRegistration,
    *,
    wait_for_stale_s: float | None = None,
    progress: Callable[[str], None] | None = None,
    cancelled: threading.Event | None = None,
    until_connected: bool = False,
) -> int:
    """Create `/brokers/ids/<id>` (ephemeral) and return the broker epoch (its czxid).

    If the znode exists and belongs to this session (a retried create after a lost
    connection), it is ours. If it belongs to another session, that may be this broker's
    previous incarnation whose session has not expired yet (KAFKA-7165): wait up to
    `wait_for_stale_s` (default: the session timeout plus a margin) for it to go, then
    fail with BrokerIdInUse, since a live broker with the same id is a configuration error.
    The wait starts over whenever our connection is lost meanwhile: ZooKeeper gives every
    session a fresh timeout after an outage or a new leader.
    ``cancelled`` set during that wait (the broker is asked to stop) ends it with
    RegistrationCancelled. ``until_connected``: a lost connection is waited out, as
    Kafka's client does (a start-up); otherwise it is the caller's (ConnectionLoss).
    """
    path = paths.broker(registration.broker_id)
    data = encode_broker(registration)
    wait_s = wait_for_stale_s if wait_for_stale_s is not None else zk.session_timeout_ms / 1000 + 5
    started = time.monotonic()
    deadline = started + wait_s
    disconnections = zk.disconnections
    announced = False

    def retried(fn: Callable[[], T]) -> T:
        # Each step is safe to repeat: a create the server applied before its answer was
        # lost is found ours below.
        if not until_connected:
            return fn()
        try:
            return zk.until_connected(fn, cancelled=cancelled)
        except CancelledWhileDisconnected as e:
            raise RegistrationCancelled(f"asked to stop while registering {path}: {e}") from e

    def watch_gone(gone: threading.Event) -> ZnodeStat | None:
        return zk.exists(path, watcher=lambda _event: gone.set())

    while True:
        try:
            _, stat = retried(lambda: zk.create(path, data, ephemeral=True))
            return int(stat.czxid)
        except NodeExistsError:
            pass
        existing = retried(lambda: zk.exists(path))
        if existing is None:
            continue  # it went away between our create and our look: try again
        if int(existing.ephemeralOwner) == zk.session_id:
            return int(existing.czxid)
        if zk.disconnections != disconnections:
            # Our connection went meanwhile: perhaps ZooKeeper itself (an outage, a new
            # leader), which gives every session a fresh timeout when it is back. The
            # earlier session may live a whole timeout more: wait for it again.
            disconnections = zk.disconnections
            deadline = time.monotonic() + wait_s
            log.info(
                "ZooKeeper connection lost while waiting for %s: waiting %.0f s more", path, wait_s
            )
        if time.monotonic() >= deadline:
            raise BrokerIdInUse(
                f"broker id {registration.broker_id} is registered at {path} by another "
                f"ZooKeeper session (0x{int(existing.ephemeralOwner):x}) that stayed alive for "
                f"{time.monotonic() - started:.0f} s: is another broker running with the same"
                " broker.id?"
            )
        if not announced and progress is not None:
            progress(
                f"{path} still belongs to an earlier session (0x{int(existing.ephemeralOwner):x}); "
                "waiting for it to expire"
            )
            announced = True
        if cancelled is not None and cancelled.is_set():
            raise RegistrationCancelled(
                f"asked to stop while {path} still belonged to an earlier session"
            )
        gone = threading.Event()
        if retried(functools.partial(watch_gone, gone)) is None:
            continue
        # A short wait: a stop asked for meanwhile is seen within a fifth of a second.
        gone.wait(min(0.2, max(0.0, deadline - time.monotonic())))
