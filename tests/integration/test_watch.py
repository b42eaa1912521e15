"""`zkctl watch` against real ZooKeeper and real brokers: in a terminal (tmux), without one,
through a lost connection and an expired session, and with thousands of partitions."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from cluster import processes
from cluster import zookeeper as zkp
from tests.integration.conftest import ClusterFactory
from tests.integration.harness import wait_for
from watch.screen import screen_lines
from watch.session import Watcher
from zkdata import paths
from zkdata.client import Create, Delete, SetData, ZkClient
from zkdata.znodes import (
    BrokerRegistration,
    EndPoint,
    LeaderAndIsr,
    TopicAssignment,
    encode_broker,
    encode_controller,
    encode_controller_epoch,
    encode_partition_state,
    encode_topic,
)

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = os.environ.get("ZKCTL_WATCH_SCREENSHOTS")  # a directory: keep the screens seen


def zkctl_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "zkctl", *args]


def zkctl_env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    env.pop("ZKCTL_ZOOKEEPER", None)
    return env


class Tmux:
    """A tmux server of this test's own (its own socket), so that killing it touches
    nothing else; one session in it, of a fixed size."""

    def __init__(self, tmp_path: Path) -> None:
        tmux = shutil.which("tmux")
        assert tmux, "tmux is installed by the set-up script (scripts/setup.sh)"
        self.tmux = tmux
        self.socket = f"zkctl-test-{uuid.uuid4().hex[:12]}"
        self.session = "watch"
        self.tmp_path = tmp_path
        self.screens: list[str] = []
        self.socket_path = ""

    def __call__(self, *args: str) -> str:
        result = subprocess.run(
            [self.tmux, "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        return result.stdout

    def start(self, argv: list[str], env: dict[str, str]) -> None:
        # The command runs in a shell that reports its exit code and stays, so the final
        # screen and the code can be read after it ends.
        assignments = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items() if k == "PYTHONPATH")
        command = (
            f"env -u ZKCTL_ZOOKEEPER {assignments} {shlex.join(argv)}; echo EXIT=$?; sleep 600"
        )
        self("new-session", "-d", "-s", self.session, "-x", "160", "-y", "50", command)
        self.socket_path = self("display-message", "-p", "-t", self.session, "#{socket_path}")

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", self.session)

    def wait_screen(self, check: Callable[[str], bool], what: str, timeout: float = 60) -> str:
        last = ""

        def seen() -> str | None:
            nonlocal last
            last = self.screen()
            return last if check(last) else None

        try:
            screen = wait_for(seen, timeout, what, interval=0.2)
        except AssertionError:
            raise AssertionError(f"timed out waiting for {what}; the screen:\n{last}") from None
        self.screens.append(screen)
        return screen

    def close(self) -> None:
        if SCREENSHOTS:
            out = Path(SCREENSHOTS)
            out.mkdir(parents=True, exist_ok=True)
            for i, screen in enumerate(self.screens):
                (out / f"{self.socket}-{i}.txt").write_text(screen)
        subprocess.run(
            [self.tmux, "-L", self.socket, "kill-server"],
            capture_output=True,
            timeout=30,
            check=False,
        )
        if self.socket_path.strip():  # tmux leaves its socket file behind
            Path(self.socket_path.strip()).unlink(missing_ok=True)


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    t = Tmux(tmp_path)
    try:
        yield t
    finally:
        t.close()


def controller_line(broker: int, epoch: int) -> str:
    return f"CONTROLLER  broker {broker}   epoch {epoch}"


@pytest.mark.slow
def test_watch_in_a_terminal_shows_the_controller_failing_over(
    cluster_factory: ClusterFactory, tmux: Tmux
) -> None:
    c = cluster_factory()
    c.create_topic("orders", {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)})
    c.wait_topic_online("orders")
    old, epoch = c.wait_controller()
    tmux.start(zkctl_argv("--zookeeper", c.zk_connect, "watch"), zkctl_env())
    tmux.wait_screen(
        lambda s: controller_line(old, epoch) in s and "orders-2" in s and "3 registered" in s,
        "the view of the running cluster",
    )

    c[old].kill()
    new, new_epoch = c.wait_controller(not_id=old, min_epoch=epoch + 1)

    # The new controller elects new leaders, then takes the dead broker out of the other
    # ISRs (each a new leader epoch): wait for ZooKeeper to hold the end of that, then for
    # the view to show it, since the view may lag a moment behind.
    def failed_over() -> dict[int, LeaderAndIsr] | None:
        states = c.partition_states("orders")
        done = all(s.leader not in (old, -1) and old not in s.isr for s in states.values())
        return states if done else None

    states = wait_for(
        failed_over, 60, f"every partition led by a live broker, broker {old} in no ISR"
    )

    def rows_shown(screen: str) -> bool:
        for p, s in states.items():
            row = re.search(rf"^  orders-{p}\s+(\S+)\s+(\d+)", screen, re.MULTILINE)
            if not row or (int(row.group(1)), int(row.group(2))) != (s.leader, s.leader_epoch):
                return False
        return True

    screen = tmux.wait_screen(
        lambda s: (
            controller_line(new, new_epoch) in s
            and f"controller resigned: broker {old} (epoch {epoch})" in s
            and f"broker {new} elected controller, epoch {new_epoch}" in s
            and f"broker {old} lost" in s
            and rows_shown(s)
        ),
        "the new controller, the failover in the timeline and every partition's new state",
    )
    assert f"earlier epochs  {epoch}: broker {old}" in screen
    assert re.search(rf"^\s+{old}\s.*LOST for \d", screen, re.MULTILINE), screen
    assert "2 registered, 1 not registered" in screen

    tmux("send-keys", "-t", tmux.session, "q")
    tmux.wait_screen(lambda s: "EXIT=0" in s, "zkctl watch to end on q", timeout=30)


@pytest.mark.slow
def test_watch_without_a_terminal_prints_the_timeline(cluster_factory: ClusterFactory) -> None:
    c = cluster_factory()
    c.create_topic(
        "orders", {p: ((p % 3) + 1, ((p + 1) % 3) + 1, ((p + 2) % 3) + 1) for p in range(6)}
    )
    c.wait_topic_online("orders")
    old, epoch = c.wait_controller()
    led_by_old = sorted(p for p, s in c.partition_states("orders").items() if s.leader == old)
    proc = subprocess.Popen(
        zkctl_argv("--zookeeper", c.zk_connect, "watch"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=zkctl_env(),
    )
    processes.track_process(proc.pid, "zkctl")
    lines: list[str] = []
    assert proc.stdout is not None
    stdout = proc.stdout
    reader = threading.Thread(target=lambda: lines.extend(stdout), daemon=True)
    reader.start()

    def printed(*wanted: str) -> Callable[[], bool]:
        return lambda: all(any(w in line for line in list(lines)) for w in wanted)

    try:
        wait_for(printed(f"controller is broker {old}, epoch {epoch}"), 30, "the first lines")
        c[old].stop()  # a graceful stop: its leaderships move away first
        new, new_epoch = c.wait_controller(not_id=old, min_epoch=epoch + 1)
        wait_for(
            printed(
                f"controller resigned: broker {old} (epoch {epoch})",
                f"broker {new} elected controller, epoch {new_epoch}",
                f"broker {old} lost",
                *(f"leader of orders-{p} moved {old} -> " for p in led_by_old),
            ),
            60,
            "the failover in the timeline",
        )
        c[old].start()
        wait_for(printed(f"broker {old} back after"), 60, "the broker's return")
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(30)
        reader.join(10)
    assert code == 0, proc.stderr.read() if proc.stderr else ""
    assert lines
    for line in lines:
        assert re.fullmatch(r"\d\d:\d\d:\d\d\.\d{3}  zk    \S.*\n", line), line
    # In the order they happened.
    order = [
        next(i for i, line in enumerate(lines) if text in line)
        for text in (
            f"controller is broker {old}",
            f"controller resigned: broker {old}",
            f"broker {new} elected controller",
            f"broker {old} back after",
        )
    ]
    assert order == sorted(order)


# --- in-process: connection loss, session expiry, scale -------------------------------------


def wait_timeline(
    watcher: Watcher, check: Callable[[list[str]], bool], what: str, timeout: float = 60
) -> list[str]:
    """Pump the watcher until its timeline satisfies `check`."""

    def done() -> list[str] | None:
        watcher.pump(0.05)
        texts = [e.text for e in watcher.state.timeline]
        return texts if check(texts) else None

    try:
        return wait_for(done, timeout, what, interval=0.0)
    except AssertionError:
        texts = "\n".join(e.text for e in watcher.state.timeline[-40:])
        raise AssertionError(f"timed out waiting for {what}; the timeline:\n{texts}") from None


def has(*wanted: str) -> Callable[[list[str]], bool]:
    return lambda texts: all(any(w in t for t in texts) for w in wanted)


def elect(writer: ZkClient, broker: int, epoch: int) -> None:
    """What an election writes: /controller and /controller_epoch, atomically."""
    ops: list[Create | SetData] = []
    if writer.exists(paths.CONTROLLER) is not None:
        writer.delete(paths.CONTROLLER)
    if writer.exists(paths.CONTROLLER_EPOCH) is None:
        ops.append(Create(paths.CONTROLLER_EPOCH, encode_controller_epoch(epoch)))
    else:
        ops.append(SetData(paths.CONTROLLER_EPOCH, encode_controller_epoch(epoch)))
    ops.append(Create(paths.CONTROLLER, encode_controller(broker)))
    results = writer.multi(ops)
    assert not any(isinstance(r, Exception) for r in results), results


@pytest.fixture
def private_zookeeper(tmp_path: Path) -> Iterator[zkp.LocalZooKeeper]:
    """A ZooKeeper of this test's own, since the test kills it."""
    if zkp.find_local_install() is None:
        pytest.fail("a local ZooKeeper install is needed (scripts/setup.sh installs one)")
    handle = zkp.start_local(1, base_dir=tmp_path / "zk")
    try:
        yield handle
    finally:
        handle.close()


