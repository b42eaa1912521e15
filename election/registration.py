"""Broker registration: the ephemeral `/brokers/ids/<id>` and the broker epoch.

The broker epoch is the registration znode's czxid (KIP-380): it grows every time the
broker registers in a new session, so the controller can tell a bounced broker from one
that never left, and a broker can refuse requests meant for its previous incarnation.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from zkdata import paths
from zkdata.client import NodeExistsError, ZkClient
from zkdata.znodes import BrokerRegistration, encode_broker

log = logging.getLogger(__name__)


class BrokerIdInUse(RuntimeError):
    """Another live broker holds this broker id."""


def register_broker(
    zk: ZkClient,
    registration: BrokerRegistration,
    *,
    wait_for_stale_s: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> int:
    """Create `/brokers/ids/<id>` (ephemeral) and return the broker epoch (its czxid).

    If the znode exists and belongs to this session (a retried create after a lost
    connection), it is ours. If it belongs to another session, that may be this broker's
    previous incarnation whose session has not expired yet (KAFKA-7165): wait up to
    `wait_for_stale_s` (default: the session timeout plus a margin) for it to go, then
    fail with BrokerIdInUse, since a live broker with the same id is a configuration error.
    """
    path = paths.broker(registration.broker_id)
    data = encode_broker(registration)
    wait_s = wait_for_stale_s if wait_for_stale_s is not None else zk.session_timeout_ms / 1000 + 5
    deadline = time.monotonic() + wait_s
    announced = False
    while True:
        try:
            _, stat = zk.create(path, data, ephemeral=True)
            return int(stat.czxid)
        except NodeExistsError:
            pass
        existing = zk.exists(path)
        if existing is None:
            continue  # it went away between our create and our look: try again
        if int(existing.ephemeralOwner) == zk.session_id:
            return int(existing.czxid)
        if time.monotonic() >= deadline:
            raise BrokerIdInUse(
                f"broker id {registration.broker_id} is registered at {path} by another "
                f"ZooKeeper session (0x{int(existing.ephemeralOwner):x}) that stayed alive for "
                f"{wait_s:.0f} s: is another broker running with the same broker.id?"
            )
        if not announced and progress is not None:
            progress(
                f"{path} still belongs to an earlier session (0x{int(existing.ephemeralOwner):x}); "
                "waiting for it to expire"
            )
            announced = True
        gone = threading.Event()
        if zk.kazoo.exists(path, watch=lambda _event, gone=gone: gone.set()) is None:
            continue
        gone.wait(min(1.0, max(0.0, deadline - time.monotonic())))
