"""broker/server.py at its edges: the controlled shutdown's attempts (what counts as done,
the backoff between attempts, a controller's refusal, what is asked, no controller), as
Kafka 2.8's KafkaServer.controlledShutdown."""

from __future__ import annotations

import dataclasses
import json
import threading
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from broker import server
from broker.config import load_broker_config
from broker.network import SocketServer
from election.broker_identity import IdentityOutcome
from storage.log_manager import lock_log_dirs
from tests.unit import test_topic_configs as topic_configs
from tests.unit.test_broker_controlled_shutdown import (
    BASE,
    _ControllerApis,
    count_controlled_shutdowns,
    unstarted_server,
)
from zkdata.client import ZooKeeperClientTimeout
from zkdata.znodes import BrokerRegistration, EndPoint, TopicPartition, encode_broker


def attempts_answering(
    remaining: list[int | None],
    retries: int = 3,
    backoff_ms: int = 0,
    others_registered: bool = True,
) -> Any:
    """A stand-in for the server whose attempts answer ``remaining`` in turn; whether
    another broker is registered in ZooKeeper."""
    answers = iter(remaining)
    asked: list[int] = []

    def ask() -> int | None:
        asked.append(1)
        return next(answers)

    fake: Any = types.SimpleNamespace(
        config=dataclasses.replace(
            BASE,
            controlled_shutdown_retry_backoff_ms=backoff_ms,
            controlled_shutdown_max_retries=retries,
        ),
        _ask_controller_to_shut_down=ask,
        state_log=types.SimpleNamespace(write=lambda *a, **k: None),
        asked=asked,
        _other_brokers_alive=lambda: others_registered,
    )
    return fake