@pytest.mark.slow
def test_watch_says_when_its_zookeeper_connection_is_lost_and_recovers(
    private_zookeeper: zkp.LocalZooKeeper,
) -> None:
    connect = private_zookeeper.connect_string
    writer = ZkClient(connect, session_timeout_ms=30_000)
    writer.start()
    watch_zk = ZkClient(connect, session_timeout_ms=30_000)
    watch_zk.start()
    watcher = Watcher(watch_zk)
    try:
        elect(writer, 1, 1)
        watcher.start()
        wait_timeline(watcher, has("controller is broker 1, epoch 1"), "the first read")

        server = private_zookeeper.servers[0]
        server.kill()
        wait_timeline(watcher, has("ZooKeeper connection lost; reconnecting"), "the loss")
        assert watcher.state.connection == "SUSPENDED"
        lines = screen_lines(watcher.state, time.time(), 40, 160)
        assert "ZooKeeper connection lost" in lines[0][0]
        assert any(t.startswith("!! ZooKeeper connection lost") for t, _ in lines)

        server.restart()
        # The session usually outlives the restart (the client is back within a second), but
        # on a loaded machine one connect attempt to the starting server went unanswered until
        # kazoo's read timeout and the session expired meanwhile (CI, 30.6 s away). Either way
        # the watch must say it is back; which of the two it says is the model's, unit-tested.
        back = wait_timeline(
            watcher,
            lambda texts: any(
                "ZooKeeper connection back after" in t
                or "ZooKeeper reconnected with a new session after" in t
                for t in texts
            ),
            "the reconnection",
        )
        expired = any("ZooKeeper session expired" in t for t in back)
        assert expired == any("reconnected with a new session" in t for t in back), back
        # Watching goes on: kazoo dropped its watches with the connection; they were set again.
        # The writer reconnects on its own schedule: on a loaded machine its handshake with
        # the starting server can go unanswered until kazoo gives up on it (the 30 s
        # session, with one server), as the watcher's did above (a fresh-clone run saw the
        # writer still away 30 s after the watcher was back); the deadline only catches a
        # writer that never comes back.
        assert writer.wait_connected(90), "the writer did not reconnect within 90 s"
        elect(writer, 2, 2)
        wait_timeline(
            watcher,
            has("controller resigned: broker 1 (epoch 1)", "broker 2 elected controller, epoch 2"),
            "the election after the reconnection",
        )
    finally:
        watcher.stop()
        watch_zk.close()
        writer.close()


