"""Incremental fetch sessions (KIP-227) between real brokers, and with a raw client.

Followers keep one session per leader: after one full fetch their fetches list only
changes, and the leader still counts every partition of the session as fetched, so the
ISRs stay full while the wire carries next to nothing. These tests check behaviour
(ISRs, sessions made, partitions answered), never timings.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from tests.integration.conftest import ClusterFactory
from tests.integration.harness import Cluster, wait_for
from wire.api import ApiKey
from wire.client import KafkaConnection
from wire.errors import ErrorCode
from zkdata import paths
from zkdata.znodes import TopicPartition, decode_partition_state, encode_partition_list

pytestmark = pytest.mark.integration

BROKERS = (1, 2, 3)
SESSION_CREATED = re.compile(r"created fetch session (\d+) for replica (\d+)")


def rotating(partitions: int, shift: int = 0) -> dict[int, tuple[int, ...]]:
    """RF 3, preferred leaders spread over the brokers."""
    return {p: tuple(BROKERS[(p + shift + i) % 3] for i in range(3)) for p in range(partitions)}


def create_topics(c: Cluster, topics: int, per_topic: int) -> list[TopicPartition]:
    tps = []
    for t in range(topics):
        name = f"t{t:03d}"
        c.create_topic(name, rotating(per_topic, t))
        tps += [TopicPartition(name, p) for p in range(per_topic)]
    return tps


def isrs(
    c: Cluster, tps: list[TopicPartition]
) -> dict[TopicPartition, tuple[int, tuple[int, ...]]]:
    """(leader, ISR) of each partition that has a state yet."""
    state_paths = [paths.partition_state(tp.topic, tp.partition) for tp in tps]
    out = {}
    for tp, path, got in zip(tps, state_paths, c.zk.get_many(state_paths), strict=True):
        if got is not None:
            s = decode_partition_state(path, got[0], got[1].version).leader_and_isr
            out[tp] = (s.leader, s.isr)
    return out


def all_in_sync(c: Cluster, tps: list[TopicPartition]) -> bool:
    states = isrs(c, tps)
    return len(states) == len(tps) and all(
        leader >= 0 and sorted(isr) == list(BROKERS) for leader, isr in states.values()
    )


def sessions_created(c: Cluster, leader: int, start: int | None = None) -> list[int]:
    """The replica ids of the follower sessions `leader` made (in its `start`-th run)."""
    b = c[leader]
    runs = range(b.starts) if start is None else [start]
    text = "\n".join((b.root / f"broker-{i}.out").read_text(errors="replace") for i in runs)
    return [int(m.group(2)) for m in SESSION_CREATED.finditer(text)]


def settled_sessions(
    c: Cluster, leaders: tuple[int, ...], quiet_s: float = 2.0
) -> dict[int, list[int]]:
    """Each leader's sessions_created once no new session appeared for `quiet_s`: while
    topics are being created a follower may still start its sessions over."""
    seen: dict[int, list[int]] = {}
    since = time.monotonic()

    def quiet() -> bool:
        nonlocal seen, since
        now = {leader: sessions_created(c, leader) for leader in leaders}
        if now != seen:
            seen, since = now, time.monotonic()
            return False
        return time.monotonic() - since >= quiet_s

    wait_for(quiet, 60, "fetch sessions to settle", interval=0.5)
    return seen


# What a broker logs when its fetchers start over, or when it re-registers.
FETCHER_NEWS = re.compile(
    r"fetch from leader|fetch session|moved from|no address known|registered|session expired"
)


def fetcher_lines(c: Cluster) -> list[str]:
    """Each broker's log lines that say why a follower may have started a session over."""
    return [
        f"broker {b}: {line}"
        for b in BROKERS
        for line in c[b].output().splitlines()
        if FETCHER_NEWS.search(line)
    ][-40:]


def test_isrs_stay_full_over_idle_incremental_fetches_and_a_restarted_follower_rejoins(
    cluster_factory: ClusterFactory,
) -> None:
    # A short lag allowance: a follower not counted as fetching would be out in seconds.
    c = cluster_factory(replica_lag_time_max_ms="2000")
    c.wait_controller()
    tps = create_topics(c, topics=20, per_topic=100)
    wait_for(lambda: all_in_sync(c, tps), 120, "2000 partitions in sync", interval=0.5)
    # Each leader has one session per follower, made once: later fetches are incremental.
    wait_for(
        lambda: all(
            sorted(set(sessions_created(c, b))) == [f for f in BROKERS if f != b] for b in BROKERS
        ),
        60,
        "a session from each follower on each leader",
    )
    before = settled_sessions(c, BROKERS)
    time.sleep(3 * 2.0)  # well past replica.lag.time.max.ms, with no data flowing
    assert all_in_sync(c, tps), "idle followers fell out of the ISR"
    after = {b: sessions_created(c, b) for b in BROKERS}
    assert after == before, f"sessions were remade: {after} after {before}\n" + "\n".join(
        fetcher_lines(c)
    )

    c[3].kill()
    wait_for(
        lambda: all(3 not in isr for _, isr in isrs(c, tps).values()),
        c.session_timeout_s + 60,
        "broker 3 out of every ISR",
        interval=0.5,
    )
    c[3].start()
    wait_for(lambda: all_in_sync(c, tps), 120, "broker 3 back in every ISR", interval=0.5)
    # The restarted follower opened new sessions on both leaders. A leader records a
    # full fetch's positions (and may widen the ISR) before its long poll, and makes the
    # session when it answers: the ISR can show broker 3 first.
    for leader in (1, 2):
        wait_for(
            lambda leader=leader: sessions_created(c, leader).count(3) > before[leader].count(3),  # type: ignore[misc]  # binds the loop's variable
            30,
            f"a new session from broker 3 on leader {leader}",
            interval=0.2,
        )