def test_only_no_partition_left_is_a_controlled_shutdown_done(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kafka's shutdownSucceeded: the answer's remaining partitions are empty. One left
    led here is another attempt, after the backoff; the first answer of none ends it."""
    monkeypatch.setattr("broker.server.time.sleep", lambda _s: None)
    fake = attempts_answering([1, 1, 1])
    assert server.KafkaServer.controlled_shutdown(fake) is False
    assert len(fake.asked) == 3
    fake = attempts_answering([1, None, 0, 0])
    assert server.KafkaServer.controlled_shutdown(fake) is True
    assert len(fake.asked) == 3


def test_the_last_live_broker_does_not_try_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Leaderships move only to another live ISR member: with no other broker registered
    (the last broker of a cluster stopped whole), an attempt that leaves partitions led
    here is the last, where Kafka's would wait out two backoffs for nothing. One that
    fails outright (no answer: the controller unknown, say) says nothing of that, and is
    tried again."""
    slept: list[float] = []
    monkeypatch.setattr("broker.server.time.sleep", slept.append)
    fake = attempts_answering([3, 3, 3], backoff_ms=5000, others_registered=False)
    assert server.KafkaServer.controlled_shutdown(fake) is False
    assert (len(fake.asked), slept) == (1, [])
    fake = attempts_answering([None, 3, 3], backoff_ms=5000, others_registered=False)
    assert server.KafkaServer.controlled_shutdown(fake) is False
    assert (len(fake.asked), slept) == (2, [5.0])


@pytest.mark.parametrize(
    ("children", "others"),
    [
        (["1"], False),
        ([], False),
        (None, False),  # /brokers/ids gone
        (["1", "2"], True),
        (["2"], True),  # its own registration not (yet) there
        (["1", "x", "01"], False),  # names that are no broker id
    ],
)
def test_other_brokers_are_those_registered_in_zookeeper(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    children: list[str] | None,
    others: bool,
) -> None:
    broker = unstarted_server(tmp_path, monkeypatch)
    try:
        monkeypatch.setattr(broker.zk, "get_children_within", lambda path, t: children)
        assert broker._other_brokers_alive() is others
    finally:
        broker.shutdown()


def test_zookeeper_not_answering_counts_as_other_brokers_alive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not known: the attempts go on, as Kafka's."""
    broker = unstarted_server(tmp_path, monkeypatch)

    def no_answer(path: str, timeout_s: float) -> list[str]:
        raise ZooKeeperClientTimeout("no answer")

    try:
        monkeypatch.setattr(broker.zk, "get_children_within", no_answer)
        assert broker._other_brokers_alive() is True
    finally:
        broker.shutdown()


def test_attempts_are_backed_off_by_the_retry_backoff(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """controlled.shutdown.retry.backoff.ms, in milliseconds, after each failed attempt
    that is followed by another. (Kafka 2.8 sleeps after the last failed attempt too;
    this broker goes on with its shutdown at once: see
    test_a_backoff_beyond_what_sleep_takes_is_slept_as_long_as_it_can.)"""
    slept: list[float] = []
    monkeypatch.setattr("broker.server.time.sleep", slept.append)
    fake = attempts_answering([2, 2, 2], retries=3, backoff_ms=250)
    assert server.KafkaServer.controlled_shutdown(fake) is False
    assert slept[:2] == [0.25, 0.25]
    assert set(slept) == {0.25}


def test_no_controller_is_a_failed_attempt_without_looking_for_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """/controller absent (read_controller's -1): nothing to ask, no broker to look up."""
    monkeypatch.setattr(server, "read_controller", lambda zk, **_: (-1, 0))
    looked_up: list[str] = []

    def get_within(path: str, timeout_s: float) -> None:
        looked_up.append(path)

    fake: Any = types.SimpleNamespace(
        config=BASE,
        zk=types.SimpleNamespace(get_within=get_within),
        _endpoint_of=lambda broker_id: looked_up.append(f"endpoint {broker_id}"),
    )
    assert server.KafkaServer._ask_controller_to_shut_down(cast(Any, fake)) is None
    assert looked_up == []


class _AnsweringControllerApis(_ControllerApis):
    """A controller answering each ControlledShutdown with ``answer``."""

    def __init__(self, answer: dict[str, Any]) -> None:
        super().__init__()
        self.answer = answer

    def handle(self, api_key: int, version: int, header: Any, body: Any, **_: Any) -> Any:
        self.asked.append(body)
        return self.answer


def _ask_controller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: dict[str, Any], retries: int
) -> tuple[bool, list[dict[str, Any]]]:
    """A broker (id 1, broker epoch 42) stopping with controller 7 answering ``answer``:
    whether its controlled shutdown succeeded, and what it asked."""
    apis = _AnsweringControllerApis(answer)
    listener = SocketServer("127.0.0.1", 0, lambda: cast(Any, apis))
    listener.start()
    try:
        controller = BrokerRegistration(7, (EndPoint("PLAINTEXT", "127.0.0.1", listener.port),))
        config = load_broker_config(
            text="broker.id=1\nlisteners=PLAINTEXT://127.0.0.1:0\n"
            "zookeeper.connect=127.0.0.1:1\n"
            f"controlled.shutdown.max.retries={retries}\n"
            "controlled.shutdown.retry.backoff.ms=0\n"
            f"log.dirs={tmp_path / 'data'}\n"
        )
        broker = server.KafkaServer(config)
        try:
            broker.broker_epoch = 42
            # Another broker registered (the controller): leaderships could move to it.
            monkeypatch.setattr(broker, "_other_brokers_alive", lambda: True)
            monkeypatch.setattr(server, "read_controller", lambda zk, **_: (7, 0x1234))
            stat = types.SimpleNamespace(version=0, czxid=5, ephemeralOwner=0x1234)
            monkeypatch.setattr(
                broker.zk, "get_within", lambda path, t: (encode_broker(controller), stat)
            )
            return broker.controlled_shutdown(), apis.asked
        finally:
            broker.shutdown()
    finally:
        listener.stop()


def test_the_request_names_the_broker_and_its_epoch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ControlledShutdownRequest v3 carries the broker's id and broker epoch (the
    controller refuses a stale epoch: STALE_BROKER_EPOCH)."""
    done, asked = _ask_controller(
        tmp_path, monkeypatch, {"error_code": 0, "remaining_partitions": []}, retries=1
    )
    assert done is True
    assert asked == [{"broker_id": 1, "broker_epoch": 42}]


def test_a_controller_refusing_the_request_is_a_failed_attempt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error code (STALE_BROKER_EPOCH here) is no success, whatever the remaining
    partitions say: Kafka retries, then shuts down anyway."""
    done, asked = _ask_controller(
        tmp_path, monkeypatch, {"error_code": 77, "remaining_partitions": []}, retries=2
    )
    assert done is False
    assert len(asked) == 2