@pytest.mark.slow
def test_watch_recovers_from_an_expired_session(zk_connect: str) -> None:
    writer = ZkClient(zk_connect)
    writer.start()
    watch_zk = ZkClient(zk_connect)
    watch_zk.start()
    watcher = Watcher(watch_zk)
    try:
        elect(writer, 1, 1)
        watcher.start()
        wait_timeline(watcher, has("controller is broker 1, epoch 1"), "the first read")
        # Expire the watcher's session the classic way: another client takes it over
        # (same id and password) and closes it.
        session_id, password = watch_zk.kazoo.client_id
        hosts, _ = zkp.split_chroot(zk_connect)
        thief = KazooClient(hosts=hosts, client_id=(session_id, password))
        thief.start(timeout=15)
        thief.stop()
        thief.close()
        wait_timeline(
            watcher,
            has(
                "ZooKeeper session expired; reconnecting with a new session",
                "ZooKeeper reconnected with a new session",
            ),
            "the expiry and the new session",
        )
        elect(writer, 3, 2)
        wait_timeline(
            watcher,
            has("broker 3 elected controller, epoch 2"),
            "an election seen through the watches of the new session",
        )
    finally:
        watcher.stop()
        watch_zk.close()
        writer.close()


def fake_cluster(
    writer: ZkClient, topics: dict[str, int]
) -> dict[tuple[str, int], tuple[int, ...]]:
    """Brokers 1-3, a controller and `topics` (name -> partitions, RF 3), written as a
    cluster writes them; returns every partition's replicas."""
    writer.ensure_paths(paths.PERSISTENT_PATHS)
    for b in (1, 2, 3):
        reg = BrokerRegistration(b, (EndPoint("PLAINTEXT", "127.0.0.1", 9090 + b),))
        writer.create(paths.broker(b), encode_broker(reg), ephemeral=True)
    elect(writer, 1, 1)
    replicas: dict[tuple[str, int], tuple[int, ...]] = {}
    items: list[list[Create]] = []
    for topic, n in topics.items():
        assignment = {p: (p % 3 + 1, (p + 1) % 3 + 1, (p + 2) % 3 + 1) for p in range(n)}
        replicas.update({(topic, p): r for p, r in assignment.items()})
        items.append(
            [
                Create(paths.topic(topic), encode_topic(TopicAssignment(topic, assignment))),
                Create(paths.topic_partitions(topic)),
            ]
        )
        for p, r in assignment.items():
            state = encode_partition_state(LeaderAndIsr(r[0], 0, r), 1)
            items.append(
                [Create(paths.partition(topic, p)), Create(paths.partition_state(topic, p), state)]
            )
    for result in writer.multi_batched(items):
        assert not any(isinstance(r, Exception) for r in result), result
    return replicas


