"""A cluster of brokers supervised as child processes of this one.

Tests, benchmarks and `zkctl demo` use it: brokers are `python -m broker` children that
die with this process (PR_SET_PDEATHSIG), are signalled by pid, and are always killed at
the end. Waits are bounded: a deadline only catches hangs, it measures nothing. The
detached, long-lived cluster of `zkctl up` is cluster/local.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from broker.config import format_properties
from broker.state_change_log import FILE_NAME as STATE_CHANGE_LOG
from broker.state_change_log import LogReader
from cluster import processes
from cluster.local import free_ports
from zkdata import paths
from zkdata.client import ZkClient
from zkdata.znodes import (
    LeaderAndIsr,
    TopicAssignment,
    decode_controller,
    decode_controller_epoch,
    decode_partition_state,
    decode_topic,
    encode_topic,
    encode_topic_config,
    new_topic_id,
)

T = TypeVar("T")

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def wait_for(check: Callable[[], T | None], timeout: float, what: str, interval: float = 0.05) -> T:
    """Poll `check` until it returns something truthy; fail naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})"
            )
        time.sleep(interval)


@dataclass
class _ParsedLines:
    """What state_changes parsed of the state-change logs of a directory (the current
    file and those rolled from it): the rows, and the reader that knows where it is."""

    reader: LogReader
    rows: list[dict[str, Any]] = field(default_factory=list)


class BrokerExited(RuntimeError):
    """The broker's process ended while something waited for it to be up."""


@dataclass
class SupervisedBroker:
    broker_id: int
    root: Path
    zk_connect: str
    overrides: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    # Restart on the port of the first start (as a deployed broker does), rather than on
    # whatever port is free: clients that knew only the old addresses can find it again.
    keep_port: bool = False
    fixed_port: int | None = None
    # state_changes' parsed lines, by event kind (None: every kind).
    _state_change_cache: dict[str | None, _ParsedLines] = field(
        default_factory=dict, init=False, repr=False
    )

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def first_log_dir(self) -> Path:
        """Where the broker keeps its status file and state-change log: the first of its
        log.dirs (``data_dir`` unless overridden)."""
        return self.log_dirs[0]

    @property
    def log_dirs(self) -> list[Path]:
        """Every one of its log.dirs (``data_dir`` unless overridden)."""
        configured = self.overrides.get("log.dirs")
        if not configured:
            return [self.data_dir]
        return [Path(d.strip()) for d in configured.split(",")]

    @property
    def props(self) -> Path:
        return self.root / "server.properties"

    def write_properties(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if self.keep_port and self.fixed_port is None:
            self.fixed_port = free_ports(1)[0]
        props = {
            "broker.id": str(self.broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.fixed_port or 0}",
            "zookeeper.connect": self.zk_connect,
            "log.dirs": str(self.data_dir),
            **self.overrides,
        }
        self.props.write_text(format_properties(props))

    def start(self) -> None:
        if self.alive():
            raise RuntimeError(f"broker {self.broker_id} is already running")
        self.write_properties()
        status = self.first_log_dir / "broker-status.json"
        if status.exists():
            status.unlink()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")])
        )
        with open(self.root / f"broker-{self.starts}.out", "wb") as out:
            self.proc = processes.spawn(
                [sys.executable, "-m", "broker", str(self.props)],
                out=out,
                cwd=self.root,
                env=env,
                marker=str(self.props),
                detached=False,
            )
        self.starts += 1

    def _popen(self) -> subprocess.Popen[bytes]:
        if self.proc is None:
            raise RuntimeError(f"broker {self.broker_id} was never started")
        return self.proc

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise RuntimeError(f"broker {self.broker_id} was never started")
        return self.proc.pid

    def signal(self, sig: signal.Signals) -> None:
        if self.proc is None:
            raise RuntimeError(f"broker {self.broker_id} was never started")
        code = self.proc.poll()
        if code is not None:
            how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
            raise RuntimeError(
                f"broker {self.broker_id} is not running (pid {self.proc.pid}: {how}; its"
                f" output: {self.root / f'broker-{self.starts - 1}.out'})"
            )
        os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        """SIGKILL, and reap it; nothing if it is gone already. It may die between a look
        and the signal (the death signal of the thread that started it, at the end of a
        fault schedule): Popen.kill signals only a process not yet reaped, whose pid is
        still ours."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(30)

    def replace_disks(self) -> None:
        """Its log directories emptied, as new disks would be: nothing of its logs,
        checkpoints or meta.properties is left; its state-change log is kept (the history
        checks read it). Only while it is not running."""
        if self.alive():
            raise RuntimeError(f"broker {self.broker_id} is running")
        for directory in self.log_dirs:
            if not directory.exists():
                continue
            for entry in directory.iterdir():
                if entry.name.startswith(STATE_CHANGE_LOG):  # and the rolled ones
                    continue
                if entry.is_dir():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()

    def terminate(self) -> None:
        """SIGTERM: a controlled shutdown, then exit."""
        self.signal(signal.SIGTERM)

    def wait_exit(self, timeout: float = 60) -> int:
        return self._popen().wait(timeout)

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM (controlled shutdown) and wait for the exit code."""
        self.terminate()
        return self.wait_exit(timeout)

    def pause(self) -> None:
        """SIGSTOP, returning once the process is stopped (a zombie in the making)."""
        self.signal(signal.SIGSTOP)
        processes.wait_stopped(self.pid)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    def status(self) -> dict[str, Any] | None:
        path = self.first_log_dir / "broker-status.json"
        try:
            return dict(json.loads(path.read_text()))
        except (OSError, ValueError):
            return None

    def port(self) -> int:
        """Its port, from its status file, waiting for a starting broker to write it;
        BrokerExited if the process ends without having written it (a start that gave up
        on ZooKeeper, say)."""

        def written() -> dict[str, Any] | None:
            status = self.status()
            if status is None and not self.alive():
                raise BrokerExited(
                    f"broker {self.broker_id} exited before writing its status file (its"
                    f" output: {self.root / f'broker-{self.starts - 1}.out'})"
                )
            return status

        st = wait_for(written, 30, f"broker {self.broker_id}'s status file")
        return int(st["port"])

    def state_changes(self, event: str | None = None) -> list[dict[str, Any]]:
        """The broker's state-change log lines (of one event kind), parsed.

        Callers poll this every 50 ms while a failover writes 100,000s of lines: parsing
        the whole file at each poll kept a core busy in this process, competing with the
        brokers being measured. So each event kind's lines are parsed once, as the file
        grows: a poll reads only what was appended since the last, and parses only the
        lines that can be of that kind (the log is compact JSON, its own quotes inside
        strings escaped, so such a line contains ``"event":"<kind>"``).
        """
        directory = self.first_log_dir
        cached = self._state_change_cache.get(event)
        if cached is None or cached.reader.directory != directory:
            cached = self._state_change_cache[event] = _ParsedLines(LogReader(directory))
        lines = cached.reader.read_new()  # the rolled files too, in the order written
        if cached.reader.restarted:  # a file read before was removed or replaced
            cached.rows.clear()
        marker = None if event is None else f'"event":{json.dumps(event)}'.encode()
        for line in lines:
            if not line.strip() or (marker is not None and marker not in line):
                continue
            try:
                row = json.loads(line)
            except ValueError:
                continue  # a torn piece a kill or a full disk left (readers skip them)
            if event is None or row["event"] == event:
                cached.rows.append(row)
        return list(cached.rows)

    def output(self) -> str:
        return "\n".join(
            (self.root / f"broker-{i}.out").read_text(errors="replace") for i in range(self.starts)
        )


