"""A local cluster in the background: ZooKeeper plus N broker processes (``zkctl up``).

Everything lives in one directory (``.zkctl`` by default)::

    <dir>/cluster.json              the cluster's state (schema below), replaced atomically
    <dir>/.lock                     held by up/down/broker commands while they change things
    <dir>/zookeeper/server-1/       a local ZooKeeper's config, data and log (if we started one)
    <dir>/broker-<id>/server.properties
    <dir>/broker-<id>/broker.out    the broker's stdout and stderr
    <dir>/broker-<id>/data/         log.dirs: the broker's data, state-change.log and
                                    broker-status.json

Processes outlive the CLI (new session, no controlling terminal) and are only ever
signalled by pid, after checking that the pid still runs ``-m broker`` with that broker's
properties file, so a reused pid is never hit. Nothing is ever killed by name.

cluster.json, version 1 (all paths absolute; times are epoch milliseconds)::

    {"version": 1, "state": "starting" | "running" | "stopped",
     "dir": str (where it was written: found in another directory, moved or copied there,
            it is not acted on),
     "connect_string": str (with the chroot, if any: what brokers and admin use),
     "chroot": str | null (created by up in a ZooKeeper given by --zookeeper or
               ZKCTL_ZOOKEEPER; deleted by down),
     "zookeeper": {...} (cluster.zookeeper handle, ZooKeeper.to_dict()),
     "session_timeout_ms": int, "overrides": {key: value}, "python": str,
     "created_at": int, "stopped_at": int | null,
     "brokers": [{"id": int, "pid": int | null, "host": str, "port": int, "dir": str,
                  "data_dir": str, "log_dir": str, "properties": str, "out_file": str,
                  "status_file": str, "state_change_log": str, "started_at": int | null}]}
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.config import ConfigError, format_properties, load_broker_config, parse_overrides
from cluster import ports, processes
from cluster import zookeeper as zkp
from zkdata import paths, znodes
from zkdata.client import ZkClient
from zkdata.connect_string import connect_string_problem

CLUSTER_FILE = "cluster.json"
LOCK_FILE = ".lock"
SCHEMA_VERSION = 1
DEFAULT_DIR = Path(".zkctl")
# Kafka's default before 2.5; short, so that a killed broker's failover is quick to watch.
DEFAULT_SESSION_TIMEOUT_MS = 6000
DEFAULT_START_TIMEOUT_S = 60.0
DEFAULT_STOP_TIMEOUT_S = 30.0
MAX_BROKERS = 100
BROKER_HOST = "127.0.0.1"
STATUS_FILE = "broker-status.json"
STATE_CHANGE_LOG = "state-change.log"
BROKER_OUT = "broker.out"
TAIL_LINES = 20
# A broker whose port was taken between choosing and binding it is retried on a new port.
PORT_ATTEMPTS = 3

# Keys up sets per broker; an override of them would give every broker the same value.
MANAGED_KEYS: Mapping[str, str] = {
    "broker.id": "broker ids are 1..N",
    "listeners": "each broker gets a free port on 127.0.0.1",
    "advertised.listeners": "each broker gets a free port on 127.0.0.1",
    "log.dirs": "each broker's log dir is <dir>/broker-<id>/data",
    "log.dir": "each broker's log dir is <dir>/broker-<id>/data",
    "zookeeper.connect": "use --zookeeper",
    "zookeeper.session.timeout.ms": "use --session-timeout-ms",
}

Progress = Callable[[str], None]


class LocalClusterError(RuntimeError):
    """The local cluster cannot do what was asked; the message says what to do."""


class ClusterArgumentError(LocalClusterError):
    """The arguments are wrong (bad override, broker count); nothing was started."""


class MovedClusterError(LocalClusterError):
    """cluster.json was written in another directory (this one was moved or copied), so
    every path and pid in it is that directory's cluster's; ``recorded`` is that cluster."""

    def __init__(self, message: str, recorded: LocalCluster) -> None:
        super().__init__(message)
        self.recorded = recorded


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP while ``up`` runs, raised as a Ctrl-C is: what it started is
    stopped again on the way out."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_terminated(signum: int, _frame: object) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Holds a Ctrl-C, SIGTERM and SIGHUP for the block, a broker's spawn and the record
    of its pid: raised between the two, the cleanup (or a later `zkctl down`) would not
    know the broker, left running. The first one held then goes to the handler of before
    (KeyboardInterrupt, Terminated)."""
    held: list[int] = []
    holds = dict.fromkeys(
        (signal.SIGINT, signal.SIGTERM, signal.SIGHUP),
        lambda signum, _frame: held.append(signum),
    )
    with _signal_handlers(holds):
        yield
    if held:
        signal.raise_signal(held[0])