@pytest.mark.slow
def test_a_paused_follower_rejoins_the_isr_through_its_unchanged_session(
    cluster_factory: ClusterFactory,
) -> None:
    # Long ZooKeeper sessions: the pause outlasts the lag allowance, not the registration.
    c = cluster_factory(replica_lag_time_max_ms="1500", zookeeper_session_timeout_ms="20000")
    c.wait_controller()
    tps = create_topics(c, topics=3, per_topic=100)
    wait_for(lambda: all_in_sync(c, tps), 60, "partitions in sync", interval=0.5)
    wait_for(
        lambda: all(3 in sessions_created(c, leader) for leader in (1, 2)),
        60,
        "broker 3's sessions",
    )
    before = settled_sessions(c, (1, 2))
    c[3].pause()
    try:
        wait_for(
            lambda: all(3 not in isr for leader, isr in isrs(c, tps).values() if leader != 3),
            60,
            "the leaders to drop the silent follower",
            interval=0.5,
        )
    finally:
        c[3].resume()
    # Its next fetches list nothing (nothing changed on its side), yet the leaders count
    # every partition of its session as fetched and take it back into the ISRs.
    wait_for(lambda: all_in_sync(c, tps), 60, "broker 3 back in every ISR", interval=0.5)
    for leader in (1, 2):
        assert sessions_created(c, leader) == before[leader], "a new session was needed"