class SupervisedCluster:
    def __init__(
        self,
        zk_connect: str,
        root: Path,
        brokers: Iterable[int],
        overrides: dict[str, str],
        *,
        keep_ports: bool = False,
    ) -> None:
        self.zk_connect = zk_connect
        root = Path(root).resolve()  # brokers run in their own directories
        self.root = root
        self.brokers = {
            b: SupervisedBroker(
                b, root / f"broker-{b}", zk_connect, dict(overrides), keep_port=keep_ports
            )
            for b in brokers
        }
        self.session_timeout_s = int(overrides.get("zookeeper.session.timeout.ms", "18000")) / 1000
        self.zk = ZkClient(zk_connect, session_timeout_ms=10_000)
        self.zk.start()

    def __repr__(self) -> str:
        return f"SupervisedCluster({str(self.root)!r}, brokers={sorted(self.brokers)})"

    def start(self, *, wait: bool = True) -> None:
        for b in self.brokers.values():
            b.start()
        if wait:
            self.wait_registered(self.brokers)
            self.wait_controller()

    def close(self) -> None:
        """Kill every broker and close the ZooKeeper client: each of them, whatever
        stopping one raises (the first error is raised once all were tried)."""
        errors: list[BaseException] = []
        for b in self.brokers.values():
            try:
                if b.alive():
                    try:
                        os.kill(b.pid, signal.SIGCONT)  # a paused process must be able to die
                    except ProcessLookupError:
                        pass
                b.kill()
            except Exception as e:
                errors.append(e)
        try:
            self.zk.close()
        except Exception as e:
            errors.append(e)
        if errors:
            raise errors[0]

    def __getitem__(self, broker_id: int) -> SupervisedBroker:
        return self.brokers[broker_id]

    # --- ZooKeeper views ----------------------------------------------------------------

    def registered(self) -> set[int]:
        return {int(c) for c in (self.zk.get_children(paths.BROKER_IDS) or [])}

    def broker_epoch(self, broker_id: int) -> int | None:
        stat = self.zk.exists(paths.broker(broker_id))
        return int(stat.czxid) if stat is not None else None

    def controller(self) -> tuple[int, int] | None:
        """(controller id, controller epoch), or None while there is no controller."""
        # One multiRead: the id and the epoch of the same moment, not of two elections.
        got, epoch = self.zk.get_many([paths.CONTROLLER, paths.CONTROLLER_EPOCH])
        if got is None or epoch is None:
            return None
        return decode_controller(got[0]), decode_controller_epoch(epoch[0])

    def partition_state(self, topic: str, partition: int) -> tuple[LeaderAndIsr, int]:
        path = paths.partition_state(topic, partition)
        got = self.zk.get(path)
        if got is None:
            raise LookupError(f"{path} is missing")
        state = decode_partition_state(path, got[0], got[1].version)
        return state.leader_and_isr, state.controller_epoch

    def partition_states(self, topic: str) -> dict[int, LeaderAndIsr]:
        got = self.zk.get(paths.topic(topic))
        if got is None:
            raise LookupError(f"topic {topic} does not exist")
        assignment = decode_topic(topic, got[0])
        return {p: self.partition_state(topic, p)[0] for p in assignment.partitions}

    def assignment(self, topic: str) -> TopicAssignment | None:
        got = self.zk.get(paths.topic(topic))
        return decode_topic(topic, got[0]) if got is not None else None

    # --- waiting ------------------------------------------------------------------------

    def wait_registered(self, broker_ids: Iterable[int], timeout: float = 60) -> None:
        wanted = set(broker_ids)

        def check() -> bool:
            for b in wanted:
                broker = self.brokers[b]
                if broker.proc is not None and not broker.alive():
                    tail = "\n".join(broker.output().splitlines()[-8:])
                    raise RuntimeError(f"broker {b} exited during start-up:\n{tail}")
            return wanted <= self.registered()

        wait_for(check, timeout, f"brokers {sorted(wanted)} registered")

    def wait_controller(
        self, *, not_id: int | None = None, min_epoch: int = 0, timeout: float = 60
    ) -> tuple[int, int]:
        def check() -> tuple[int, int] | None:
            c = self.controller()
            if c is None or c[0] == not_id or c[1] < min_epoch:
                return None
            # The controller has finished its failover once its broker says so: its status
            # file's "active" (controller metrics) comes after its controller_failover line.
            status = self.brokers[c[0]].status() if c[0] in self.brokers else None
            ctl = (status or {}).get("controller", {})
            return c if ctl.get("active") and ctl.get("controller_epoch") == c[1] else None

        return wait_for(check, timeout, "an active controller")

    def wait_partitions(
        self,
        topic: str,
        pred: Callable[[dict[int, LeaderAndIsr]], bool],
        what: str,
        timeout: float = 60,
    ) -> dict[int, LeaderAndIsr]:
        def check() -> dict[int, LeaderAndIsr] | None:
            try:
                states = self.partition_states(topic)
            except LookupError:
                return None
            return states if pred(states) else None

        return wait_for(check, timeout, what)

    # --- administration (through znodes, as Kafka's ZooKeeper-based tools) -------------

    def create_topic(
        self,
        topic: str,
        assignment: dict[int, tuple[int, ...]],
        config: dict[str, str] | None = None,
    ) -> None:
        self.zk.create(
            paths.topic_config(topic), encode_topic_config(config or {}), make_parents=True
        )
        self.zk.create(
            paths.topic(topic), encode_topic(TopicAssignment(topic, assignment, new_topic_id()))
        )

    def wait_topic_online(self, topic: str, timeout: float = 60) -> dict[int, LeaderAndIsr]:
        def check() -> dict[int, LeaderAndIsr] | None:
            a = self.assignment(topic)
            if a is None:
                return None
            states = {}
            for p in a.partitions:
                got = self.zk.get(paths.partition_state(topic, p))
                if got is None:
                    return None
                states[p] = decode_partition_state("", got[0], got[1].version).leader_and_isr
            return states if all(s.leader >= 0 for s in states.values()) else None

        return wait_for(check, timeout, f"topic {topic} online")

    def wait_topic_applied(self, topic: str, timeout: float = 60) -> dict[int, LeaderAndIsr]:
        """``wait_topic_online``, and then until every running replica has applied its
        partition's state at that leader epoch (its state-change log says so). A controller
        killed before its LeaderAndIsr of a new topic reached the replicas leaves them
        with no log of it, and a replica with no log told to lead while its ISR names
        others refuses (item 34): a test that fails over right after creating a topic
        must wait for this to be sure of the elections it expects."""
        states = self.wait_topic_online(topic, timeout)
        replicas = self.assignment(topic)
        assert replicas is not None

        def applied() -> bool:
            for b, broker in self.brokers.items():
                if not broker.alive():
                    continue
                have = {
                    (r["partition"], r["leader_epoch"])
                    for r in broker.state_changes("leader_and_isr")
                    if r["topic"] == topic and r["result"] == "applied"
                }
                for p, st in states.items():
                    if b in replicas.partitions[p] and (p, st.leader_epoch) not in have:
                        return False
            return True

        wait_for(lambda: applied() or None, timeout, f"topic {topic} applied by its replicas")
        return states