@contextlib.contextmanager
def _signal_handlers(handlers: Mapping[signal.Signals, Any]) -> Iterator[None]:
    """``handlers`` for the block, the old ones after. Only the main thread can set them
    (elsewhere nothing changes), and a signal ignored (SIGHUP under nohup) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old: dict[signal.Signals, Any] = {}
    try:
        for sig, handler in handlers.items():
            if signal.getsignal(sig) is not signal.SIG_IGN:
                old[sig] = signal.signal(sig, handler)
        yield
    finally:
        for sig, handler in old.items():
            # None: a handler not set from Python, which cannot be put back; the default is.
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)


def _say(progress: Progress | None, message: str) -> None:
    if progress is not None:
        # A line that cannot be written (its terminal hung up: EIO; a closed pipe) is
        # dropped: it must not cut short the work it reports on, a cleanup above all.
        with contextlib.suppress(OSError):
            progress(message)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# --- state --------------------------------------------------------------------------------


@dataclass
class BrokerProcess:
    """One broker of the local cluster: where it lives, and the pid it was last started as."""

    id: int
    host: str
    port: int
    dir: Path
    pid: int | None = None
    started_at: int | None = None

    @property
    def data_dir(self) -> Path:
        return self.dir / "data"

    @property
    def log_dir(self) -> Path:
        """The first (only) log dir: where the broker writes its status and state-change log."""
        return self.data_dir

    @property
    def properties(self) -> Path:
        return self.dir / "server.properties"

    @property
    def out_file(self) -> Path:
        return self.dir / BROKER_OUT

    @property
    def status_file(self) -> Path:
        return self.log_dir / STATUS_FILE

    @property
    def state_change_log(self) -> Path:
        return self.log_dir / STATE_CHANGE_LOG

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def argv(self, python: str) -> list[str]:
        return [python, "-m", "broker", str(self.properties)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "pid": self.pid,
            "host": self.host,
            "port": self.port,
            "dir": str(self.dir),
            "data_dir": str(self.data_dir),
            "log_dir": str(self.log_dir),
            "properties": str(self.properties),
            "out_file": str(self.out_file),
            "status_file": str(self.status_file),
            "state_change_log": str(self.state_change_log),
            "started_at": self.started_at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BrokerProcess:
        pid = data.get("pid")
        started = data.get("started_at")
        return cls(
            id=int(data["id"]),
            host=str(data["host"]),
            port=int(data["port"]),
            dir=Path(data["dir"]),
            pid=int(pid) if pid is not None else None,
            started_at=int(started) if started is not None else None,
        )


@dataclass
class LocalCluster:
    dir: Path
    connect_string: str
    zookeeper: dict[str, Any]
    brokers: list[BrokerProcess]
    state: str = "starting"
    chroot: str | None = None
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    overrides: dict[str, str] = field(default_factory=dict)
    python: str = sys.executable
    created_at: int = field(default_factory=now_ms)
    stopped_at: int | None = None

    @property
    def file(self) -> Path:
        return self.dir / CLUSTER_FILE

    def broker(self, broker_id: int) -> BrokerProcess:
        for b in self.brokers:
            if b.id == broker_id:
                return b
        ids = ", ".join(str(b.id) for b in self.brokers)
        raise LocalClusterError(f"no broker {broker_id} in the cluster in {self.dir} (ids: {ids})")

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": SCHEMA_VERSION,
            "state": self.state,
            "dir": str(self.dir),
            "connect_string": self.connect_string,
            "chroot": self.chroot,
            "zookeeper": self.zookeeper,
            "session_timeout_ms": self.session_timeout_ms,
            "overrides": self.overrides,
            "python": self.python,
            "created_at": self.created_at,
            "stopped_at": self.stopped_at,
            "brokers": [b.to_dict() for b in self.brokers],
        }

    @classmethod
    def from_dict(cls, data: object) -> LocalCluster:
        """Raises ValueError, KeyError, TypeError or OverflowError (an infinite number for
        an int) when ``data`` is not a cluster."""
        if not isinstance(data, Mapping):
            raise TypeError(f"expected a JSON object, not {type(data).__name__}")
        version = data.get("version")
        if version != SCHEMA_VERSION:
            raise ValueError(
                f"unsupported version {version!r} (this zkctl writes {SCHEMA_VERSION})"
            )
        brokers = data["brokers"]
        if not isinstance(brokers, list) or not all(isinstance(b, Mapping) for b in brokers):
            raise TypeError("'brokers' must be a list of objects")
        zkp.ZooKeeper.check_dict(data["zookeeper"])
        stopped = data.get("stopped_at")
        return cls(
            dir=Path(data["dir"]),
            connect_string=str(data["connect_string"]),
            zookeeper=dict(data["zookeeper"]),
            brokers=[BrokerProcess.from_dict(b) for b in brokers],
            state=str(data["state"]),
            chroot=data.get("chroot"),
            session_timeout_ms=int(data["session_timeout_ms"]),
            overrides={str(k): str(v) for k, v in dict(data.get("overrides") or {}).items()},
            python=str(data.get("python") or sys.executable),
            created_at=int(data["created_at"]),
            stopped_at=int(stopped) if stopped is not None else None,
        )


def zkctl_command(action: str, directory: Path) -> str:
    """``zkctl <action>`` for the cluster in ``directory``, as advice to type: with --dir
    unless it is the default one, as zkctl's admin commands say it (a bare `zkctl up`
    would act on .zkctl, not on the directory the command was given)."""
    if directory.resolve() == DEFAULT_DIR.resolve():
        return f"zkctl {action}"
    return f"zkctl {action} --dir {directory}"


def load(directory: Path | str) -> LocalCluster | None:
    """The cluster described by ``<dir>/cluster.json``; None when there is none."""
    path = Path(directory) / CLUSTER_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise LocalClusterError(f"cannot read {path}: {e}") from e
    try:
        # A UnicodeDecodeError is a ValueError: not UTF-8 is not a valid cluster file.
        cluster = LocalCluster.from_dict(json.loads(raw.decode("utf-8")))
    # RecursionError: nested too deep. OverflowError: an infinite number (1e400, Infinity)
    # read as an int (NaN's is a ValueError).
    except (ValueError, KeyError, TypeError, RecursionError, OverflowError) as e:
        raise LocalClusterError(
            f"{path} is not a valid cluster file ({type(e).__name__}: {e}); if no cluster runs"
            " there, remove it"
        ) from None
    here = Path(directory).resolve()
    if cluster.dir.resolve() != here:
        # Its paths are absolute: acted on, it would stop, start or write the cluster of the
        # directory it was written in (after a move, recreating that directory).
        back = "" if cluster.dir.exists() else " (move the directory back first)"
        raise MovedClusterError(
            f"{here / CLUSTER_FILE} was written for the cluster in {cluster.dir}; was the"
            f" directory moved or copied? run the command in {cluster.dir}{back}",
            cluster,
        )
    return cluster


def save(cluster: LocalCluster) -> None:
    """Replace cluster.json atomically: a reader sees the old file or the new, never half."""
    cluster.dir.mkdir(parents=True, exist_ok=True)
    tmp = cluster.dir / f".{CLUSTER_FILE}.{os.getpid()}.tmp"
    with tmp.open("w", encoding="utf-8") as f:
        json.dump(cluster.to_dict(), f, indent=2)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, cluster.file)


def running_connect_string(directory: Path | str) -> str | None:
    """The connect string of the cluster in ``directory`` unless it is absent or stopped."""
    cluster = load(directory)
    if cluster is None or cluster.state == "stopped":
        return None
    return cluster.connect_string


@contextlib.contextmanager
def _locked(directory: Path, *, create: bool = False) -> Iterator[None]:
    """Exclusive use of the cluster dir, so two commands never start or stop it at once.

    Only ``up`` creates the directory; the others need a cluster to be there, or a lock
    file: the first ``up`` of a directory holds the lock before its cluster.json is
    written (once ZooKeeper runs), and what it starts is not "no cluster".
    """
    if create:
        directory.mkdir(parents=True, exist_ok=True)
    elif not (directory / CLUSTER_FILE).exists() and not (directory / LOCK_FILE).exists():
        raise LocalClusterError(
            f"no cluster in {directory}: start one with `{zkctl_command('up', directory)}`"
        )
    with (directory / LOCK_FILE).open("a") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LocalClusterError(
                f"another zkctl command (up, down or broker) is working on {directory};"
                " try again when it has finished"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


# --- processes ----------------------------------------------------------------------------

# Brokers this Python process started, so their exit status can be collected (no zombies)
# and read. Pids not in here are only ever observed through /proc.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def proc_cmdline(pid: int) -> list[str] | None:
    """argv of ``pid``; None when there is no such process."""
    return processes.cmdline(pid)


def proc_state(pid: int) -> str | None:
    """The state letter of ``pid`` (R, S, T, Z, ...); None if absent or reaped."""
    child = _CHILDREN.get(pid)
    if child is not None and child.poll() is not None:
        return None  # reaped: our child has exited
    return processes.state(pid)


def is_broker_process(pid: int, properties: Path | str) -> bool:
    """Whether ``pid`` is a live ``python -m broker <properties>`` for this properties file."""
    state = proc_state(pid)
    if state is None or state in ("Z", "X"):
        return False
    argv = proc_cmdline(pid)
    if not argv:
        return False
    runs_broker = any(argv[i] == "-m" and argv[i + 1] == "broker" for i in range(len(argv) - 1))
    return runs_broker and str(properties) in argv


def process_status(broker: BrokerProcess) -> str:
    """``alive``, ``paused`` (SIGSTOPped: state T) or ``dead`` (no process, or not ours)."""
    if broker.pid is None or not is_broker_process(broker.pid, broker.properties):
        return "dead"
    return "paused" if proc_state(broker.pid) in ("T", "t") else "alive"


def signal_broker(broker: BrokerProcess, sig: signal.Signals) -> bool:
    """Send ``sig`` to the broker's pid if it still is that broker; False if not running."""
    if broker.pid is None or not is_broker_process(broker.pid, broker.properties):
        return False
    try:
        os.kill(broker.pid, sig)
    except ProcessLookupError:
        return False
    if sig == signal.SIGSTOP:
        processes.wait_stopped(broker.pid)  # "paused" means paused when we return
    return True


