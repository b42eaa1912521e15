"""What the benchmarks share: a ZooKeeper, a cluster state written in bulk, process probes.

Every benchmark prints one JSON object: its figures and the floor measured in the same run.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from cluster import zookeeper as zkp  # noqa: E402
from zkdata import paths  # noqa: E402
from zkdata.client import Create, ZkClient, is_own_failure  # noqa: E402
from zkdata.znodes import (  # noqa: E402
    LeaderAndIsr,
    TopicAssignment,
    TopicPartition,
    encode_partition_list,
    encode_partition_state,
    encode_topic,
    encode_topic_config,
    new_topic_id,
)


@contextmanager
def zookeeper() -> Iterator[str]:
    """A ZooKeeper for the benchmark (as the project provisions everywhere)."""
    zk = zkp.provision()
    try:
        yield zk.connect_string
    finally:
        zk.close()


def chroot(connect: str, name: str) -> str:
    return zkp.chroot_connect_string(connect, f"/bench-{name}-{uuid.uuid4().hex[:6]}")


def drop_chroot(connect: str) -> None:
    """Delete a chroot made by `chroot` and all under it: a benchmark's rounds at 100,000
    partitions would otherwise fill ZooKeeper's heap (512 MB), its collections slowing
    every later round (a deletion's second round took 17 s against 5 s)."""
    zkp.delete_chroot(connect, timeout=30.0)


def write_cluster_state(
    connect: str,
    assignments: dict[str, dict[int, tuple[int, ...]]],
    *,
    leader_epoch: int = 0,
    controller_epoch: int = 0,
) -> float:
    """Topics, configs and partition states as a running cluster would have left them
    (leader = first replica, ISR = all replicas). Returns the seconds it took."""
    zk = ZkClient(connect, session_timeout_ms=30_000)
    zk.start()
    started = time.perf_counter()
    try:
        zk.ensure_paths(paths.PERSISTENT_PATHS)
        zk.create(paths.CONTROLLER_EPOCH, str(controller_epoch).encode())
        items: list[list[Any]] = []
        for topic, parts in assignments.items():
            items.append([Create(paths.topic_config(topic), encode_topic_config({}))])
            items.append(
                [
                    Create(
                        paths.topic(topic),
                        encode_topic(TopicAssignment(topic, parts, new_topic_id())),
                    )
                ]
            )
        _apply(zk, items)
        _apply(zk, [[Create(paths.topic_partitions(t))] for t in assignments])
        _apply(
            zk, [[Create(paths.partition(t, p))] for t, parts in assignments.items() for p in parts]
        )
        _apply(
            zk,
            [
                [
                    Create(
                        paths.partition_state(t, p),
                        encode_partition_state(
                            LeaderAndIsr(r[0], leader_epoch, r), controller_epoch
                        ),
                    )
                ]
                for t, parts in assignments.items()
                for p, r in parts.items()
            ],
        )
        return time.perf_counter() - started
    finally:
        zk.close()


def _apply(zk: ZkClient, items: list[list[Any]]) -> None:
    for results in zk.multi_batched(items):
        bad = [r for r in results if is_own_failure(r)]
        if bad:
            raise RuntimeError(f"bulk write failed: {bad[0]!r}")


def round_robin(
    n_partitions: int, per_topic: int, brokers: tuple[int, ...] = (1, 2, 3)
) -> dict[str, dict[int, tuple[int, ...]]]:
    """RF = len(brokers), leaders spread evenly; topics of ``per_topic`` partitions, the
    last one holding the remainder."""
    out: dict[str, dict[int, tuple[int, ...]]] = {}
    n = len(brokers)
    for t in range(max(1, -(-n_partitions // per_topic))):
        count = min(per_topic, n_partitions - t * per_topic)
        out[f"topic-{t:05d}"] = {
            p: tuple(brokers[(p + t + i) % n] for i in range(n)) for p in range(count)
        }
    return out


def require_acknowledged(
    ack: dict[str, Any], brokers: Iterable[int], what: str, *, abandoned_ok: bool = False
) -> None:
    """Refuse (RuntimeError) a figure taken from a ``requests_acknowledged`` line some of
    whose requests were never answered: one of ``brokers`` answering none, or one
    abandoned (its broker went; ``abandoned_ok`` where a broker shutting down may leave
    before it answers its last). Its times would then be those of fewer brokers."""
    missing = sorted(b for b in brokers if str(b) not in ack["acked_ms_by_broker"])
    if missing or (ack["abandoned"] and not abandoned_ok):
        raise RuntimeError(
            f"{what}: {ack['abandoned']} requests abandoned, no answer from brokers {missing}"
            f" (requests {ack['requests']}): no figure"
        )


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least ``minimum`` (a count of partitions,
    rounds, ...); anything else is a usage error before ZooKeeper or a broker starts."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is less than {minimum}")
        return value

    return parse


def sizes(text: str) -> list[int]:
    """An argparse type: comma-separated sizes, each a whole number of at least 1."""
    parse = at_least(1)
    values = [parse(s.strip()) for s in text.split(",") if s.strip()]
    if not values:
        raise argparse.ArgumentTypeError("no size given")
    return values


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class RssSampler:
    """Samples processes' resident memory every ``interval_s`` on a thread while in use
    (``with RssSampler(pids) as s``): a single sample after the fact misses a transient
    peak, and an idle broker's memory moves by some MB from one second to the next (its
    periodic checks touch pages its trim returned). A process gone mid-way keeps the
    samples it gave."""

    def __init__(self, pids: Iterable[int], interval_s: float = 0.05) -> None:
        self.samples: dict[int, list[float]] = {pid: [] for pid in pids}
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _run(self) -> None:
        while True:
            for pid, taken in self.samples.items():
                try:
                    mb = rss_mb(pid)
                except OSError:
                    continue  # gone
                if not math.isnan(mb):  # an exited process not yet reaped has no VmRSS
                    taken.append(mb)
            if self._stop.wait(self.interval_s):
                return

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def peak_mb(self, pid: int) -> float:
        taken = self.samples[pid]
        return round(max(taken), 1) if taken else float("nan")

    def spread_mb(self, pid: int) -> dict[str, float]:
        """The least, median and most of a process's samples."""
        taken = sorted(self.samples[pid])
        if not taken:
            return {"min": float("nan"), "median": float("nan"), "max": float("nan")}
        return {
            "min": round(taken[0], 1),
            "median": round(statistics.median(taken), 1),
            "max": round(taken[-1], 1),
        }


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuSampler:
    """Samples processes' CPU time (user + system, all threads) every ``interval_s`` on a
    thread while in use (``with CpuSampler(pids) as s``), each sample stamped with the wall
    clock, so the CPU a process used between two moments a state-change log names can be
    read afterwards (a broker loss is learned a session timeout after the kill, and
    before/after totals would count that wait). The kernel counts CPU in clock ticks
    (10 ms here), so a figure is good to about two ticks. A process gone mid-way keeps the
    samples it gave."""

    def __init__(self, pids: Iterable[int], interval_s: float = 0.02) -> None:
        self.samples: dict[int, list[tuple[float, float]]] = {pid: [] for pid in pids}
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)

    def _sample(self) -> None:
        for pid, taken in self.samples.items():
            try:
                cpu_s = cpu_seconds(pid)
            except OSError:
                continue  # gone
            taken.append((time.time() * 1000, cpu_s))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()
        self._sample()  # once more: the window's end may be only just past

    def __enter__(self) -> CpuSampler:
        # The first sample before the block runs: a window may start with it.
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def used(self, pid: int, from_ms: float, to_ms: float) -> dict[str, float]:
        """The CPU seconds ``pid`` used from the last sample at or before ``from_ms`` to
        the first at or after ``to_ms`` (wall clock, ms), that window's seconds, and the
        cores it kept busy on average (a Python process runs its Python code on one core
        at a time, under its GIL: near 1, that is its bound). ValueError if no samples
        bracket the window."""
        taken = self.samples[pid]
        before = [s for s in taken if s[0] <= from_ms]
        after = [s for s in taken if s[0] >= to_ms]
        if not before or not after:
            raise ValueError(f"no CPU samples of pid {pid} around {from_ms}..{to_ms}")
        (t0, c0), (t1, c1) = before[-1], after[0]
        window_s = (t1 - t0) / 1000
        cpu_s = c1 - c0
        return {
            "cpu_s": round(cpu_s, 2),
            "window_s": round(window_s, 3),
            "cores": round(cpu_s / window_s, 2) if window_s > 0 else float("nan"),
        }


def wait_cpu_quiet(
    pids: Iterable[int], below: float = 0.25, window_s: float = 2.0, timeout: float = 600
) -> float:
    """Wait until each process used less than ``below`` of a core over the last
    ``window_s`` (a cluster started on written state goes on with its start-up, its
    logs made and followers fetching, after its ISRs look full). Returns the seconds
    waited; TimeoutError after ``timeout``."""
    pids = list(pids)
    started = time.monotonic()
    while True:
        before = {pid: cpu_seconds(pid) for pid in pids}
        t0 = time.monotonic()
        time.sleep(window_s)
        elapsed = time.monotonic() - t0
        if all((cpu_seconds(pid) - before[pid]) / elapsed < below for pid in pids):
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"the brokers were still busy after {timeout:.0f} s")


def last(rows: list[dict[str, Any]], **match: Any) -> dict[str, Any] | None:
    """The last row with every key of ``match`` equal (a state-change log's, say)."""
    for r in reversed(rows):
        if all(r.get(k) == v for k, v in match.items()):
            return r
    return None


def emit(result: dict[str, Any]) -> None:
    print(json.dumps(result, indent=1, sort_keys=False), flush=True)


def wait_quiet(connect: str, timeout: float = 600) -> float:
    """Wait until every partition's ISR holds all its replicas and no ISR change is pending
    (brokers that registered late are back in every ISR). Returns the seconds waited."""
    zk = ZkClient(connect, session_timeout_ms=30_000)
    zk.start()
    started = time.monotonic()
    try:
        while True:
            topics = zk.get_children(paths.BROKER_TOPICS) or []
            topic_data = zk.get_many([paths.topic(t) for t in topics])
            wanted = [
                (paths.partition_state(t, int(p)), r)
                for t, got in zip(topics, topic_data, strict=True)
                if got is not None
                for p, r in json.loads(got[0])["partitions"].items()
            ]
            states = zk.get_many([w[0] for w in wanted])
            full = all(
                got is not None and set(json.loads(got[0])["isr"]) == set(r)
                for (_, r), got in zip(wanted, states, strict=True)
            )
            if full and not zk.get_children(paths.ISR_CHANGE_NOTIFICATION):
                return time.monotonic() - started
            if time.monotonic() - started > timeout:
                raise TimeoutError("the cluster did not settle (ISRs incomplete)")
            time.sleep(0.5)
    finally:
        zk.close()


def elect_preferred_leaders(zk: ZkClient, assignments: dict[str, dict[int, Any]]) -> float:
    """A preferred replica election of every partition, 10 topics at a time (the znode
    must stay under 1 MB); returns the seconds it took."""
    started = time.perf_counter()
    topics = list(assignments)
    for i in range(0, len(topics), 10):
        batch = [TopicPartition(t, p) for t in topics[i : i + 10] for p in assignments[t]]
        zk.create(paths.PREFERRED_REPLICA_ELECTION, encode_partition_list(batch))
        deadline = time.monotonic() + 600
        while zk.exists(paths.PREFERRED_REPLICA_ELECTION) is not None:
            if time.monotonic() > deadline:
                raise TimeoutError("the preferred replica election did not finish in 600 s")
            time.sleep(0.05)
    return time.perf_counter() - started


def best_of(repeat: int, func: Callable[[], Any], *, pause_gc: bool = False) -> tuple[float, Any]:
    """The shortest of `repeat` timed runs of `func` (seconds), and its last result; the
    cyclic collector runs before each run, and with `pause_gc` not during it."""
    if repeat < 1:
        raise ValueError(f"best of {repeat} runs: no run to time")
    best = float("inf")
    result = None
    for _ in range(repeat):
        result = None  # free the previous result outside the timed region
        gc.collect()
        if pause_gc:
            gc.disable()
        start = time.perf_counter()
        try:
            result = func()
        finally:
            best = min(best, time.perf_counter() - start)
            gc.enable()
    return best, result


class Sleeper:
    """A thread sleeping 0.2 ms at a time, which notes the longest it woke late."""

    SLEEP_S = 0.0002

    def __init__(self) -> None:
        self.longest_late_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sleeper", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.perf_counter()
            time.sleep(self.SLEEP_S)
            late = time.perf_counter() - started - self.SLEEP_S
            self.longest_late_s = max(self.longest_late_s, late)

    def __enter__(self) -> Sleeper:
        self._thread.start()
        time.sleep(0.05)  # running before the first measured call
        self.longest_late_s = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
