"""max.connection.creation.rate (KIP-612), as Kafka 2.8's ConnectionQuotas: the broker's
connection rate (Kafka's Rate over a WindowedSum: quota.window.num samples of
quota.window.size.seconds), the throttle time of a connection over it (QuotaUtils.
boundedThrottleTime, at most one window), the acceptor waiting it out, and the protected
inter-broker listener neither recorded nor throttled. Expected figures are worked out by
hand from Kafka's SampledStat, Rate.windowSize and QuotaUtils.throttleTime."""

from __future__ import annotations

import ipaddress
import threading
from contextlib import ExitStack

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.config import load_broker_config
from broker.connection_quotas import (
    INT_MAX,
    ConnectionQuotas,
    QuotaStopped,
    SampledRate,
    connection_throttle_ms,
)
from tests.unit.test_connection_quotas import open_conn, serve, wait_until
from tests.unit.test_socket_framing import answered_id, versions_request

LOCAL = ipaddress.ip_address("127.0.0.1")


def test_a_rate_just_started_counts_at_least_samples_less_one_windows() -> None:
    rate = SampledRate(11, 1000)
    rate.record(1.0, 0)
    assert rate.window_size_ms(0) == 10_000  # 0 elapsed, 10 whole windows assumed
    assert rate.measure(0) == pytest.approx(0.1)
    rate.record(1.0, 2500)  # the first sample is 2.5 windows old: a new one
    assert rate.window_size_ms(2500) == 2500 + 8 * 1000  # 2 whole windows, 8 more
    assert rate.measure(2500) == pytest.approx(2 / 10.5)
    assert rate.window_size_ms(10_999) == 10_999  # 10 whole windows: as measured


def test_samples_a_whole_rate_old_are_reset_and_the_oldest_reused() -> None:
    rate = SampledRate(3, 1000)
    for t in (0, 1000, 2000):  # three samples, one a window
        rate.record(5.0, t)
    assert rate.measure(2000) == pytest.approx(15 / 2.0)
    rate.record(1.0, 3000)  # the fourth window reuses the first sample
    assert rate.measure(3000) == pytest.approx(11 / 2.0)  # oldest began at 1000
    # At 4000 the sample begun at 1000 is 3 windows old: purged (reset to begin at
    # 4000, empty), so the oldest is 2000's.
    assert rate.measure(4000) == pytest.approx(6 / 2.0)
    assert rate.measure(9000) == pytest.approx(0.0)


def test_a_connection_over_the_rate_waits_its_share_of_the_window_at_most_one() -> None:
    """11 windows of 1 s: 20 connections at one instant are 2/s, at a limit of 2 none
    waits; the 21st (2.1/s) waits 0.1 / 2 * 10 s = 500 ms, the 22nd 1000 ms, the 23rd
    1500 ms, bounded to one window (1000 ms)."""
    rate = SampledRate(11, 1000)
    waits = [connection_throttle_ms(rate, 2, 1000, 0) for _ in range(23)]
    assert waits == [0] * 20 + [500, 1000, 1000]


def test_a_limit_of_0_throttles_every_connection_one_window() -> None:
    """Kafka's throttleTime divides by the bound: infinity for 0, bounded to a window."""
    rate = SampledRate(11, 1000)
    assert [connection_throttle_ms(rate, 0, 1000, t) for t in (0, 5, 3000)] == [1000] * 3


def test_throttle_times_follow_the_time_the_rate_is_measured_over() -> None:
    """2 windows of 1 s (1 s assumed at first), a limit of 2/s: 3 connections at 0 are
    3/s, the third waits (3 - 2) / 2 * 1000 = 500 ms; 4 more a window later, each over
    the 1 s measured since the first sample began: 4/s waits 1000 ms, then 1500, 2000,
    2500 (bounded here at 10 s). 161 at once over 11 windows at 16/s: 16.1/s, 62.5 ms
    rounded half up as Java's Math.round."""
    spread = SampledRate(2, 1000)
    times = [0, 0, 0, 1000, 1000, 1000, 1000]
    waits = [connection_throttle_ms(spread, 2, 10_000, t) for t in times]
    assert waits == [0, 0, 500, 1000, 1500, 2000, 2500]
    rate = SampledRate(11, 1000)
    assert [connection_throttle_ms(rate, 16, 1000, 0) for _ in range(161)][-2:] == [0, 63]


