"""Fixtures shared by the whole suite: ZooKeeper (via cluster.zookeeper) and a leak check."""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import settings

from cluster import zookeeper as zkp
from tests.backstop import pytest_configure, pytest_runtest_protocol

__all__ = ["pytest_configure", "pytest_runtest_protocol"]  # the backstop's hooks, for pytest

# No deadline for hypothesis examples: a deadline is a timed assertion, and on a loaded
# machine (CI's two cores, shared with ZooKeeper and brokers) an example that writes a
# file can take over the default 200 ms once and fail a correct test. Speed is measured
# under benchmarks/.
settings.register_profile("zkctl", deadline=None)
settings.load_profile("zkctl")


@pytest.fixture(scope="session")
def zookeeper() -> Iterator[zkp.ZooKeeper]:
    """One ZooKeeper for the session: ZKCTL_ZOOKEEPER if set, else a container, else local."""
    handle = zkp.provision()
    try:
        yield handle
    finally:
        handle.close()


@pytest.fixture
def zk_connect(zookeeper: zkp.ZooKeeper, request: pytest.FixtureRequest) -> Iterator[str]:
    """A connect string with a fresh chroot of this test's own (created; deleted afterwards)."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)[:80]
    connect = zkp.chroot_connect_string(
        zookeeper.connect_string, f"/tests/{name}-{uuid.uuid4().hex[:8]}"
    )
    yield connect
    with contextlib.suppress(Exception):  # best effort: the server may be gone by now
        zkp.delete_chroot(connect)


@pytest.fixture
def zk_ensemble() -> Iterator[zkp.LocalZooKeeper]:
    """A fresh three-server local ensemble per test, since tests kill and pause its members."""
    ensemble = zkp.start_local(servers=3)
    try:
        yield ensemble
    finally:
        ensemble.close()


@pytest.fixture(scope="session", autouse=True)
def _no_leaked_processes() -> Iterator[None]:
    """Set up first, torn down last: fail if a process this session started still runs."""
    yield
    leaked = zkp.kill_leftover_processes()
    if leaked:
        pytest.fail(
            f"processes started by this test session were still running (now killed): {leaked}",
            pytrace=False,
        )