def test_a_broker_with_controlled_shutdown_disabled_asks_for_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """controlled.shutdown.enable=false: Kafka's shutdown skips controlledShutdown, even
    once started."""
    broker = unstarted_server(tmp_path, monkeypatch, "controlled.shutdown.enable=false\n")
    broker.startup_complete.set()
    asked = count_controlled_shutdowns(broker, monkeypatch)
    assert broker.shutdown()
    assert asked == []


# --- shutdown: once, and what it tells the rest of the broker ------------------------------


def test_a_second_shutdown_does_nothing_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's shutdown runs once (isShuttingDown.compareAndSet): a second call, from a
    signal while the first runs, say, neither asks the controller again nor closes again."""
    broker = unstarted_server(tmp_path, monkeypatch)
    broker.startup_complete.set()
    asked: list[int] = []
    closed: list[int] = []

    def controlled_shutdown() -> bool:
        asked.append(1)
        return True

    zk_close = broker.zk.close

    def close_zk() -> None:
        closed.append(1)
        zk_close()

    monkeypatch.setattr(broker, "controlled_shutdown", controlled_shutdown)
    monkeypatch.setattr(broker.zk, "close", close_zk)
    assert broker.shutdown()
    assert broker.shutdown()
    assert (asked, closed) == ([1], [1])


def test_a_shutdown_cancels_a_registration_waiting_for_zookeeper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """stop_requested is what a registration waiting (for a new session, or for a stale
    registration to expire) gives up on."""
    broker = unstarted_server(tmp_path, monkeypatch)
    assert not broker.stop_requested.is_set()
    broker.shutdown()
    assert broker.stop_requested.is_set()


class _Fetchers:
    def __init__(self) -> None:
        self.followed: list[Any] = []
        self.unfollowed: list[Any] = []

    def follow(self, partitions: list[Any]) -> None:
        self.followed += partitions

    def unfollow(self, partitions: list[Any]) -> None:
        self.unfollowed += partitions

    def close(self) -> None:
        pass


def _partition(name: str, leader: int) -> Any:
    return types.SimpleNamespace(
        topic_partition=TopicPartition(name, 0), leader=leader, leader_epoch=3, log_end_offset=9
    )


def test_leaders_are_unfollowed_and_followers_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Becoming leader stops the partition's fetcher; becoming follower fetches from the
    leader at the log end offset (Kafka's makeLeaders/makeFollowers)."""
    broker = unstarted_server(tmp_path, monkeypatch)
    try:
        fetchers = _Fetchers()
        monkeypatch.setattr(broker, "fetchers", fetchers)
        monkeypatch.setattr(broker.groups, "on_become", lambda leaders, followers: None)
        broker._on_become([_partition("led", 1)], [_partition("followed", 2)])
        assert fetchers.unfollowed == [TopicPartition("led", 0)]
        assert fetchers.followed == [(TopicPartition("followed", 0), 2, 3, 9)]
    finally:
        broker.shutdown()


