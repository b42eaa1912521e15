"""A broker process stopped by SIGHUP (its terminal closed, its ssh session dropped)
shuts down as on SIGTERM, as Kafka 2.8's does (the JVM runs its shutdown hook on HUP):
a controlled shutdown, its logs closed cleanly, its registration gone at once."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import pytest

from tests.integration.conftest import ClusterFactory

pytestmark = pytest.mark.integration


@pytest.fixture
def sighup_default() -> Iterator[None]:
    """Brokers inherit the test runner's SIGHUP disposition, and one started with SIGHUP
    ignored (the runner under nohup, as a CI job may be) rightly keeps ignoring it: the
    brokers of this test start with the default."""
    before = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGHUP, before)


def test_sighup_stops_the_broker_cleanly(
    sighup_default: None, cluster_factory: ClusterFactory
) -> None:
    """It died at once of the signal: no controlled shutdown, no clean-shutdown marker
    (every log recovered at the next start), /brokers/ids/1 left until its session
    timed out."""
    c = cluster_factory((1, 2), zookeeper_session_timeout_ms="30000")
    c.create_topic("t", {0: (1, 2), 1: (2, 1)})
    c.wait_topic_online("t")
    b = c[1]
    b.signal(signal.SIGHUP)
    code = b.wait_exit(60)
    assert code == 0, f"exit code {code} (negative: killed by the signal)"
    assert (b.first_log_dir / ".kafka_cleanshutdown").exists()
    # Closed, not expired: a 30 s session would have kept it much longer.
    deadline = time.monotonic() + 5
    while 1 in c.registered() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert 1 not in c.registered()
    assert "received SIGHUP" in b.output()