@pytest.mark.slow
def test_sessions_survive_a_leader_bounce_and_are_made_anew_on_the_bounced_broker(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory(auto_leader_rebalance_enable="false")
    c.wait_controller()
    tps = create_topics(c, topics=3, per_topic=100)
    wait_for(lambda: all_in_sync(c, tps), 60, "partitions in sync", interval=0.5)
    wait_for(
        lambda: all(len(set(sessions_created(c, b))) == 2 for b in BROKERS),
        60,
        "every follower's session on every leader",
    )
    c[1].kill()
    wait_for(
        lambda: all(leader not in (1, -1) for leader, _ in isrs(c, tps).values()),
        c.session_timeout_s + 60,
        "leaders moved off broker 1",
        interval=0.5,
    )
    c[1].start()
    # Broker 1, a follower everywhere now, opens sessions on both leaders and catches up.
    wait_for(lambda: all_in_sync(c, tps), 120, "broker 1 back in every ISR", interval=0.5)
    wait_for(
        lambda: all(1 in sessions_created(c, leader) for leader in (2, 3)),
        60,
        "broker 1's sessions on brokers 2 and 3",
    )
    # Broker 1 gets its preferred leaderships back: its followers open sessions on the
    # new broker 1 process, and stay in sync.
    c.zk.create(paths.PREFERRED_REPLICA_ELECTION, encode_partition_list(tps))
    wait_for(
        lambda: sum(1 for leader, _ in isrs(c, tps).values() if leader == 1) == len(tps) // 3,
        60,
        "broker 1 leading its preferred partitions",
        interval=0.5,
    )
    wait_for(
        lambda: sorted(set(sessions_created(c, 1, start=1))) == [2, 3],
        60,
        "sessions from brokers 2 and 3 on the restarted broker 1",
    )
    wait_for(lambda: all_in_sync(c, tps), 60, "every ISR full", interval=0.5)


def fetch(
    conn: KafkaConnection,
    partitions: dict[TopicPartition, int] | None = None,
    *,
    session_id: int = 0,
    epoch: int = 0,
    forgotten: list[TopicPartition] | None = None,
    max_wait_ms: int = 100,
) -> dict[str, Any]:
    """A consumer's Fetch v12: `partitions` maps each listed partition to the current
    leader epoch the client believes in."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp, leader_epoch in (partitions or {}).items():
        topics.setdefault(tp.topic, []).append(
            {
                "partition": tp.partition,
                "current_leader_epoch": leader_epoch,
                "fetch_offset": 0,
                "last_fetched_epoch": -1,
                "log_start_offset": -1,
                "partition_max_bytes": 1 << 20,
            }
        )
    return dict(
        conn.request(
            ApiKey.FETCH,
            12,
            {
                "replica_id": -1,
                "max_wait_ms": max_wait_ms,
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "isolation_level": 0,
                "session_id": session_id,
                "session_epoch": epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                "forgotten_topics_data": [
                    {"topic": tp.topic, "partitions": [tp.partition]} for tp in forgotten or []
                ],
                "rack_id": "",
            },
        )
    )


def answered(response: dict[str, Any]) -> dict[TopicPartition, int]:
    """Each answered partition's error code."""
    return {
        TopicPartition(t["topic"], p["partition_index"]): p["error_code"]
        for t in response["responses"]
        for p in t["partitions"]
    }


def test_a_client_session_gets_only_the_partitions_that_changed(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory(auto_leader_rebalance_enable="false")
    c.wait_controller()
    # Everything led by broker 1 (its preferred replica) so one connection fetches it all.
    for name in ("kept", "doomed"):
        c.create_topic(name, {p: (1, 2, 3) for p in range(4)})
    kept = [TopicPartition("kept", p) for p in range(4)]
    doomed = [TopicPartition("doomed", p) for p in range(4)]
    wait_for(lambda: all_in_sync(c, kept + doomed), 60, "topics in sync", interval=0.2)
    epochs = {tp: c.partition_state(tp.topic, tp.partition)[0].leader_epoch for tp in kept + doomed}
    with KafkaConnection("127.0.0.1", c[1].port(), timeout_s=30) as conn:

        def full() -> dict[str, Any]:
            return fetch(conn, {tp: epochs[tp] for tp in kept + doomed})

        # Broker 1 may not have applied its leaderships yet: until then, errors.
        response = wait_for(
            lambda: (r := full())["error_code"] == 0 and not any(answered(r).values()) and r,
            60,
            "broker 1 leading everything",
        )
        assert set(answered(response)) == set(kept + doomed)
        session_id = response["session_id"]
        assert session_id != 0
        # Nothing changed: an empty answer, epoch after epoch.
        for epoch in (1, 2, 3):
            response = fetch(conn, session_id=session_id, epoch=epoch)
            assert (response["error_code"], response["session_id"]) == (0, session_id)
            assert answered(response) == {}
        # A partition listed with a leader epoch ahead of the leader's: just that one.
        ahead = kept[0]
        response = fetch(conn, {ahead: epochs[ahead] + 5}, session_id=session_id, epoch=4)
        assert answered(response) == {ahead: ErrorCode.UNKNOWN_LEADER_EPOCH}
        response = fetch(conn, {ahead: epochs[ahead]}, session_id=session_id, epoch=5)
        assert answered(response) == {ahead: ErrorCode.NONE}  # back to normal, said once
        assert answered(fetch(conn, session_id=session_id, epoch=6)) == {}
        # Deleting a topic: only its partitions are answered, with an error.
        c.zk.create(paths.delete_topic(doomed[0].topic), b"", make_parents=True)
        epoch = 7

        def doomed_answered() -> dict[TopicPartition, int] | None:
            nonlocal epoch
            got = answered(fetch(conn, session_id=session_id, epoch=epoch, max_wait_ms=200))
            epoch += 1
            return got or None

        got = wait_for(doomed_answered, 60, "the deleted topic's partitions answered")
        assert set(got) <= set(doomed)
        assert all(code != ErrorCode.NONE for code in got.values())
        # Forgetting them ends the chatter; the kept partitions still have nothing to say.
        response = fetch(conn, session_id=session_id, epoch=epoch, forgotten=doomed)
        epoch += 1
        assert answered(response) == {}
        # The session's rules, from the wire: a repeated epoch, an unknown id.
        assert (
            fetch(conn, session_id=session_id, epoch=epoch - 1)["error_code"]
            == ErrorCode.INVALID_FETCH_SESSION_EPOCH
        )
        assert (
            fetch(conn, session_id=session_id + 1, epoch=1)["error_code"]
            == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        )
        # A full fetch naming the session closes it and opens another.
        response = fetch(conn, {tp: epochs[tp] for tp in kept}, session_id=session_id)
        assert response["session_id"] not in (0, session_id)
        assert set(answered(response)) == set(kept)
        assert (
            fetch(conn, session_id=session_id, epoch=epoch + 1)["error_code"]
            == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        )


def test_the_session_cache_keys_of_a_server_properties_size_the_brokers_cache(
    cluster_factory: ClusterFactory,
) -> None:
    """max.incremental.fetch.session.cache.slots and
    min.incremental.fetch.session.eviction.ms were unknown keys (a Kafka server.properties
    with them stopped the broker) and the cache always had 1000 slots. With no slots, a
    fetch asking for a session gets none (session id 0) and is answered in full."""
    c = cluster_factory(
        (1,),
        max_incremental_fetch_session_cache_slots="0",
        min_incremental_fetch_session_eviction_ms="60000",
    )
    c.wait_controller()
    c.create_topic("solo", {0: (1,)})
    tp = TopicPartition("solo", 0)
    with KafkaConnection("127.0.0.1", c[1].port(), timeout_s=30) as conn:
        response = wait_for(
            lambda: (
                (r := fetch(conn, {tp: -1}))["error_code"] == 0
                and answered(r) == {tp: ErrorCode.NONE}
                and r
            ),
            60,
            "broker 1 leading solo-0",
        )
        assert response["session_id"] == 0