def remove_partitions(writer: ZkClient, replicas: dict[tuple[str, int], tuple[int, ...]]) -> None:
    """Delete the partition znodes in a few multis (the chroot's recursive delete would
    take one round trip each)."""
    writer.multi_batched(
        [[Delete(paths.partition_state(t, p)), Delete(paths.partition(t, p))] for t, p in replicas]
    )


@pytest.mark.slow
def test_thousands_of_partitions_take_a_few_watches_and_make_a_few_lines(zk_connect: str) -> None:
    writer = ZkClient(zk_connect)
    writer.start()
    watch_zk = ZkClient(zk_connect)
    watch_zk.start()
    watcher = Watcher(watch_zk, per_partition_watches=1000)
    replicas = fake_cluster(writer, {"orders": 3000, "payments": 2000})
    try:
        watcher.start()
        wait_timeline(
            watcher,
            has("5,000 partitions in 2 topics: 5,000 online, 0 offline, 0 under-replicated"),
            "the first read",
        )
        state_watches = [p for p in watcher.source.armed_paths() if p.endswith("/state")]
        assert 0 < len(state_watches) <= 3 * 8 + 5 * 16, len(state_watches)

        # Broker 2 dies; then "the controller" elects new leaders and shrinks the ISRs, in
        # batches, writing nothing but partition states: only the canaries can notice.
        writer.delete(paths.broker(2))
        wait_timeline(
            watcher,
            has(
                "broker 2 lost: its registration is gone;"
                " 1,667 partitions it led now without a leader"
            ),
            "the broker loss",
        )
        assert watcher.state.summary.offline_count == 1667
        before = len(watcher.state.timeline)
        items = []
        for (topic, p), r in replicas.items():
            isr = tuple(b for b in r if b != 2)
            leader = r[0] if r[0] != 2 else isr[0]
            items.append(
                [
                    SetData(
                        paths.partition_state(topic, p),
                        encode_partition_state(LeaderAndIsr(leader, 1, isr), 1),
                    )
                ]
            )
        for result in writer.multi_batched(items, max_ops=400):
            assert not any(isinstance(r, Exception) for r in result), result

        def settled(texts: list[str]) -> bool:
            s = watcher.state.summary
            return s.offline_count == 0 and s.under_replicated_count == 5000

        wait_timeline(watcher, settled, "every new leader and ISR to be seen")
        new_lines = [e.text for e in watcher.state.timeline[before:]]
        moved = sum(
            int(m.group(1).replace(",", ""))
            for m in (re.match(r"leader moved for ([\d,]+) partitions", t) for t in new_lines)
            if m
        ) + sum(1 for t in new_lines if re.match(r"leader of \S+ moved", t))
        assert moved == 1667, new_lines
        assert len(new_lines) <= 20, new_lines  # summarised, not 6,667 lines
        assert watcher.state.summary.leaders == {1: 1667, 3: 3333}
        screen = screen_lines(watcher.state, time.time(), 50, 160)
        assert len(screen) <= 50
    finally:
        watcher.stop()
        watch_zk.close()
        remove_partitions(writer, replicas)
        writer.close()


