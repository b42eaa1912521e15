"""A failed log directory (KIP-112): a broker whose disk fills takes that directory
offline, tells the controller through /log_dir_event_notification, and the controller
moves the leaderships and ISR memberships of the replicas that were there, while the
broker goes on serving the partitions of its other directories. A broker whose every
directory failed stops. A full first directory also pauses the state-change log, which is
written again once the disk has room.

The fault is real: each failing directory is a small tmpfs filled to the last page
(ENOSPC on the next append), mounted for the test and unmounted after it.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker.state_change_log import RETRY_S, log_files
from tests.integration.conftest import ClusterFactory
from tests.integration.dataplane import Acked, consume, lost_acknowledged, produce
from tests.integration.harness import Cluster, wait_for
from tests.small_disks import fill, tmpfs
from zkctl.controller_status import failed_log_dirs
from zkdata import paths
from zkdata.znodes import LeaderAndIsr

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "disks"


@pytest.fixture
def small_disk() -> Iterator[Callable[[Path], Path]]:
    """Mounts a 4 MiB tmpfs (a disk that can fill) at a directory, per call."""
    with contextlib.ExitStack() as mounted:
        yield lambda where: mounted.enter_context(tmpfs(where, "4m"))


def partitions_in(directory: Path) -> set[int]:
    """The partitions of TOPIC whose logs are in this log directory."""
    return {
        int(entry.name.rsplit("-", 1)[1])
        for entry in directory.iterdir()
        if entry.is_dir() and entry.name.startswith(f"{TOPIC}-")
    }


def leaders(c: Cluster) -> dict[int, LeaderAndIsr]:
    return c.partition_states(TOPIC)


def broker_1_on_two_disks(c: Cluster, disk: Path) -> tuple[set[int], set[int]]:
    """Starts the cluster, broker 1 with two log directories (its own, then ``disk``), and
    TOPIC's six partitions, all led by broker 1. Returns the partitions whose logs broker
    1 put on ``disk`` and those in its first directory (it spreads them over both)."""
    first = c[1].data_dir
    c[1].overrides["log.dirs"] = f"{first},{disk}"
    c.start()
    c.create_topic(TOPIC, {p: (1, 2, 3) for p in range(6)})
    # Its leader_and_isr lines are written once the request's logs are all made (one at a
    # time); the topic online in ZooKeeper does not say broker 1 has got that far.
    c.wait_topic_applied(TOPIC)
    on_disk, elsewhere = partitions_in(disk), partitions_in(first)
    assert on_disk, "no log on the second disk"
    assert elsewhere, "no log in the first directory"
    assert on_disk | elsewhere == set(range(6))
    assert not on_disk & elsewhere
    return on_disk, elsewhere


def test_a_full_log_directory_moves_its_leaderships_and_the_broker_serves_the_rest(
    cluster_factory: ClusterFactory, small_disk: Callable[[Path], Path], tmp_path: Path
) -> None:
    c = cluster_factory(start=False, min_insync_replicas="2")
    disk = small_disk(tmp_path / "broker-1-disk")
    on_disk, elsewhere = broker_1_on_two_disks(c, disk)
    before = leaders(c)
    written = produce(c, TOPIC, [b"before-%d" % i for i in range(60)])
    assert written.errors == []

    fill(disk)
    # Every partition gets appends that need new pages: those on the full disk fail
    # there, and the client retries them with their new leaders.
    acked = Acked()
    for p in range(6):  # each partition its own: a keyless producer sticks to one a while
        produce(c, TOPIC, [os.urandom(1024) for _ in range(100)], acked, partition=p)
    assert acked.errors == [], acked.errors[:5]
    assert {p for p, _ in acked.by_offset} == set(range(6))

    def moved() -> dict[int, LeaderAndIsr] | None:
        states = leaders(c)
        return states if all(states[p].leader != 1 for p in on_disk) else None

    after = wait_for(moved, 60, "the full directory's partitions led elsewhere")
    for p in on_disk:
        assert after[p].leader in (2, 3)
        assert after[p].leader_epoch > before[p].leader_epoch
        assert 1 not in after[p].isr, (p, after[p])
    for p in elsewhere:
        # still led by broker 1, which never stopped
        assert after[p].leader == 1, (p, after[p])
        assert 1 in after[p].isr
    assert c[1].alive()
    assert 1 in c.registered()
    # Its status file says so (zkctl status and zkctl controller read it to a person).
    said = wait_for(
        lambda: failed_log_dirs(c[1].status() or {}), 30, "the status file to name the disk"
    )
    assert said == (
        f"log directories failed: {disk} ({len(on_disk)} of its partitions offline until it"
        " restarts)"
    )
    # The controller handled the notification and removed it.
    wait_for(
        lambda: not c.zk.get_children(paths.LOG_DIR_EVENT_NOTIFICATION),
        30,
        "the log directory notification handled",
    )
    controller_id, _ = c.wait_controller()
    reasons = {
        (row["partition"], row["leader"])
        for row in c[controller_id].state_changes("partition_state")
        if row["topic"] == TOPIC and row["reason"] == "offline"
    }
    assert {p for p, leader in reasons if leader in (2, 3)} >= on_disk
    # Broker 1 refuses what was on the failed directory and answers for the rest.
    refused = [
        row
        for row in c[1].state_changes("leader_and_isr")
        if row["topic"] == TOPIC and row.get("error") == "KAFKA_STORAGE_ERROR"
    ]
    assert {row["partition"] for row in refused} <= on_disk
    assert f"log directory {disk} failed" in c[1].output()

    # Nothing acknowledged was lost, on either directory's partitions.
    read = consume(c, TOPIC, list(range(6)))
    assert lost_acknowledged(read, written, acked) == []
    # Broker 1 still takes writes for the partitions of its working directory.
    more = produce(c, TOPIC, [b"after-%d" % i for i in range(30)], partition=min(elsewhere))
    assert more.errors == []
    assert leaders(c)[min(elsewhere)].leader == 1

    # Restarted with its disk emptied, it has its replicas back, and catches up.
    c[1].stop()
    (disk / "filler").unlink()
    c[1].start()
    c.wait_registered([1])
    wait_for(
        lambda: all(1 in s.isr for s in leaders(c).values()) or None,
        90,
        "broker 1 back in every ISR",
    )


def test_a_full_first_directory_pauses_the_state_change_log_until_the_disk_has_room(
    cluster_factory: ClusterFactory, small_disk: Callable[[Path], Path], tmp_path: Path
) -> None:
    """The first log directory also holds the state-change log: while its disk is full
    the broker goes on without it (the partitions there led elsewhere, the others served),
    and once an operator frees the disk the log is written again, without a restart."""
    c = cluster_factory(start=False, min_insync_replicas="2")
    disk = small_disk(tmp_path / "broker-1-first-disk")
    c[1].overrides["log.dirs"] = f"{disk},{c[1].data_dir}"
    c.start()
    c.create_topic(TOPIC, {p: (1, 2, 3) for p in range(6)})
    c.wait_topic_applied(TOPIC)  # broker 1's logs all made, as in broker_1_on_two_disks

    def state_log() -> str:  # the rolled files too
        return "".join(p.read_text() for p in log_files(disk))

    on_disk = partitions_in(disk)
    assert on_disk, "no log on the first disk"

    fill(disk)
    acked = Acked()
    for p in range(6):
        produce(c, TOPIC, [os.urandom(1024) for _ in range(100)], acked, partition=p)
    assert acked.errors == [], acked.errors[:5]
    wait_for(
        lambda: all(leaders(c)[p].leader != 1 for p in on_disk),
        60,
        "the full directory's partitions led elsewhere",
    )
    # The log's last page had room for a few lines: more than a page of them (30 new
    # partitions of broker 1, in its second directory) reaches the full disk.
    c.create_topic("during", {p: (1, 2, 3) for p in range(30)})
    c.wait_topic_online("during")
    wait_for(
        lambda: "could not write the state-change log" in c[1].output(),
        30,
        "the state-change log's failure reported",
    )
    assert c[1].alive()

    (disk / "filler").unlink()
    time.sleep(RETRY_S + 0.5)  # the next line is then written, whenever it was last tried
    # Something for broker 1 to log: a new topic it is a replica of (its log goes to the
    # second directory; the first stays offline for partitions until a restart).
    c.create_topic("after", {0: (1, 2, 3)})
    c.wait_topic_online("after")

    def logged() -> list[dict[str, object]]:
        return [
            json.loads(line)
            for line in state_log().splitlines()
            if '"topic":"after"' in line and '"event":"leader_and_isr"' in line
        ]

    (row,) = wait_for(logged, 30, "broker 1's LeaderAndIsr of the new topic logged")
    assert row["result"] == "applied"
    # Logged once the line that found the disk with room again is written.
    wait_for(lambda: "is written again" in c[1].output(), 30, "the log's recovery reported")
    assert partitions_in(disk) == on_disk  # nothing new made in the failed directory
    assert produce(c, "after", [b"x"] * 10).errors == []
    assert lost_acknowledged(consume(c, TOPIC, list(range(6))), acked) == []


def test_a_broker_whose_every_log_directory_failed_stops(
    cluster_factory: ClusterFactory, small_disk: Callable[[Path], Path]
) -> None:
    c = cluster_factory(start=False)
    disk = small_disk(c[3].data_dir)  # its one log directory (status file and all)
    c.start()
    c.create_topic(TOPIC, {0: (3, 1, 2), 1: (1, 2, 3)})
    c.wait_topic_online(TOPIC)
    written = produce(c, TOPIC, [b"m-%d" % i for i in range(20)], partition=0)
    assert written.errors == []
    fill(disk)
    acked = produce(c, TOPIC, [os.urandom(1024) for _ in range(300)], partition=0)
    assert acked.errors == []
    assert c[3].wait_exit(timeout=60) == 1
    assert f"Shutdown broker because all log dirs in {disk} have failed" in c[3].output()

    def led_again() -> LeaderAndIsr | None:
        state = leaders(c)[0]
        return state if state.leader in (1, 2) else None

    state = wait_for(led_again, 60, "a new leader")
    assert 3 not in state.isr
    read = consume(c, TOPIC, [0])
    assert lost_acknowledged(read, written, acked) == []


def test_a_broker_restarted_without_one_of_its_disks_serves_the_rest(
    cluster_factory: ClusterFactory, small_disk: Callable[[Path], Path], tmp_path: Path
) -> None:
    c = cluster_factory(start=False)
    disk = small_disk(tmp_path / "broker-1-disk")
    on_disk, elsewhere = broker_1_on_two_disks(c, disk)
    written = Acked()
    for p in range(6):
        produce(c, TOPIC, [b"m-%d-%d" % (p, i) for i in range(20)], written, partition=p)
    assert written.errors == []

    # The disk is gone when the broker starts again: where it was mounted is a file now.
    assert c[1].stop() == 0
    subprocess.run(["umount", str(disk)], check=True, timeout=60)
    disk.rmdir()
    disk.write_text("not a log directory\n")
    c[1].start()
    c.wait_registered([1])
    # Its partitions of the first directory are served, and it catches up in them...
    wait_for(
        lambda: all(1 in leaders(c)[p].isr for p in elsewhere) or None,
        90,
        "broker 1 back in the ISRs of its first directory's partitions",
    )
    assert f"log directory {disk} is offline from the start" in c[1].output()
    # ...while it refuses the others (their logs may have been on the missing disk: not
    # made again empty), and the controller holds them offline: no ISR takes it back.
    controller_id, _ = c.wait_controller()
    wait_for(
        lambda: "replicas on a failed log directory" in c[controller_id].output() or None,
        30,
        "the controller to hold broker 1's replicas of the missing disk offline",
    )
    states = leaders(c)
    for p in on_disk:
        assert 1 not in states[p].isr, (p, states[p])
        assert states[p].leader in (2, 3)
    refused = {
        row["partition"]
        for row in c[1].state_changes("leader_and_isr")
        if row["topic"] == TOPIC and row.get("error") == "KAFKA_STORAGE_ERROR"
    }
    assert refused == on_disk
    read = consume(c, TOPIC, list(range(6)))
    assert lost_acknowledged(read, written) == []