def _gone(broker: BrokerProcess) -> bool:
    return broker.pid is None or not is_broker_process(broker.pid, broker.properties)


def wait_gone(brokers: Sequence[BrokerProcess], timeout: float) -> list[BrokerProcess]:
    """Wait until every broker's process is gone; return those still there at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        left = [b for b in brokers if not _gone(b)]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)


def exit_code(broker: BrokerProcess, wait_s: float = 0.0) -> int | None:
    """The exit code, when this process started the broker and it has exited; waiting up
    to ``wait_s`` for a process seen exiting to finish (its /proc entry looks gone, its
    command line empty, a moment before it can be reaped)."""
    child = _CHILDREN.get(broker.pid) if broker.pid is not None else None
    if child is None:
        return None
    try:
        return child.wait(wait_s) if wait_s > 0 else child.poll()
    except subprocess.TimeoutExpired:
        return None


def stop_brokers(
    brokers: Sequence[BrokerProcess], timeout: float, progress: Progress | None = None
) -> dict[int, str]:
    """SIGTERM (a controlled shutdown), then SIGKILL whoever is left after ``timeout``.

    Returns broker id -> ``stopped``, ``killed`` or ``not running``. The brokers are
    signalled together and waited for in parallel.
    """
    outcome: dict[int, str] = {}
    signalled = []
    for b in brokers:
        if signal_broker(b, signal.SIGTERM):
            # A paused process acts on SIGTERM only once continued.
            signal_broker(b, signal.SIGCONT)
            signalled.append(b)
        else:
            outcome[b.id] = "not running"
    if signalled:
        ids = ", ".join(str(b.id) for b in signalled)
        _say(progress, f"stopping broker(s) {ids} (SIGTERM: controlled shutdown)")
    left = wait_gone(signalled, timeout)
    for b in signalled:
        if b not in left:
            outcome[b.id] = "stopped"
    for b in left:
        _say(progress, f"broker {b.id} (pid {b.pid}) still runs after {timeout:.0f} s: SIGKILL")
        signal_broker(b, signal.SIGKILL)
        outcome[b.id] = "killed"
    still = wait_gone(left, 10.0)
    if still:
        raise LocalClusterError(
            "could not stop broker(s) "
            + ", ".join(f"{b.id} (pid {b.pid})" for b in still)
            + " even with SIGKILL"
        )
    return outcome


def tail(path: Path, offset: int = 0, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of ``path`` written after byte ``offset``."""
    try:
        with path.open("rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def _project_root() -> Path:
    """The directory holding the ``broker`` package, which ``python -m broker`` must find."""
    spec = importlib.util.find_spec("broker")
    if spec is None or not spec.submodule_search_locations:
        raise LocalClusterError("the broker package is not importable")
    if importlib.util.find_spec("broker.__main__") is None:
        raise LocalClusterError(
            "the broker package has no __main__ module, so `python -m broker` cannot run"
        )
    return Path(next(iter(spec.submodule_search_locations))).resolve().parent


def _launch(broker: BrokerProcess, python: str) -> int:
    """Start the broker detached; return the byte offset in broker.out where its output starts."""
    broker.dir.mkdir(parents=True, exist_ok=True)
    root = str(_project_root())
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    # Unbuffered, so broker.out shows everything up to a crash or a SIGKILL.
    env["PYTHONUNBUFFERED"] = "1"
    with broker.out_file.open("ab") as out:
        offset = out.tell()
        out.write(f"--- zkctl: starting broker {broker.id} at {time.ctime()} ---\n".encode())
        out.flush()
        proc = processes.spawn(
            broker.argv(python),
            out=out,
            cwd=broker.dir,
            env=env,
            marker=str(broker.properties),
            detached=True,
        )
    _CHILDREN[proc.pid] = proc
    broker.pid = proc.pid
    broker.started_at = now_ms()
    return offset


def free_ports(count: int, host: str = BROKER_HOST) -> list[int]:
    """``count`` distinct free ports, none of which the kernel hands out by itself (see
    cluster/ports.py): a broker keeps its port across restarts."""
    return ports.free_ports(count, host)


# --- properties -----------------------------------------------------------------------------


def check_overrides(overrides: Iterable[str]) -> dict[str, str]:
    """Parse ``--override key=value`` and refuse the keys up sets per broker."""
    try:
        parsed = parse_overrides(overrides)
    except ConfigError as e:
        raise ClusterArgumentError("; ".join(p.message for p in e.problems)) from None
    managed = [f"{k} ({MANAGED_KEYS[k]})" for k in parsed if k in MANAGED_KEYS]
    if managed:
        raise ClusterArgumentError("--override cannot set " + "; ".join(managed))
    return parsed


def broker_properties(
    broker: BrokerProcess, connect: str, session_timeout_ms: int, overrides: Mapping[str, str]
) -> dict[str, str]:
    props = {
        "broker.id": str(broker.id),
        "listeners": f"PLAINTEXT://{broker.host}:{broker.port}",
        "zookeeper.connect": connect,
        "zookeeper.session.timeout.ms": str(session_timeout_ms),
        "log.dirs": str(broker.data_dir),
    }
    props.update(overrides)
    return props


def _properties_text(props: Mapping[str, str]) -> str:
    return "# Written by zkctl up; zkctl broker start reuses it.\n" + format_properties(props)


def validate_properties(props: Mapping[str, str]) -> None:
    try:
        load_broker_config(text=format_properties(props))
    except ConfigError as e:
        raise ClusterArgumentError(
            "invalid broker config: " + "; ".join(p.message for p in e.problems)
        ) from None


def write_properties(
    broker: BrokerProcess, connect: str, session_timeout_ms: int, overrides: Mapping[str, str]
) -> None:
    props = broker_properties(broker, connect, session_timeout_ms, overrides)
    validate_properties(props)
    broker.dir.mkdir(parents=True, exist_ok=True)
    broker.properties.write_text(_properties_text(props), encoding="utf-8")


# --- ZooKeeper reads ------------------------------------------------------------------------


@dataclass
class ZkView:
    """What ZooKeeper says about the cluster: registered brokers and the controller."""

    registered: dict[int, int]  # broker id -> czxid of its registration (the broker epoch)
    controller_id: int | None
    controller_epoch: int | None
    problems: list[str] = field(default_factory=list)


def _zk_client(connect: str, timeout: float, *, bound_requests: bool = False) -> ZkClient:
    """A session whose connection waits at most ``timeout``, and with ``bound_requests``
    each request too (else the session timeout, 10 s: the waits that poll in a loop
    must not give up on a ZooKeeper slowed by a busy machine)."""
    timeout_ms = max(int(timeout * 1000), 100)
    zk = ZkClient(
        connect,
        session_timeout_ms=10_000,
        connection_timeout_ms=timeout_ms,
        request_timeout_ms=min(timeout_ms, 10_000) if bound_requests else None,
    )
    zk.start()
    return zk


def read_zk_view(zk: ZkClient) -> ZkView:
    problems: list[str] = []
    ids = sorted(
        i
        for i in (paths.parse_broker_id(c) for c in zk.get_children(paths.BROKER_IDS) or [])
        if i is not None
    )
    registered: dict[int, int] = {}
    for broker_id, got in zip(ids, zk.get_many([paths.broker(i) for i in ids]), strict=True):
        if got is not None:
            registered[broker_id] = got[1].czxid
    controller, epoch = zk.get_many([paths.CONTROLLER, paths.CONTROLLER_EPOCH])
    controller_id = controller_epoch = None
    if controller is not None:
        try:
            controller_id = znodes.decode_controller(controller[0])
        except znodes.MalformedZnode as e:
            problems.append(str(e))
    if epoch is not None:
        try:
            controller_epoch = znodes.decode_controller_epoch(epoch[0])
        except znodes.MalformedZnode as e:
            problems.append(str(e))
    return ZkView(registered, controller_id, controller_epoch, problems)


def _try_zk_view(connect: str, timeout: float) -> tuple[ZkView | None, str | None]:
    """The view, or None and why ZooKeeper could not be read."""
    try:
        zk = _zk_client(connect, timeout, bound_requests=True)
    except Exception as e:
        return None, f"cannot connect to ZooKeeper at {connect} ({type(e).__name__}: {e})"
    try:
        return read_zk_view(zk), None
    except Exception as e:
        return None, f"cannot read ZooKeeper at {connect} ({type(e).__name__}: {e})"
    finally:
        zk.close(timeout_s=timeout)  # a ZooKeeper that stopped answering: not 10 s more


# --- up ---------------------------------------------------------------------------------------


def _live_processes(cluster: LocalCluster) -> list[str]:
    """Descriptions of the cluster's processes that still run (brokers, local ZooKeeper)."""
    alive = [f"broker {b.id} (pid {b.pid})" for b in cluster.brokers if process_status(b) != "dead"]
    if cluster.zookeeper.get("kind") == "local":
        handle = zkp.ZooKeeper.from_dict(cluster.zookeeper)
        assert isinstance(handle, zkp.LocalZooKeeper)
        alive += [f"ZooKeeper (pid {s.pid})" for s in handle.servers if s.is_running()]
    return alive


def _inside(path: Path, directory: Path) -> bool:
    try:
        path.resolve().relative_to(directory.resolve())
    except ValueError:
        return False
    return True


def _data_dirs(cluster: LocalCluster) -> list[Path]:
    """The cluster's broker directories and its local ZooKeeper's."""
    dirs = [b.dir for b in cluster.brokers]
    if cluster.zookeeper.get("kind") == "local":
        dirs.append(Path(cluster.zookeeper["base_dir"]))
    return dirs


def _remove_old_data(dirs: Iterable[Path], directory: Path, progress: Progress | None) -> None:
    """Delete a stopped cluster's broker and ZooKeeper directories (only inside its dir)."""
    doomed = [d for d in dirs if d.exists() and _inside(d, directory)]
    if doomed:
        _say(progress, f"removing the data of the previous cluster in {directory}")
    for d in doomed:
        shutil.rmtree(d, ignore_errors=True)


def _copied_data(
    moved: MovedClusterError, directory: Path, progress: Progress | None
) -> list[Path]:
    """For up in a directory whose cluster.json was written in another (moved or copied
    here): the recorded cluster's data dirs as they are in ``directory``, to be removed.
    Its processes are not ours to stop; but when they still run and no cluster.json of
    their directory records them any more (it was moved), refuse: the data would go from
    under the running brokers, and nothing would name their pids for `zkctl down`."""
    recorded = moved.recorded
    alive = _live_processes(recorded)
    if alive:
        try:
            there = load(recorded.dir)
        except LocalClusterError:
            there = None
        if there is None or there.created_at != recorded.created_at:
            raise LocalClusterError(
                f"{directory / CLUSTER_FILE} was written for the cluster in {recorded.dir},"
                f" which still runs ({', '.join(alive)}) and is recorded nowhere else: was the"
                f" directory moved? move it back to {recorded.dir} and run"
                f" `{zkctl_command('down', recorded.dir)}` first"
            )
    _say(
        progress,
        f"{directory / CLUSTER_FILE} was written for the cluster in {recorded.dir} (a moved"
        f" or copied directory); starting a new cluster in {directory}, leaving that one alone",
    )
    copied = []
    for d in _data_dirs(recorded):
        with contextlib.suppress(ValueError):  # not under its dir: not copied here
            copied.append(directory / d.relative_to(recorded.dir))
    return copied


def _check_fresh(directory: Path, n_brokers: int) -> None:
    """Without a cluster.json, refuse to reuse directories a cluster would write into."""
    leftovers = [directory / f"broker-{i}" for i in range(1, n_brokers + 1)]
    leftovers.append(directory / "zookeeper")
    found = [str(p) for p in leftovers if p.exists()]
    if found:
        raise LocalClusterError(
            f"{', '.join(found)} exist(s) but {directory / CLUSTER_FILE} does not: remove them"
            " (or the whole directory), or choose another --dir"
        )


@dataclass(frozen=True)
class Started:
    cluster: LocalCluster
    controller_id: int | None
    controller_epoch: int | None


def up(
    directory: Path | str = DEFAULT_DIR,
    brokers: int = 3,
    *,
    zookeeper: str | None = None,
    overrides: Iterable[str] = (),
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
    timeout: float = DEFAULT_START_TIMEOUT_S,
    python: str | None = None,
    progress: Progress | None = None,
) -> Started:
    """Start ZooKeeper (unless one is given) and ``brokers`` brokers; wait until every broker
    is registered and a controller is elected. On failure, everything started is stopped
    again (the logs stay) and LocalClusterError says what went wrong."""
    if not 1 <= brokers <= MAX_BROKERS:
        raise ClusterArgumentError(f"--brokers must be between 1 and {MAX_BROKERS}, not {brokers}")
    if session_timeout_ms < 1000:
        raise ClusterArgumentError(
            f"--session-timeout-ms must be at least 1000, not {session_timeout_ms}"
        )
    parsed = check_overrides(overrides)
    if brokers < 3:
        # As Kafka's quickstart server.properties: the consumer groups' offsets topic
        # cannot have more replicas than the cluster has brokers.
        parsed.setdefault("offsets.topic.replication.factor", str(brokers))
    directory = Path(directory).resolve()
    if "," in str(directory):
        # log.dirs is a comma-separated list: each broker would get two log directories,
        # the first outside the cluster's directory, where zkctl never looks.
        raise ClusterArgumentError(
            f"--dir {directory}: the cluster's directory cannot contain a comma (the brokers'"
            " log.dirs, inside it, is a comma-separated list)"
        )
    given = (zookeeper or os.environ.get(zkp.ENV_CONNECT, "")).strip()
    problem = connect_string_problem(given) if given else None
    if problem is not None:
        # Before anything starts or is cleared, as every other command refuses it: the
        # chroot's creation failed on it later, exit 1 "is it running?", or waited out its
        # connection timeout (a host that is no name).
        raise ClusterArgumentError(f"invalid ZooKeeper connect string {given!r}: {problem}")
    python = python or sys.executable
    # Check the config before anything starts; the real connect string comes later.
    for i in range(1, brokers + 1):
        probe = BrokerProcess(i, BROKER_HOST, 9092, directory / f"broker-{i}")
        validate_properties(broker_properties(probe, "127.0.0.1:2181", session_timeout_ms, parsed))
    _project_root()

    # One deadline for ZooKeeper's start and the brokers': --timeout bounds the whole up.
    deadline = time.monotonic() + timeout
    # A `timeout`, a CI job cancelled or a terminal closed would otherwise end up at once,
    # leaving what it started running in the state "starting", nothing said.
    terminate = {signal.SIGTERM: _raise_terminated, signal.SIGHUP: _raise_terminated}
    with _signal_handlers(terminate), _locked(directory, create=True):
        try:
            previous = load(directory)
        except MovedClusterError as e:
            # Another directory's cluster: nothing of it is stopped or torn down from here;
            # only the copy of its data in this directory goes.
            _remove_old_data(_copied_data(e, directory, progress), directory, progress)
        else:
            if previous is not None:
                # Whatever its state: a failed up whose cleanup could not stop a broker
                # (one that survived SIGKILL) records its cluster stopped all the same.
                alive = _live_processes(previous)
                if alive:
                    raise LocalClusterError(
                        f"a cluster is already running in {directory} ({', '.join(alive)});"
                        f" run `{zkctl_command('down', directory)}` first"
                    )
                if previous.state != "stopped":
                    _say(progress, f"the previous cluster in {directory} has died; cleaning it up")
                    _teardown(previous, progress)
                _remove_old_data(_data_dirs(previous), directory, progress)
            else:
                _check_fresh(directory, brokers)

        cluster = LocalCluster(
            dir=directory,
            connect_string="",
            zookeeper={},
            brokers=[],
            session_timeout_ms=session_timeout_ms,
            overrides=parsed,
            python=python,
        )

        def record(handle: zkp.ZooKeeper) -> None:
            # Saved as soon as the ZooKeeper runs, before the wait for it to serve: whatever
            # stops this command then (a Ctrl-C, a kill), `zkctl down` and the next `zkctl up`
            # find the ZooKeeper and its directory in cluster.json.
            cluster.connect_string = handle.connect_string
            cluster.zookeeper = handle.to_dict()
            save(cluster)

        try:
            try:
                handle = zkp.provision(
                    zookeeper,
                    detached=True,
                    base_dir=directory / "zookeeper",
                    progress=progress,
                    timeout=max(deadline - time.monotonic(), 0.1),
                    on_start=record,
                )
            except zkp.ZooKeeperError as e:
                raise LocalClusterError(str(e)) from None
            if isinstance(handle, zkp.ContainerZooKeeper):
                # A container's start is not counted: its image's first pull is not bounded,
                # and provision waits for it to serve 120 s at least whatever the timeout
                # (ZooKeeper's JVM starting in a fresh container, often in a VM, is slower
                # than a local server's, and not the cluster's doing). The brokers get the
                # whole timeout after it, as before.
                deadline = time.monotonic() + timeout
            cluster.connect_string = handle.connect_string
            cluster.zookeeper = handle.to_dict()
            if isinstance(handle, zkp.ExternalZooKeeper):
                # A chroot of our own, so several clusters can share one ZooKeeper.
                name = f"zkctl-{uuid.uuid4().hex[:8]}"
                try:
                    # Within --timeout, which bounds the whole up: not the 10 s default.
                    cluster.connect_string = zkp.chroot_connect_string(
                        handle.connect_string,
                        name,
                        timeout=min(10.0, max(deadline - time.monotonic(), 0.1)),
                    )
                except Exception as e:
                    raise LocalClusterError(
                        f"cannot create the chroot /{name} in ZooKeeper {handle.connect_string}"
                        f" ({type(e).__name__}: {e}); is it running?"
                    ) from None
                cluster.chroot = zkp.split_chroot(cluster.connect_string)[1]
                _say(
                    progress, f"using chroot {cluster.chroot} in ZooKeeper {handle.connect_string}"
                )
            save(cluster)
            ports = free_ports(brokers)
            cluster.brokers = [
                BrokerProcess(i, BROKER_HOST, ports[i - 1], directory / f"broker-{i}")
                for i in range(1, brokers + 1)
            ]
            offsets: dict[int, int] = {}
            for b in cluster.brokers:
                write_properties(b, cluster.connect_string, session_timeout_ms, parsed)
                with _signals_held():
                    offsets[b.id] = _launch(b, python)
                    save(cluster)
            _say(progress, f"started {brokers} broker(s): pids {[b.pid for b in cluster.brokers]}")
            view = _wait_cluster_ready(cluster, offsets, deadline, timeout, progress)
            cluster.state = "running"
            save(cluster)
            return Started(cluster, view.controller_id, view.controller_epoch)
        except BaseException:
            if not cluster.zookeeper:
                raise  # no ZooKeeper was started (provision stops what it launched), no broker
            _say(progress, f"start-up failed; stopping what was started (logs stay in {directory})")
            # Not cut short by a second Ctrl-C (or SIGTERM): processes would be left running.
            ignored = dict.fromkeys((signal.SIGINT, signal.SIGTERM, signal.SIGHUP), signal.SIG_IGN)
            with _signal_handlers(ignored):
                with contextlib.suppress(Exception):
                    stop_brokers(cluster.brokers, 10.0)
                with contextlib.suppress(Exception):
                    _teardown(cluster, progress)
                with contextlib.suppress(Exception):
                    cluster.state = "stopped"
                    cluster.stopped_at = now_ms()
                    save(cluster)
            raise


def _exited_during_startup(
    cluster: LocalCluster, broker: BrokerProcess, offset: int, attempts: dict[int, int]
) -> int | None:
    """Handle a broker that exited while starting: relaunch it on a new port if its port was
    taken meanwhile (returns the new output offset), else raise with its last output lines."""
    out = tail(broker.out_file, offset)
    if "Address already in use" in out:
        attempts[broker.id] = attempts.get(broker.id, 1) + 1
        if attempts[broker.id] <= PORT_ATTEMPTS:
            broker.port = free_ports(1)[0]
            write_properties(
                broker, cluster.connect_string, cluster.session_timeout_ms, cluster.overrides
            )
            with _signals_held():
                new_offset = _launch(broker, cluster.python)
                save(cluster)
            return new_offset
        raise LocalClusterError(
            f"broker {broker.id} could not listen on {broker.address}: port already in use"
            f" ({PORT_ATTEMPTS} ports tried); free some ports and run"
            f" `{zkctl_command('up', cluster.dir)}` again;"
            f" see {broker.out_file}"
        )
    raise _died_during_startup(broker, out)


def _died_during_startup(broker: BrokerProcess, out: str, hint: str = "") -> LocalClusterError:
    """The error for a broker that exited while starting, whichever wait saw it: its exit
    code when this process started it, and its last output lines."""
    code = exit_code(broker, wait_s=5.0)
    status = f"exit code {code}" if code is not None else "exited"
    return LocalClusterError(
        f"broker {broker.id} (pid {broker.pid}) {status} during start-up{hint}; last lines"
        f" of {broker.out_file}:\n{out}"
    )


def _wait_cluster_ready(
    cluster: LocalCluster,
    offsets: dict[int, int],
    deadline: float,
    timeout: float,
    progress: Progress | None,
) -> ZkView:
    """Until every broker is registered and /controller names one of them, or until
    ``deadline`` (time.monotonic()), the end of up's ``timeout``."""
    ids = {b.id for b in cluster.brokers}
    attempts: dict[int, int] = {}
    zk = _zk_client(cluster.connect_string, min(max(deadline - time.monotonic(), 0.1), 30.0))
    try:
        last = ""
        while True:
            for b in cluster.brokers:
                if _gone(b):
                    new_offset = _exited_during_startup(cluster, b, offsets[b.id], attempts)
                    if new_offset is not None:
                        offsets[b.id] = new_offset
                        _say(progress, f"broker {b.id}: port was taken, retrying on {b.address}")
            try:
                view = read_zk_view(zk)
            except Exception as e:  # a connection blip: ask again until the deadline
                view = ZkView({}, None, None, [f"ZooKeeper read failed: {e}"])
            registered = ids & set(view.registered)
            if registered == ids and view.controller_id in ids:
                return view
            if registered != ids:
                waiting = ", ".join(str(i) for i in sorted(ids - registered))
                message = (
                    f"waiting for brokers to register: {len(registered)}/{len(ids)}"
                    f" (not yet: {waiting})"
                )
            else:
                message = "all brokers registered; waiting for a controller to be elected"
            if message != last:
                _say(progress, message)
                last = message
            if time.monotonic() >= deadline:
                outs = ", ".join(str(b.out_file) for b in cluster.brokers)
                raise LocalClusterError(
                    f"the cluster was not ready after {timeout:.0f} s: {message}; see {outs}"
                )
            time.sleep(0.2)
    finally:
        zk.close()


# --- down ---------------------------------------------------------------------------------


def _teardown(cluster: LocalCluster, progress: Progress | None) -> list[str]:
    """Stop ZooKeeper (if we started it) and delete our chroot; return warnings."""
    warnings: list[str] = []
    if cluster.chroot:
        try:
            zkp.delete_chroot(cluster.connect_string)
            _say(progress, f"deleted chroot {cluster.chroot}")
        except Exception as e:
            warnings.append(
                f"could not delete chroot {cluster.chroot} of {cluster.connect_string}"
                f" ({type(e).__name__}: {e}); delete it by hand"
            )
    if cluster.zookeeper:
        handle = zkp.ZooKeeper.from_dict(cluster.zookeeper)
        if not isinstance(handle, zkp.ExternalZooKeeper):
            _say(progress, f"stopping ZooKeeper at {handle.connect_string}")
        try:
            handle.close()
        except Exception as e:
            warnings.append(f"could not stop ZooKeeper ({type(e).__name__}: {e})")
    return warnings


@dataclass
class DownResult:
    found: bool
    already_stopped: bool = False
    brokers: dict[int, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _controller_id(cluster: LocalCluster) -> int | None:
    view, _error = _try_zk_view(cluster.connect_string, 3.0)
    return None if view is None else view.controller_id


def down(
    directory: Path | str = DEFAULT_DIR,
    *,
    timeout: float = DEFAULT_STOP_TIMEOUT_S,
    progress: Progress | None = None,
) -> DownResult:
    """Stop every broker (the controller last, to spare the others a failover), then
    ZooKeeper; delete our chroot; mark cluster.json stopped. Safe to repeat."""
    directory = Path(directory).resolve()
    if not (directory / CLUSTER_FILE).exists() and not (directory / LOCK_FILE).exists():
        return DownResult(found=False)
    with _locked(directory):  # an up at work, its cluster.json not yet written: an error
        cluster = load(directory)
        if cluster is None:
            return DownResult(found=False)
        if cluster.state == "stopped" and not _live_processes(cluster):
            return DownResult(found=True, already_stopped=True)
        live = [b for b in cluster.brokers if process_status(b) != "dead"]
        # Paused brokers go on first: a paused controller kept to the last would hold every
        # other broker's controlled shutdown (its ControlledShutdown request waiting out
        # controller.socket.timeout.ms, 30 s) until the timeout SIGKILLed them.
        for b in live:
            if process_status(b) == "paused":
                signal_broker(b, signal.SIGCONT)
        controller = _controller_id(cluster) if len(live) > 1 else None
        first = [b for b in live if b.id != controller]
        last = [b for b in live if b.id == controller]
        outcome = {b.id: "not running" for b in cluster.brokers}
        outcome.update(stop_brokers(first, timeout, progress))
        outcome.update(stop_brokers(last, timeout, progress))
        warnings = _teardown(cluster, progress)
        cluster.state = "stopped"
        cluster.stopped_at = now_ms()
        save(cluster)
        return DownResult(found=True, brokers=outcome, warnings=warnings)


# --- one broker -----------------------------------------------------------------------------


def _running_cluster(directory: Path) -> LocalCluster:
    cluster = load(directory)
    if cluster is None:
        raise LocalClusterError(
            f"no cluster in {directory}: start one with `{zkctl_command('up', directory)}`"
        )
    if cluster.state == "stopped":
        raise LocalClusterError(
            f"the cluster in {directory} is stopped: `{zkctl_command('up', directory)}` starts one"
        )
    return cluster


def broker_stop(
    directory: Path | str,
    broker_id: int,
    *,
    timeout: float = DEFAULT_STOP_TIMEOUT_S,
    progress: Progress | None = None,
) -> str:
    """SIGTERM (controlled shutdown) and wait; SIGKILL after ``timeout``. The outcome."""
    directory = Path(directory).resolve()
    with _locked(directory):
        broker = _running_cluster(directory).broker(broker_id)
        return stop_brokers([broker], timeout, progress)[broker_id]


def broker_kill(directory: Path | str, broker_id: int) -> bool:
    """SIGKILL (no controlled shutdown) and wait until gone. False if it was not running."""
    directory = Path(directory).resolve()
    with _locked(directory):
        broker = _running_cluster(directory).broker(broker_id)
        if not signal_broker(broker, signal.SIGKILL):
            return False
        if wait_gone([broker], 10.0):
            raise LocalClusterError(f"broker {broker_id} (pid {broker.pid}) survived SIGKILL")
        return True


def broker_pause(directory: Path | str, broker_id: int) -> str:
    """SIGSTOP: the broker freezes with its sockets and ZooKeeper session open, as a hung
    process does; its session expires after the session timeout. The previous status."""
    return _stop_or_continue(Path(directory), broker_id, signal.SIGSTOP)


def broker_resume(directory: Path | str, broker_id: int) -> str:
    """SIGCONT after a pause. The previous status."""
    return _stop_or_continue(Path(directory), broker_id, signal.SIGCONT)


def _stop_or_continue(directory: Path, broker_id: int, sig: signal.Signals) -> str:
    directory = directory.resolve()
    with _locked(directory):
        broker = _running_cluster(directory).broker(broker_id)
        before = process_status(broker)
        if before == "dead" or not signal_broker(broker, sig):
            start = zkctl_command(f"broker start --id {broker_id}", directory)
            raise LocalClusterError(f"broker {broker_id} is not running; `{start}` starts it")
        return before


def broker_start(
    directory: Path | str,
    broker_id: int,
    *,
    wait: bool = True,
    timeout: float = DEFAULT_START_TIMEOUT_S,
    progress: Progress | None = None,
) -> BrokerProcess:
    """Start a stopped broker again with the same properties; wait for its registration."""
    directory = Path(directory).resolve()
    with _locked(directory):
        cluster = _running_cluster(directory)
        broker = cluster.broker(broker_id)
        if process_status(broker) != "dead":
            raise LocalClusterError(f"broker {broker_id} is already running (pid {broker.pid})")
        _check_local_zookeeper(cluster)
        # A killed broker's registration lingers until its session expires; the new one is
        # recognised by a different czxid.
        view, _error = _try_zk_view(cluster.connect_string, 5.0)
        old_czxid = None if view is None else view.registered.get(broker_id)
        with _signals_held():
            offset = _launch(broker, cluster.python)
            save(cluster)
        _say(progress, f"started broker {broker_id} (pid {broker.pid})")
        if wait:
            _wait_registered(cluster, broker, offset, old_czxid, timeout, progress)
        return broker


def _check_local_zookeeper(cluster: LocalCluster) -> None:
    """Refuse when the cluster's own ZooKeeper has no server running (after a reboot
    cluster.json still says running): a broker started then could never register."""
    if cluster.zookeeper.get("kind") != "local":
        return
    handle = zkp.ZooKeeper.from_dict(cluster.zookeeper)
    assert isinstance(handle, zkp.LocalZooKeeper)
    if any(s.is_running() for s in handle.servers):
        return
    pids = ", ".join(f"pid {s.pid}" for s in handle.servers if s.pid is not None)
    raise LocalClusterError(
        f"the cluster's ZooKeeper at {handle.connect_string} is not running"
        f"{f' ({pids} gone)' if pids else ''}; was the machine restarted?"
        f" `{zkctl_command('down', cluster.dir)}`, then `{zkctl_command('up', cluster.dir)}`,"
        " starts the cluster again (from fresh data)"
    )


def _wait_registered(
    cluster: LocalCluster,
    broker: BrokerProcess,
    offset: int,
    old_czxid: int | None,
    timeout: float,
    progress: Progress | None,
) -> None:
    deadline = time.monotonic() + timeout
    zk: ZkClient | None = None
    unreachable = ""
    try:
        _say(progress, f"waiting for broker {broker.id} to register")
        while True:
            if _gone(broker):
                out = tail(broker.out_file, offset)
                hint = ""
                if "Address already in use" in out:
                    hint = f" (port {broker.port} is in use by another process)"
                raise _died_during_startup(broker, out, hint)
            if zk is None:
                # A short attempt each round: a broker that exits meanwhile (it cannot reach
                # ZooKeeper either) is seen at once, not after one long connection time-out.
                try:
                    zk = _zk_client(
                        cluster.connect_string, min(1.0, max(deadline - time.monotonic(), 0.1))
                    )
                except Exception as e:
                    unreachable = f", which did not answer ({type(e).__name__}: {e})"
            if zk is not None:
                with contextlib.suppress(Exception):
                    czxid = read_zk_view(zk).registered.get(broker.id)
                    if czxid is not None and czxid != old_czxid:
                        return
            if time.monotonic() >= deadline:
                zk_state = "" if zk is not None else unreachable
                raise LocalClusterError(
                    f"broker {broker.id} did not register within {timeout:.0f} s in ZooKeeper"
                    f" at {cluster.connect_string}{zk_state} (it still runs as pid"
                    f" {broker.pid}); see {broker.out_file}"
                )
            time.sleep(0.2)
    finally:
        if zk is not None:
            zk.close()


# --- status -------------------------------------------------------------------------------


@dataclass
class BrokerStatus:
    broker: BrokerProcess
    process: str  # alive, paused, dead
    registered: bool | None  # None: ZooKeeper could not be read
    # What a running broker's status file says of its log directories: those that failed
    # (KIP-112), and how many of its partitions are offline with them.
    offline_log_dirs: list[str] = field(default_factory=list)
    offline_partitions: int = 0

    def to_json(self, controller_id: int | None) -> dict[str, Any]:
        return {
            "id": self.broker.id,
            "pid": self.broker.pid,
            "process": self.process,
            "registered": self.registered,
            "controller": self.broker.id == controller_id,
            "host": self.broker.host,
            "port": self.broker.port,
            "out_file": str(self.broker.out_file),
            "status_file": str(self.broker.status_file),
            "offline_log_dirs": self.offline_log_dirs,
            "offline_partitions": self.offline_partitions,
        }


@dataclass
class ClusterStatus:
    cluster: LocalCluster
    brokers: list[BrokerStatus]
    zookeeper: str  # a one-line description, state included
    view: ZkView | None
    zk_error: str | None

    @property
    def controller_id(self) -> int | None:
        return None if self.view is None else self.view.controller_id

    @property
    def controller_epoch(self) -> int | None:
        return None if self.view is None else self.view.controller_epoch

    def to_json(self) -> dict[str, Any]:
        return {
            "dir": str(self.cluster.dir),
            "state": self.cluster.state,
            "created_at_ms": self.cluster.created_at,
            "connect_string": self.cluster.connect_string,
            "zookeeper": self.zookeeper,
            "zookeeper_error": self.zk_error,
            "controller_id": self.controller_id,
            "controller_epoch": self.controller_epoch,
            "brokers": [b.to_json(self.controller_id) for b in self.brokers],
            "problems": [] if self.view is None else self.view.problems,
        }


def describe_zookeeper(cluster: LocalCluster) -> str:
    data = cluster.zookeeper
    kind = data.get("kind")
    if kind == "local":
        handle = zkp.ZooKeeper.from_dict(data)
        assert isinstance(handle, zkp.LocalZooKeeper)
        states = [
            f"pid {s.pid} {'running' if s.is_running() else 'not running'}" for s in handle.servers
        ]
        return f"local at {handle.connect_string} ({'; '.join(states)})"
    if kind == "container":
        return f"container {str(data.get('container_id'))[:12]} at {data.get('connect_string')}"
    chroot = f", chroot {cluster.chroot}" if cluster.chroot else ""
    return f"external at {data.get('connect_string')}{chroot}"


def status(directory: Path | str = DEFAULT_DIR, *, zk_timeout: float = 5.0) -> ClusterStatus:
    directory = Path(directory).resolve()
    cluster = load(directory)
    if cluster is None:
        raise LocalClusterError(
            f"no cluster in {directory}: start one with `{zkctl_command('up', directory)}`"
        )
    view: ZkView | None = None
    error: str | None = None
    if cluster.state != "stopped":
        view, error = _try_zk_view(cluster.connect_string, zk_timeout)
    brokers = []
    for b in cluster.brokers:
        st = BrokerStatus(b, process_status(b), None if view is None else b.id in view.registered)
        if st.process != "dead":
            data, _age = read_status_file(b)
            dirs = (data or {}).get("offline_log_dirs")
            offline = (data or {}).get("offline_partitions")
            if isinstance(dirs, list):
                st.offline_log_dirs = [str(d) for d in dirs]
            if isinstance(offline, int) and not isinstance(offline, bool):
                st.offline_partitions = offline
        brokers.append(st)
    return ClusterStatus(cluster, brokers, describe_zookeeper(cluster), view, error)


def read_status_file(broker: BrokerProcess) -> tuple[dict[str, Any] | None, float | None]:
    """The broker's broker-status.json and its age in seconds; (None, None) if unreadable."""
    try:
        text = broker.status_file.read_text(encoding="utf-8")
        age = time.time() - broker.status_file.stat().st_mtime
        data = json.loads(text)
    except (OSError, ValueError):
        return None, None
    return (data, age) if isinstance(data, dict) else (None, None)