@pytest.mark.slow
def test_a_partition_change_with_no_other_trigger_is_seen_below_the_limit(zk_connect: str) -> None:
    """With few partitions every state znode is watched: a leader moved by an automatic
    rebalance, which writes nothing else, shows at once."""
    writer = ZkClient(zk_connect)
    writer.start()
    watch_zk = ZkClient(zk_connect)
    watch_zk.start()
    watcher = Watcher(watch_zk)
    try:
        fake_cluster(writer, {"small": 6})
        watcher.start()
        wait_timeline(watcher, has("6 partitions in 1 topic"), "the first read")
        assert len([p for p in watcher.source.armed_paths() if p.endswith("/state")]) == 6
        writer.set(
            paths.partition_state("small", 4),
            encode_partition_state(LeaderAndIsr(3, 1, (2, 3, 1)), 1),
        )
        wait_timeline(watcher, has("leader of small-4 moved 2 -> 3 (leader epoch 1)"), "the move")
    finally:
        watcher.stop()
        watch_zk.close()
        writer.close()


# --- topics re-created, unreadable, and reads racing a creation ----------------------------


def pump_until(watcher: Watcher, pred: Callable[[Watcher], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        watcher.pump(0.1)
        if pred(watcher):
            return True
    return False


def leader_of(watcher: Watcher, topic: str) -> int | None:
    led = [pv.leader for tp, pv in watcher.state.partitions.items() if tp.topic == topic]
    return led[0] if led else None


def topic_t_creates(leader: int) -> list[Create | Delete | SetData]:
    return [
        Create(paths.topic("t"), encode_topic(TopicAssignment("t", {0: (1, 2)}))),
        Create(paths.topic_partitions("t")),
        Create(paths.partition("t", 0)),
        Create(
            paths.partition_state("t", 0),
            encode_partition_state(LeaderAndIsr(leader, 0, (1, 2)), 1),
        ),
    ]


def topic_t_deletes() -> list[Create | Delete | SetData]:
    return [
        Delete(paths.partition_state("t", 0)),
        Delete(paths.partition("t", 0)),
        Delete(paths.topic_partitions("t")),
        Delete(paths.topic("t")),
    ]


def two_brokers(writer: ZkClient) -> None:
    writer.ensure_paths(paths.PERSISTENT_PATHS)
    for b in (1, 2):
        reg = BrokerRegistration(b, (EndPoint("PLAINTEXT", "127.0.0.1", 9090 + b),))
        writer.create(paths.broker(b), encode_broker(reg), ephemeral=True)
    elect(writer, 1, 1)


@pytest.fixture
def watched(zk_connect: str) -> Iterator[tuple[ZkClient, ZkClient, Watcher]]:
    """A writer, the watcher's client and the watcher (not started)."""
    writer = ZkClient(zk_connect)
    writer.start()
    watch_zk = ZkClient(zk_connect)
    watch_zk.start()
    watcher = Watcher(watch_zk)
    try:
        yield writer, watch_zk, watcher
    finally:
        watcher.stop()
        watch_zk.close()
        writer.close()


def test_a_topic_created_again_is_watched_again(
    watched: tuple[ZkClient, ZkClient, Watcher],
) -> None:
    writer, _, watcher = watched
    two_brokers(writer)
    writer.multi(topic_t_creates(1))
    watcher.start()
    assert watcher.wait_ready(15)
    assert pump_until(watcher, lambda w: leader_of(w, "t") == 1, 10)
    seen = []
    for i in range(6):
        writer.multi(topic_t_deletes())
        if i % 2:
            time.sleep(0.5)  # the deletion read on its own, or with the creation
        writer.multi(topic_t_creates(1))
        time.sleep(0.5)
        state = encode_partition_state(LeaderAndIsr(2, 1, (2,)), 1)
        writer.set(paths.partition_state("t", 0), state)
        seen.append(pump_until(watcher, lambda w: leader_of(w, "t") == 2, 5))
        state = encode_partition_state(LeaderAndIsr(1, 2, (1, 2)), 1)
        writer.set(paths.partition_state("t", 0), state)
        pump_until(watcher, lambda w: leader_of(w, "t") == 1, 5)
    assert all(seen), (seen, sorted(watcher.source.armed_paths()))


def test_a_topic_being_deleted_is_shown_so_not_offline_and_goes(
    watched: tuple[ZkClient, ZkClient, Watcher],
) -> None:
    """What Kafka 2.8's controller writes for a topic deletion (TopicDeletionManager): the
    request under /admin/delete_topics, the replicas taken offline (leader -1, no -2 in
    ZooKeeper), then the topic's znodes and the request removed."""
    writer, _, watcher = watched
    two_brokers(writer)
    writer.multi(topic_t_creates(1))
    watcher.start()
    assert watcher.wait_ready(15)
    assert pump_until(watcher, lambda w: leader_of(w, "t") == 1, 10)
    writer.create(paths.delete_topic("t"))
    state = encode_partition_state(LeaderAndIsr(-1, 1, (2,)), 1)
    writer.set(paths.partition_state("t", 0), state)
    assert pump_until(
        watcher, lambda w: w.state.summary.deleting == 1 and leader_of(w, "t") == -1, 10
    ), [e.text for e in watcher.state.timeline]
    assert watcher.state.summary.offline_count == 0
    screen = [text for text, _ in screen_lines(watcher.state, time.time() + 30, 50, 160)]
    assert not [line for line in screen if line.startswith("!!") or "OFFLINE" in line], screen
    writer.multi([*topic_t_deletes(), Delete(paths.delete_topic("t"))])
    assert pump_until(watcher, lambda w: "t" not in w.state.topics, 10)
    texts = [e.text for e in watcher.state.timeline]
    assert "topic t marked for deletion: 1 partition" in texts, texts
    assert "topic t deleted" in texts, texts
    assert not [t for t in texts if "no leader" in t or "shrank" in t], texts
    assert watcher.state.summary.deleting == 0


def test_an_unreadable_topic_is_kept_and_its_repair_seen(
    watched: tuple[ZkClient, ZkClient, Watcher],
) -> None:
    writer, _, watcher = watched
    two_brokers(writer)
    writer.multi(topic_t_creates(1))
    watcher.start()
    assert watcher.wait_ready(15)
    assert pump_until(watcher, lambda w: "t" in w.state.topics, 10)
    writer.set(paths.topic("t"), b"{not json")  # someone's bad write
    assert pump_until(watcher, lambda w: any(e.kind == "problem" for e in w.state.timeline), 10)
    assert "t" in watcher.state.topics, "the unreadable topic was dropped"
    writer.set(paths.topic("t"), encode_topic(TopicAssignment("t", {0: (1, 2)})))  # repaired
    # A leader change of the repaired topic is seen, and it was never said to be deleted.
    state = encode_partition_state(LeaderAndIsr(2, 1, (2,)), 1)
    writer.set(paths.partition_state("t", 0), state)
    assert pump_until(watcher, lambda w: leader_of(w, "t") == 2, 8)
    texts = [e.text for e in watcher.state.timeline]
    assert not [t for t in texts if "topic t deleted" in t], texts


def test_a_topic_unreadable_from_the_start_is_seen_once_repaired(
    watched: tuple[ZkClient, ZkClient, Watcher],
) -> None:
    writer, _, watcher = watched
    two_brokers(writer)
    creates = topic_t_creates(1)
    creates[0] = Create(paths.topic("t"), b"{not json")
    writer.multi(creates)
    watcher.start()
    assert watcher.wait_ready(15)
    assert pump_until(watcher, lambda w: any(e.kind == "problem" for e in w.state.timeline), 10)
    time.sleep(1)
    watcher.pump(0.1)
    writer.set(paths.topic("t"), encode_topic(TopicAssignment("t", {0: (1, 2)})))
    assert pump_until(watcher, lambda w: leader_of(w, "t") == 1, 8), (
        sorted(watcher.source.armed_paths()),
        [e.text for e in watcher.state.timeline][-4:],
    )


def test_a_partition_state_created_between_its_read_and_its_exists_watch_is_shown(
    watched: tuple[ZkClient, ZkClient, Watcher],
) -> None:
    writer, watch_zk, watcher = watched
    two_brokers(writer)
    writer.create(paths.topic("t"), encode_topic(TopicAssignment("t", {0: (1, 2)})))
    writer.create(paths.partition("t", 0), make_parents=True)
    state_path = paths.partition_state("t", 0)
    exists = watch_zk.exists
    raced: list[str] = []

    def create_then_exists(path: str, *, watch: bool = False) -> object:
        # The watched read found nothing; the state appears before the exists watch.
        if path == state_path and watch and not raced:
            raced.append(path)
            state = encode_partition_state(LeaderAndIsr(1, 0, (1, 2)), 1)
            writer.create(state_path, state)
        return exists(path, watch=watch)

    watch_zk.exists = create_then_exists  # type: ignore[method-assign, assignment]  # no watcher passed
    watcher.start()
    assert watcher.wait_ready(15)
    shown = pump_until(
        watcher,
        lambda w: any(pv.has_state and pv.leader == 1 for pv in w.state.partitions.values()),
        8,
    )
    assert raced, "the window between the read and the exists watch was not reached"
    assert shown, {str(tp): pv for tp, pv in watcher.state.partitions.items()}


def test_plain_watch_prints_what_its_locale_cannot_encode(zk_connect: str) -> None:
    """A non-UTF-8 locale (PYTHONIOENCODING=latin-1 stands in for one not installed)."""
    writer = ZkClient(zk_connect)
    writer.start()
    try:
        writer.ensure_paths(paths.PERSISTENT_PATHS)
        writer.create(paths.CONTROLLER_EPOCH, encode_controller_epoch(3))
        bad = '{"version": 1, "brokerid": "日本", "timestamp": "1"}'
        writer.create(paths.CONTROLLER, bad.encode())
        proc = subprocess.run(
            zkctl_argv("--zookeeper", zk_connect, "watch", "--plain", "--duration", "4"),
            capture_output=True,
            check=False,
            timeout=60,
            env={**zkctl_env(), "PYTHONIOENCODING": "latin-1"},
            cwd=ROOT,
        )
        assert proc.returncode == 0, (proc.returncode, proc.stderr.decode("latin-1")[-600:])
        assert "\\u65e5\\u672c" in proc.stdout.decode("latin-1")
    finally:
        writer.close()


def test_plain_watch_stops_once_its_reader_is_gone_on_a_quiet_cluster(zk_connect: str) -> None:
    """`zkctl watch --plain | head -1`: head exits after its line, and nothing more
    happens in the cluster to write a line that would raise BrokenPipeError."""
    proc = subprocess.Popen(
        zkctl_argv("--zookeeper", zk_connect, "watch", "--plain"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=zkctl_env(),
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        proc.stdout.readline()  # connected and watching: the first line
        time.sleep(2)  # the lines held with it written too: nothing more to write
        proc.stdout.close()  # the reader goes away
        assert proc.wait(timeout=20) == 1  # as when a line meets the closed pipe
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_controller_already_there_is_shown_since_its_election(zk_connect: str) -> None:
    writer = ZkClient(zk_connect)
    writer.start()
    watch_zk = ZkClient(zk_connect)
    watch_zk.start()
    watcher = Watcher(watch_zk)
    try:
        elect(writer, 1, 1)
        got = writer.get(paths.CONTROLLER)
        assert got is not None
        elected_at = got[1].ctime / 1000
        time.sleep(1.5)
        watcher.start()
        wait_timeline(watcher, has("controller is broker 1, epoch 1"), "the first read")
        controller = watcher.state.controller
        assert controller is not None
        # Its term began at its election (/controller's ctime), not at the watch's start.
        assert controller.since == elected_at
    finally:
        watcher.stop()
        watch_zk.close()
        writer.close()
