"""The supervised cluster, under the names the tests use (it lives in cluster/supervised.py),
a helper for ZooKeeper ensemble faults, and the CLI run as a user runs it."""

import subprocess
import sys
from collections.abc import Iterable
from typing import Any, Protocol

from cluster import zookeeper as zkp
from cluster.supervised import PROJECT_ROOT, wait_for
from cluster.supervised import SupervisedBroker as BrokerProcess
from cluster.supervised import SupervisedCluster as Cluster

__all__ = [
    "BrokerProcess",
    "Cluster",
    "close_all",
    "logged",
    "run_zkctl",
    "serving_member",
    "wait_for",
]


class Closable(Protocol):
    def close(self) -> None: ...


def close_all(closables: Iterable[Closable]) -> list[str]:
    """Close each one, whatever closing another raised (a test's teardown must stop every
    cluster it made, not leave the rest running to the end of the session); what each that
    failed raised."""
    errors = []
    for c in closables:
        try:
            c.close()
        except Exception as e:
            errors.append(f"{c!r}: {type(e).__name__}: {e}")
    return errors


def logged(c: Cluster, broker_id: int, event: str, count: int) -> list[dict[str, Any]]:
    """Broker `broker_id`'s state-change log rows of `event`, once there are `count` (a row
    is written just after the znode write it records)."""

    def rows() -> list[dict[str, Any]] | None:
        got = c[broker_id].state_changes(event)
        return got if len(got) >= count else None

    return wait_for(rows, 30, f"{count} {event} rows in broker {broker_id}'s state-change log")


def run_zkctl(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m zkctl ...`, as a user runs it (no ZooKeeper given)."""
    return subprocess.run(
        [sys.executable, "-m", "zkctl", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=PROJECT_ROOT,
    )


def serving_member(ensemble: zkp.LocalZooKeeper, session_id: int) -> zkp.LocalServer:
    """The ensemble member a session is connected to (from each member's `cons` list)."""

    def find() -> zkp.LocalServer | None:
        for s in ensemble.servers:
            cons = zkp.four_letter_word(zkp.HOST, s.client_port, "cons") or ""
            if f"sid=0x{session_id:x}," in cons or f"sid=0x{session_id:x})" in cons:
                return s
        return None

    return wait_for(find, 30, f"the member serving session 0x{session_id:x}")