def test_a_broker_shutting_down_follows_no_partition(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A LeaderAndIsr making it a follower during its controlled shutdown: following would
    only bring it back into ISRs it is leaving; its fetchers stop instead."""
    broker = unstarted_server(tmp_path, monkeypatch)
    broker.startup_complete.set()
    fetchers = _Fetchers()
    monkeypatch.setattr(broker, "fetchers", fetchers)
    monkeypatch.setattr(broker.groups, "on_become", lambda leaders, followers: None)

    def controlled_shutdown() -> bool:
        broker._on_become([], [_partition("followed", 2)])
        return True

    monkeypatch.setattr(broker, "controlled_shutdown", controlled_shutdown)
    broker.shutdown()
    assert fetchers.followed == []
    assert TopicPartition("followed", 0) in fetchers.unfollowed


def test_a_step_that_fails_is_reported_and_the_rest_still_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's shutdown swallows each step's error (CoreUtils.swallow) and goes on: the
    ZooKeeper session is still closed. The broker says it did not stop cleanly."""
    broker = unstarted_server(tmp_path, monkeypatch)
    closed: list[int] = []
    zk_close = broker.zk.close

    def failing() -> None:
        raise OSError("disk gone")

    def close_zk() -> None:
        closed.append(1)
        zk_close()

    monkeypatch.setattr(broker.groups, "close", failing)
    monkeypatch.setattr(broker.zk, "close", close_zk)
    assert broker.shutdown() is False
    assert closed == [1]


# --- registration and the ZooKeeper chroot --------------------------------------------------


def test_each_port_0_listener_advertises_its_own_bound_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = unstarted_server(
        tmp_path,
        monkeypatch,
        "listeners=CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0\n"
        "listener.security.protocol.map=CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT\n"
        "inter.broker.listener.name=REPLICATION\n",
    )
    try:
        bound = {name: s.port for name, s in broker.socket_servers.items()}
        assert bound["CLIENT"] != bound["REPLICATION"]
        advertised = {ep.listener: ep.port for ep in broker.registration().endpoints}
        assert advertised == bound
    finally:
        broker.shutdown()


@pytest.mark.parametrize(
    ("connect", "split"),
    [
        ("z1:2181,z2:2181", ("z1:2181,z2:2181", "")),
        ("z1:2181/kafka", ("z1:2181", "/kafka")),
        ("z1:2181/kafka/", ("z1:2181", "/kafka")),
        ("z1:2181/a/b//", ("z1:2181", "/a/b")),
        ("z1:2181/", ("z1:2181", "")),
    ],
)
def test_the_chroot_is_split_from_the_connect_string(connect: str, split: tuple[str, str]) -> None:
    assert server._split_chroot(connect) == split


def test_the_chroot_is_made_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The identity step makes the chroot before start-up does: one connection, not two."""
    made: list[str] = []

    class Root:
        def __init__(self, hosts: str, **_: Any) -> None:
            made.append(hosts)

        def start(self, **_: Any) -> None:
            pass

        def until_connected(self, fn: Any, **_: Any) -> Any:
            return fn()

        def ensure_paths(self, paths: list[str]) -> None:
            made.append(paths[0])

        def close(self) -> None:
            pass

    monkeypatch.setattr(server, "ZkClient", Root)
    config = load_broker_config(text="broker.id=1\nzookeeper.connect=z1:2181/kafka/\n")
    fake: Any = types.SimpleNamespace(_chroot_ensured=False, stop_requested=None)
    server.KafkaServer._ensure_chroot(cast(Any, fake), config)
    server.KafkaServer._ensure_chroot(cast(Any, fake), config)
    assert made == ["z1:2181", "/kafka"]


def test_the_registration_carries_the_rack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broker = unstarted_server(tmp_path, monkeypatch, "broker.rack=r1\n")
    try:
        assert broker.registration().rack == "r1"
    finally:
        broker.shutdown()


def test_registering_remembers_the_epoch_and_says_registered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the request handlers wait for before answering (registered) and the broker
    epoch its ControlledShutdown and ISR writes carry: the registration's czxid."""
    broker = unstarted_server(tmp_path, monkeypatch)
    try:
        monkeypatch.setattr(server, "register_broker", lambda zk, reg, **_: 0x55)
        assert not broker.registered.is_set()
        assert broker.register() == 0x55
        assert broker.broker_epoch == 0x55
        assert broker.registered.is_set()
    finally:
        broker.shutdown()


def test_a_brokers_address_is_the_metadatas_before_a_leaders_remembered_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A LeaderAndIsr's live leaders are remembered (and the fetchers told) for brokers
    the metadata does not know yet; the metadata's address wins once it knows one."""
    broker = unstarted_server(tmp_path, monkeypatch)
    try:
        refreshed: list[int] = []
        monkeypatch.setattr(broker.fetchers, "refresh_endpoints", lambda: refreshed.append(1))
        broker._remember_live_leaders([])
        assert refreshed == []
        broker._remember_live_leaders([{"broker_id": 2, "host_name": "old", "port": 1}])
        assert refreshed == [1]
        assert broker._endpoint_of(2) == ("old", 1)
        known = types.SimpleNamespace(host="new", port=2)
        monkeypatch.setattr(broker.metadata, "broker", lambda b: known if b == 2 else None)
        assert broker._endpoint_of(2) == ("new", 2)
        assert broker._endpoint_of(3) is None
    finally:
        broker.shutdown()


class _DirFailures:
    def __init__(self, offline: set[str]) -> None:
        self.offline = offline
        self.added: list[str] = []

    def has_offline_log_dir(self, key: str) -> bool:
        return key in self.offline

    def maybe_add_offline_log_dir(self, key: str, why: str, error: Exception) -> None:
        self.added.append(key)


def test_meta_properties_are_not_written_in_a_directory_failed_since_start(
    tmp_path: Path,
) -> None:
    """checkpointBrokerMetadata writes only the live log directories."""
    failed, live = tmp_path / "failed", tmp_path / "live"
    failed.mkdir()
    live.mkdir()
    failures = _DirFailures({str(failed)})
    fake = types.SimpleNamespace(logs=types.SimpleNamespace(dir_failures=failures), broker_id=1)
    server.KafkaServer._checkpoint_meta_properties(
        cast(Any, fake), [str(failed), str(live)], "cluster-a"
    )
    assert not (failed / "meta.properties").exists()
    assert "cluster-a" in (live / "meta.properties").read_text()
    assert failures.added == []


def test_the_group_coordinator_takes_the_brokers_group_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """group.min/max.session.timeout.ms, group.initial.rebalance.delay.ms, group.max.size,
    and offsets.retention.minutes in milliseconds (Kafka's offsetsRetentionMs)."""
    broker = unstarted_server(
        tmp_path,
        monkeypatch,
        "group.min.session.timeout.ms=1111\ngroup.max.session.timeout.ms=2222\n"
        "group.initial.rebalance.delay.ms=333\ngroup.max.size=44\n"
        "offsets.retention.minutes=5\n",
    )
    try:
        limits = broker.groups.limits
        assert (
            limits.min_session_timeout_ms,
            limits.max_session_timeout_ms,
            limits.initial_rebalance_delay_ms,
            limits.max_size,
        ) == (1111, 2222, 333, 44)
        assert broker.groups.offsets_retention_ms == 5 * 60 * 1000
    finally:
        broker.shutdown()


# --- topic configs kept: a read overtaken by a change or a deletion is not kept -------------


class RacingZk(topic_configs.Zk):
    """Runs ``meanwhile`` once, right after the next batch of reads got its answers."""

    def __init__(self) -> None:
        super().__init__()
        self.meanwhile: Callable[[], None] | None = None

    def get_many(self, path_list: Any, *, watch: bool = False, batch: int = 0) -> Any:
        got = super().get_many(path_list, watch=watch, batch=batch)
        hook, self.meanwhile = self.meanwhile, None
        if hook is not None:
            hook()
        return got


def test_a_read_overtaken_by_a_deletion_is_not_kept() -> None:
    """The topic deleted while its config was read: what was read (perhaps before the
    deletion) must not be kept for a topic made again under the name."""
    zk = RacingZk()
    topic_configs.put_config(zk, "t", {"retention.ms": "1000"})
    s = topic_configs.server(zk)
    zk.meanwhile = lambda: s._on_topics_deleted(["t"])
    assert s._topic_config("t").retention_ms == 1000  # answered, not kept
    assert "t" not in s._topic_configs


def test_a_read_overtaken_by_a_change_does_not_undo_it() -> None:
    """A LeaderAndIsr's read of the old config, then a change notification applied in
    full before that read is kept: the new config stays kept, not the old one."""
    zk = RacingZk()
    topic_configs.put_config(zk, "t", {"retention.ms": "1000"})
    s = topic_configs.server(zk)
    assert s._topic_config("t").retention_ms == 1000  # kept

    def change() -> None:
        topic_configs.put_config(zk, "t", {"retention.ms": "2000"})
        s._on_topic_config_change("t")

    zk.meanwhile = change
    assert s._new_logs_topic_configs(["t"])["t"].retention_ms == 1000  # read before
    assert s._topic_configs["t"].retention_ms == 2000


def test_the_isr_is_checked_every_half_replica_lag_time_max() -> None:
    """Kafka's ReplicaManager schedules isr-expiration every replica.lag.time.max.ms / 2."""
    waited: list[float] = []

    def wait(timeout: float) -> bool:
        waited.append(timeout)
        return len(waited) > 1  # one check, then stop

    checks: list[int] = []
    fake: Any = types.SimpleNamespace(
        config=dataclasses.replace(BASE, replica_lag_time_max_ms=30_000),
        _status_stop=types.SimpleNamespace(wait=wait),
        replicas=types.SimpleNamespace(maybe_shrink_isr=lambda: checks.append(1)),
    )
    server.KafkaServer._isr_check_loop(cast(Any, fake))
    assert waited == [15.0, 15.0]
    assert checks == [1]


@pytest.mark.parametrize("lag_ms", [-2, -3, -30_000])
def test_a_negative_replica_lag_time_max_checks_the_isr_once(lag_ms: int) -> None:
    """replica.lag.time.max.ms <= -2: Kafka 2.8's isr-expiration period (lag / 2 in long
    division) is negative, and KafkaScheduler.schedule runs a task of a negative period
    once, at once (executor.schedule, not scheduleAtFixedRate). The check ran every 0.1 s
    instead, dropping from the ISRs every follower not caught up within a negative time."""
    waited: list[float] = []

    def wait(timeout: float) -> bool:
        waited.append(timeout)
        return len(waited) > 3  # a loop would check three times, then stop

    checks: list[int] = []
    fake: Any = types.SimpleNamespace(
        config=dataclasses.replace(BASE, replica_lag_time_max_ms=lag_ms),
        _status_stop=types.SimpleNamespace(wait=wait),
        replicas=types.SimpleNamespace(maybe_shrink_isr=lambda: checks.append(1)),
    )
    server.KafkaServer._isr_check_loop(cast(Any, fake))
    assert (checks, waited) == ([1], [])


def test_the_id_the_identity_step_gives_is_the_brokers_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An id other than broker.id (one generated, or read from meta.properties, as Kafka's
    getOrGenerateBrokerId) is the one the broker registers, logs and answers with."""
    monkeypatch.setattr(
        server,
        "establish_identity",
        lambda config, address, **_: IdentityOutcome("generated", 1005, "generated", "x"),
    )
    broker = unstarted_server(tmp_path, monkeypatch)
    try:
        assert (broker.broker_id, broker.config.broker_id) == (1005, 1005)
        assert broker.registration().broker_id == 1005
        assert broker.metadata.broker_id == 1005
    finally:
        broker.shutdown()


def test_an_attempt_that_fails_otherwise_than_by_zookeeper_is_retried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kafka retries after an IOException (the controller unreachable, its connection
    reset); only ZooKeeper not answering ends the controlled shutdown."""
    monkeypatch.setattr("broker.server.time.sleep", lambda _s: None)
    answers: list[int | Exception] = [ConnectionRefusedError("controller gone"), 0]
    fake = attempts_answering([])

    def ask() -> int:
        fake.asked.append(1)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    fake._ask_controller_to_shut_down = ask
    assert server.KafkaServer.controlled_shutdown(fake) is True
    assert len(fake.asked) == 2


def test_registering_at_start_up_waits_out_a_lost_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At start-up the registration waits for ZooKeeper (Kafka's client retries until
    connected); the controller's re-registration after a new session does not wait."""
    broker = unstarted_server(tmp_path, monkeypatch)
    try:
        waits: list[bool] = []

        def register_broker(zk: Any, reg: Any, **kw: Any) -> int:
            waits.append(kw["until_connected"])
            return 7

        monkeypatch.setattr(server, "register_broker", register_broker)
        broker.register(until_connected=True)
        broker.register()
        assert waits == [True, False]
    finally:
        broker.shutdown()


def test_the_status_file_is_in_the_first_log_dir_and_says_when_the_broker_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`zkctl controller` and the local cluster read broker-status.json from the first log
    directory; a stopped broker's says when it stopped."""
    first, second = tmp_path / "first", tmp_path / "second"
    broker = unstarted_server(tmp_path, monkeypatch, f"log.dirs={first},{second}\n")
    try:
        broker._status_stop.set()  # one write, then the loop ends
        broker._status_loop()
        assert (first / server.STATUS_FILE).exists()
        assert not (second / server.STATUS_FILE).exists()
    finally:
        broker.shutdown()
    status = json.loads((first / server.STATUS_FILE).read_text())
    assert status["broker_id"] == 1
    assert status["stopped_at"] >= status["started_at"]


def test_a_stopped_broker_stops_its_status_thread_and_releases_its_log_dirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing rewrites the status file after the broker stopped, and another broker may
    take the log directories (their locks are released)."""
    broker = unstarted_server(tmp_path, monkeypatch)
    broker._status_thread.start()
    broker.shutdown()
    broker._status_thread.join(20)  # a hang-only bound
    assert not broker._status_thread.is_alive()
    lock_log_dirs(broker.config.log_dirs).release()  # no LogDirLockedError


def test_partitions_the_controller_could_not_move_fail_the_attempt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An answer listing partitions still led here is no success (Kafka's
    remainingPartitions.isEmpty): each attempt is taken, then the broker stops anyway."""
    remaining = [{"topic_name": "t", "partition_index": 0}]
    done, asked = _ask_controller(
        tmp_path, monkeypatch, {"error_code": 0, "remaining_partitions": remaining}, retries=2
    )
    assert done is False
    assert len(asked) == 2


def test_the_stop_request_given_is_the_one_a_start_up_waits_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SIGTERM handler's event: a start-up waiting for its earlier registration to
    expire gives up when it is set."""
    stop = threading.Event()
    config = load_broker_config(
        text="broker.id=1\nlisteners=PLAINTEXT://127.0.0.1:0\nzookeeper.connect=127.0.0.1:1\n"
        f"log.dirs={tmp_path / 'data'}\n"
    )
    broker = server.KafkaServer(config, stop_requested=stop)
    try:
        assert broker.stop_requested is stop
    finally:
        broker.shutdown()


def test_the_group_coordinator_hears_of_leaderships_stops_and_deleted_topics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As Kafka's: becoming leader or follower of __consumer_offsets partitions loads or
    unloads their groups (onElection/onResignation), a StopReplica resigns them, and an
    UpdateMetadata's deleted topics drop their offsets (handleDeletedPartitions) while
    their orphaned logs here are deleted."""
    broker = unstarted_server(tmp_path, monkeypatch)
    try:
        heard: list[tuple[str, Any]] = []
        monkeypatch.setattr(broker, "fetchers", _Fetchers())
        monkeypatch.setattr(
            broker.groups, "on_become", lambda led, followed: heard.append(("become", len(led)))
        )
        monkeypatch.setattr(broker.groups, "on_stop", lambda tps: heard.append(("stop", tps)))
        monkeypatch.setattr(
            broker.groups, "handle_deleted_topics", lambda topics: heard.append(("gone", topics))
        )
        monkeypatch.setattr(
            broker.replicas, "delete_orphaned_logs", lambda topics: heard.append(("logs", topics))
        )
        tp = TopicPartition("__consumer_offsets", 0)
        broker._on_become([_partition("__consumer_offsets", 1)], [])
        broker._on_stop([tp], False)
        broker._on_topics_deleted(["t"])
        assert heard == [("become", 1), ("stop", [tp]), ("logs", ["t"]), ("gone", ["t"])]
    finally:
        broker.shutdown()