@given(
    st.integers(min_value=1, max_value=20),
    st.integers(min_value=1, max_value=5000),
    st.integers(min_value=0, max_value=50),
    st.lists(st.integers(min_value=0, max_value=3000), min_size=1, max_size=40),
)
def test_a_throttle_is_never_negative_nor_more_than_the_bound(
    samples: int, window_ms: int, limit: int, gaps: list[int]
) -> None:
    rate = SampledRate(samples, window_ms)
    now = 0
    for gap in gaps:
        now += gap
        wait = connection_throttle_ms(rate, limit, window_ms, now)
        assert 0 <= wait <= window_ms
        if rate.measure(now) <= limit:
            assert wait == 0


def test_one_sample_just_begun_is_an_infinite_rate_that_waits_nothing() -> None:
    """quota.window.num=1: no time elapsed is a window of 0 ms, Java's rate infinite and
    its throttle time NaN, which Math.round makes 0; once time has passed, the rate is
    over the time since the sample began."""
    rate = SampledRate(1, 1000)
    assert connection_throttle_ms(rate, 1, 1000, 0) == 0
    assert rate.measure(0) == float("inf")
    # 2 in 0.5 s: 4/s, (4 - 1) / 1 * 500 ms
    assert connection_throttle_ms(rate, 1, 10_000, 500) == 1500


class StepClock:
    """Milliseconds that advance ``step`` at each reading."""

    def __init__(self, step: int) -> None:
        self.now = 0
        self.step = step

    def __call__(self) -> int:
        self.now += self.step
        return self.now


def rate_quotas(rate: int, clock: StepClock | None = None) -> ConnectionQuotas:
    return ConnectionQuotas(
        max_connections_per_ip=INT_MAX,
        per_ip_overrides={},
        max_connections=INT_MAX,
        inter_broker_listener="REPLICATION",
        listeners=("PLAINTEXT", "REPLICATION"),
        max_connection_creation_rate=rate,
        quota_window_num=2,
        quota_window_size_seconds=1,
        clock_ms=clock or StepClock(0),
    )


def test_the_acceptor_waits_out_its_throttle_then_counts_the_connection() -> None:
    """At 1/s over 2 windows (1 s assumed), a second connection 400 ms after the first
    is 2/s: it waits (2 - 1) / 1 * 1000 ms, until the clock (400 ms a reading) has
    passed it; the first did not wait."""
    q = rate_quotas(1, StepClock(400))
    stopped = threading.Event()
    q.inc("PLAINTEXT", LOCAL, stopped)
    assert (q.blocked, q.total) == (0, 1)
    q.inc("PLAINTEXT", LOCAL, stopped)
    assert (q.blocked, q.total) == (1, 2)


def test_the_protected_listener_is_neither_recorded_nor_throttled() -> None:
    """Kafka's recordConnectionAndGetThrottleTimeMs: the inter-broker listener, when
    there are others, has no broker-wide rate (a broker's controller and followers always
    connect)."""
    q = rate_quotas(0)
    stopped = threading.Event()
    for _ in range(5):
        q.inc("REPLICATION", LOCAL, stopped)
    assert (q.blocked, q.total) == (0, 5)
    assert q.connection_rate.measure(0) == 0.0


def test_a_stopped_listener_stops_waiting_out_a_throttle() -> None:
    q = rate_quotas(0)  # every connection throttled a whole window; the clock stands
    stopped = threading.Event()
    stopped.set()
    with pytest.raises(QuotaStopped):
        q.inc("PLAINTEXT", LOCAL, stopped)
    assert q.total == 0


def test_a_listener_over_the_rate_serves_every_connection_after_its_wait() -> None:
    """On loopback: with a limit of 0, each connection waits one window (1 s) and is
    then served; none is refused."""
    with ExitStack() as stack:
        q = ConnectionQuotas(
            max_connections_per_ip=INT_MAX,
            per_ip_overrides={},
            max_connections=INT_MAX,
            inter_broker_listener="PLAINTEXT",
            listeners=("PLAINTEXT",),
            max_connection_creation_rate=0,
            quota_window_num=11,
            quota_window_size_seconds=1,
        )
        s = serve(stack, q, "PLAINTEXT")
        clients = [open_conn(stack, s) for _ in range(2)]
        for i, c in enumerate(clients):
            c.sendall(versions_request(i + 1))
            assert answered_id(c) == i + 1
        wait_until(lambda: q.blocked == 2, "both connections throttled")
        assert q.total == 2


def test_the_broker_reads_the_rate_and_its_windows() -> None:
    config = load_broker_config(
        None,
        [
            "broker.id=1",
            "zookeeper.connect=127.0.0.1:2181",
            "max.connection.creation.rate=7",
            "quota.window.num=4",
            "quota.window.size.seconds=3",
        ],
    )
    assert (
        config.max_connection_creation_rate,
        config.quota_window_num,
        config.quota_window_size_seconds,
    ) == (7, 4, 3)
