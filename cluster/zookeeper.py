"""ZooKeeper provisioning: the one place the CLI, the tests and the benchmarks get ZooKeeper from.

Where ZooKeeper comes from, in this order (see :func:`provision`):

1. a connect string given explicitly (the CLI's ``--zookeeper``) or by ``ZKCTL_ZOOKEEPER``,
   used as is;
2. a testcontainers ``zookeeper:3.8`` container, when a Docker engine answers quickly;
3. a local install, started as child processes on free loopback ports: an Apache ZooKeeper
   binary distribution in ``ZOOKEEPER_HOME``, or Debian's ``zookeeper`` package;

and otherwise :class:`ZooKeeperUnavailableError`, whose message names the three ways.

Ensembles (:func:`start_local` with ``servers=3``) are always local processes, because the
fault tests signal individual members by pid.

Two lifetimes. By default a local server dies with the Python process that started it
(PR_SET_PDEATHSIG, plus ``close()``, the context manager and ``atexit``). With
``detached=True`` it outlives its starter (new session, no death signal) and the handle
round-trips through :meth:`ZooKeeper.to_dict` / :meth:`ZooKeeper.from_dict`, so a later
process can stop it by pid. Processes are only ever signalled by the pid we started, after
checking that the pid still runs java with our config file. Local servers need Linux (/proc).

``ZKCTL_ZK_DISABLE`` (comma-separated ``docker``, ``home``, ``debian``) switches ways off,
e.g. to force local servers on a machine with Docker, or to test the "nothing available" error.
"""

from __future__ import annotations

import abc
import atexit
import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Self

from broker.config import format_properties
from cluster import ports
from cluster.processes import (
    DEATHSIG_SHIM,
    cmdline,
    is_alive,
    kill_leftover_processes,
    leftover_processes,
    started_pids,
    track_process,
    wait_gone,
    wait_stopped,
)

__all__ = [
    "CONTAINER_IMAGE",
    "ENV_CONNECT",
    "ENV_DISABLE",
    "ContainerZooKeeper",
    "ExternalZooKeeper",
    "LocalInstall",
    "LocalServer",
    "LocalZooKeeper",
    "Progress",
    "ZooKeeper",
    "ZooKeeperError",
    "ZooKeeperStartError",
    "ZooKeeperUnavailableError",
    "chroot_connect_string",
    "delete_chroot",
    "docker_available",
    "find_local_install",
    "four_letter_word",
    "kill_leftover_processes",
    "leftover_processes",
    "provision",
    "split_chroot",
    "start_container",
    "start_local",
    "started_pids",
    "track_process",
]

ENV_CONNECT = "ZKCTL_ZOOKEEPER"
ENV_DISABLE = "ZKCTL_ZK_DISABLE"
CONTAINER_IMAGE = "zookeeper:3.8"
DEBIAN_JAVA_DIR = Path("/usr/share/java")
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
HOST = "127.0.0.1"

# A small tick lets clients ask for session timeouts from 1 s (2 ticks) up to 60 s.
TICK_MS = 500
MIN_SESSION_TIMEOUT_MS = 1_000
MAX_SESSION_TIMEOUT_MS = 60_000

_CONTAINER_CLIENT_PORT = 2181
_SERVING_MODES = ("standalone", "leader", "follower", "observer")

Progress = Callable[[str], None]
"""Receives short progress messages (the CLI prints them; tests usually pass nothing)."""


class ZooKeeperError(RuntimeError):
    """Base class for provisioning errors."""


class ZooKeeperUnavailableError(ZooKeeperError):
    """No way to get a ZooKeeper: no connect string, no Docker engine, no local install."""


class ZooKeeperStartError(ZooKeeperError):
    """A server died or never became ready; the message names its log file."""

    def __init__(self, message: str, *, log_file: Path | None = None, port_in_use: bool = False):
        super().__init__(message)
        self.log_file = log_file
        self.port_in_use = port_in_use


def _say(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)


def _disabled(environ: Mapping[str, str] | None = None) -> set[str]:
    env = os.environ if environ is None else environ
    return {w.strip().lower() for w in env.get(ENV_DISABLE, "").split(",") if w.strip()}


# --------------------------------------------------------------------------------------------
# Four-letter words and chroots.


def four_letter_word(host: str, port: int, word: str, timeout: float = 2.0) -> str | None:
    """Send a four-letter word (``ruok``, ``srvr``, ``mntr``...); None when there is no answer."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(word.encode("ascii"))
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
    except OSError:
        return None
    return b"".join(chunks).decode(errors="replace") or None


def _mode_from_srvr(answer: str | None) -> str | None:
    for line in (answer or "").splitlines():
        if line.startswith("Mode:"):
            return line.split(":", 1)[1].strip()
    return None


def _data_dir_from_conf(answer: str | None) -> str | None:
    """The ``dataDir`` a ``conf`` answer names (ZooKeeper shows it with its ``version-2``
    subdirectory), or None."""
    for line in (answer or "").splitlines():
        if line.startswith("dataDir="):
            return line.split("=", 1)[1].strip()
    return None


def _is_data_dir(shown: str, data_dir: Path) -> bool:
    """Whether ``shown`` (from ``conf``) is ``data_dir``, the one we configured."""
    path = Path(shown)
    if path.name == "version-2":
        path = path.parent
    return path == data_dir or path.resolve() == data_dir.resolve()


def split_chroot(connect_string: str) -> tuple[str, str]:
    """``"h1:1,h2:2/a/b"`` -> ``("h1:1,h2:2", "/a/b")``; the chroot is ``""`` when absent."""
    slash = connect_string.find("/")
    if slash < 0:
        return connect_string, ""
    return connect_string[:slash], connect_string[slash:].rstrip("/")


def chroot_connect_string(
    connect_string: str, chroot: str, *, create: bool = True, timeout: float = 10.0
) -> str:
    """Return ``hosts/chroot`` (nested under any chroot already in ``connect_string``).

    With ``create`` (the default) the chroot path is created, parents included.
    """
    hosts, base = split_chroot(connect_string)
    parts = [p for p in f"{base}/{chroot}".split("/") if p]
    if not parts:
        raise ValueError(f"empty chroot {chroot!r}")
    path = "/" + "/".join(parts)
    if create:
        with kazoo_client(hosts, timeout) as zk:
            zk.ensure_path(path)
    return hosts + path


def delete_chroot(connect_string: str, *, timeout: float = 10.0) -> None:
    """Delete the chroot of ``connect_string`` recursively (absent is fine; see
    ZkClient.delete_tree). ``timeout``: the session's, and the connection's."""
    hosts, path = split_chroot(connect_string)
    if not path:
        raise ValueError(f"{connect_string!r} has no chroot; refusing to delete '/'")
    from zkdata.client import ZkClient

    zk = ZkClient(hosts, session_timeout_ms=max(1, int(timeout * 1000)))
    zk.start()
    try:
        zk.delete_tree(path)
    finally:
        zk.close()


@contextlib.contextmanager
def kazoo_client(hosts: str, timeout: float, start_timeout: float | None = None) -> Iterator[Any]:
    """A started kazoo client (``timeout``: its session's), stopped and closed after. A
    client that cannot connect within ``start_timeout`` (default ``timeout``) raises
    kazoo's timeout error, having stopped itself."""
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=hosts, timeout=timeout)
    zk.start(timeout=timeout if start_timeout is None else start_timeout)
    try:
        yield zk
    finally:
        zk.stop()
        zk.close()


# --------------------------------------------------------------------------------------------
# Handles.


class ZooKeeper(abc.ABC):
    """A provisioned ZooKeeper: a connect string, and how to get rid of it."""

    kind: ClassVar[str]

    def __init__(self, connect_string: str) -> None:
        self.connect_string = connect_string

    @abc.abstractmethod
    def close(self) -> None:
        """Stop whatever was started for this handle (idempotent)."""

    @abc.abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """A small JSON-able dict from which :meth:`from_dict` rebuilds the handle."""

    @staticmethod
    def check_dict(data: object) -> None:
        """Raise ValueError (an unknown kind) or TypeError unless ``data`` has the fields
        :meth:`from_dict` reads, of their types. Nothing is built: a local handle not
        detached would register itself to be stopped at exit."""
        if not isinstance(data, Mapping):
            raise TypeError(f"a ZooKeeper handle is an object, not {type(data).__name__}")
        kind = data.get("kind")
        fields = _HANDLE_FIELDS.get(kind) if isinstance(kind, str) else None
        if fields is None:
            raise ValueError(f"unknown ZooKeeper handle kind {kind!r}")
        _check_fields(data, fields, f"a {kind} ZooKeeper handle")
        for server in data["servers"] if kind == LocalZooKeeper.kind else []:
            if not isinstance(server, Mapping):
                raise TypeError("each server of a local ZooKeeper handle is an object")
            _check_fields(server, _SERVER_FIELDS, "each server of a local ZooKeeper handle")

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> ZooKeeper:
        kind = data.get("kind")
        if kind == ExternalZooKeeper.kind:
            return ExternalZooKeeper(str(data["connect_string"]))
        if kind == ContainerZooKeeper.kind:
            return ContainerZooKeeper(str(data["connect_string"]), str(data["container_id"]))
        if kind == LocalZooKeeper.kind:
            return LocalZooKeeper._from_dict(data)
        raise ValueError(f"unknown ZooKeeper handle kind {kind!r}")

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.connect_string!r})"


# What ZooKeeper.from_dict reads of each kind of handle (and LocalServer.from_dict of each
# server of a local one), for ZooKeeper.check_dict.
_HANDLE_FIELDS: dict[str, dict[str, type]] = {
    "external": {"connect_string": str},
    "container": {"connect_string": str, "container_id": str},
    "local": {"base_dir": str, "detached": bool, "owns_dir": bool, "servers": list},
}
_SERVER_FIELDS: dict[str, type] = {
    "myid": int,
    "client_port": int,
    "server_dir": str,
    "argv": list,
    "detached": bool,
}


def _check_fields(data: Mapping[str, Any], fields: Mapping[str, type], what: str) -> None:
    wrong = [k for k, t in fields.items() if not isinstance(data.get(k), t)]
    if wrong:
        expected = ", ".join(f"{k} ({fields[k].__name__})" for k in wrong)
        raise TypeError(f"{what} needs {expected}")


class ExternalZooKeeper(ZooKeeper):
    """A ZooKeeper someone else runs; we only know its connect string."""

    kind = "external"

    def close(self) -> None:
        pass

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "connect_string": self.connect_string}


# --------------------------------------------------------------------------------------------
# Docker.


def docker_available(timeout: float = 2.0) -> bool:
    """True when testcontainers is importable and a Docker engine answers a ping in time."""
    if "docker" in _disabled():
        return False
    if (
        importlib.util.find_spec("testcontainers") is None
        or importlib.util.find_spec("docker") is None
    ):
        return False
    try:
        import docker

        client = docker.from_env(timeout=timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        # Any failure (no socket, refused, timeout, bad DOCKER_HOST) means "no Docker path".
        return False


def _container_env() -> dict[str, str]:
    # Environment variables understood by the official image's entrypoint.
    return {
        "ZOO_TICK_TIME": str(TICK_MS),
        "ZOO_ADMINSERVER_ENABLED": "false",
        "ZOO_4LW_COMMANDS_WHITELIST": "*",
        "ZOO_MAX_CLIENT_CNXNS": "0",
        "ZOO_CFG_EXTRA": (
            f"minSessionTimeout={MIN_SESSION_TIMEOUT_MS} maxSessionTimeout={MAX_SESSION_TIMEOUT_MS}"
        ),
    }


class ContainerZooKeeper(ZooKeeper):
    """A ``zookeeper:3.8`` container: testcontainers-managed, or detached (stopped by id)."""

    kind = "container"

    def __init__(self, connect_string: str, container_id: str, *, container: Any = None) -> None:
        super().__init__(connect_string)
        self.container_id = container_id
        self._container = container  # the testcontainers object, when we started it that way
        self._closed = False

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._container is not None:
            self._container.stop()
            return
        import docker
        from docker.errors import NotFound

        client = docker.from_env()
        try:
            with contextlib.suppress(NotFound):
                client.containers.get(self.container_id).remove(force=True)
        finally:
            client.close()

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "connect_string": self.connect_string,
            "container_id": self.container_id,
        }


def start_container(
    *,
    detached: bool = False,
    progress: Progress | None = None,
    timeout: float = 120.0,
    on_start: Callable[[ZooKeeper], None] | None = None,
) -> ContainerZooKeeper:
    """Start a ``zookeeper:3.8`` container and wait until it serves.

    Not detached: a testcontainers container (its reaper removes it if we die). Detached: a
    plain Docker container that outlives us and is removed by id. ``on_start`` gets the
    handle once the container runs, before the wait; a wait that fails or is interrupted
    (any exception, a Ctrl-C too) removes the container.
    """
    _say(progress, f"starting a {CONTAINER_IMAGE} container (the image is pulled once)")
    if detached:
        handle = _start_detached_container()
    else:
        from testcontainers.core.container import DockerContainer

        container = DockerContainer(CONTAINER_IMAGE).with_exposed_ports(_CONTAINER_CLIENT_PORT)
        for key, value in _container_env().items():
            container = container.with_env(key, value)
        container.start()
        host = container.get_container_host_ip()
        port = int(container.get_exposed_port(_CONTAINER_CLIENT_PORT))
        handle = ContainerZooKeeper(
            f"{host}:{port}", str(container.get_wrapped_container().id), container=container
        )
    try:
        if on_start is not None:
            on_start(handle)
        _wait_container_serving(handle, timeout)
    except BaseException:
        with contextlib.suppress(Exception):  # the error being raised says more
            handle.close()
        raise
    _say(progress, f"ZooKeeper container ready at {handle.connect_string}")
    return handle


def _wait_container_serving(handle: ContainerZooKeeper, timeout: float) -> None:
    host, _, port_text = handle.connect_string.rpartition(":")
    deadline = time.monotonic() + timeout
    # Docker's port proxy accepts connections before ZooKeeper listens, so wait for a Mode line.
    while _mode_from_srvr(four_letter_word(host, int(port_text), "srvr")) is None:
        if time.monotonic() >= deadline:
            raise ZooKeeperStartError(
                f"ZooKeeper container {handle.container_id[:12]} not serving after {timeout:.0f} s"
                f" (docker logs {handle.container_id[:12]})"
            )
        time.sleep(0.2)


def _start_detached_container() -> ContainerZooKeeper:
    import urllib.parse

    import docker

    client = docker.from_env()
    try:
        docker_host = os.environ.get("DOCKER_HOST", "")
        remote = (
            urllib.parse.urlparse(docker_host).hostname if docker_host.startswith("tcp") else None
        )
        container = client.containers.run(
            CONTAINER_IMAGE,
            detach=True,
            environment=_container_env(),
            ports={f"{_CONTAINER_CLIENT_PORT}/tcp": ("0.0.0.0" if remote else HOST, None)},
            labels={"zkctl.zookeeper": "1"},
        )
        try:
            container.reload()
            port = int(container.ports[f"{_CONTAINER_CLIENT_PORT}/tcp"][0]["HostPort"])
        except BaseException:
            with contextlib.suppress(Exception):
                container.remove(force=True)
            raise
        return ContainerZooKeeper(f"{remote or HOST}:{port}", str(container.id))
    finally:
        client.close()


# --------------------------------------------------------------------------------------------
# Local install.


@dataclass(frozen=True)
class LocalInstall:
    """How to run ZooKeeper here: the java binary and the classpath."""

    java: str
    classpath: tuple[str, ...]
    description: str


def _find_java(env: Mapping[str, str]) -> str | None:
    java_home = env.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java", path=env.get("PATH"))
    return str(Path(found).absolute()) if found else None


def _has_main_class(jar: Path) -> bool:
    try:
        with zipfile.ZipFile(jar) as zf:
            zf.getinfo(MAIN_CLASS.replace(".", "/") + ".class")
    except (KeyError, OSError, zipfile.BadZipFile):
        return False
    return True


def _home_classpath(home: Path) -> tuple[list[str] | None, str]:
    """Classpath of an Apache binary distribution (jars at the top and in lib/, plus conf/)."""
    jars = sorted(home.glob("*.jar")) + sorted((home / "lib").glob("*.jar"))
    if not any(_has_main_class(jar) for jar in jars):
        return None, f"ZOOKEEPER_HOME={home}: no jar with {MAIN_CLASS} in it or in its lib/"
    # conf/ holds the distribution's logging configuration, as bin/zkEnv.sh does.
    conf = [str(home / "conf")] if (home / "conf").is_dir() else []
    return conf + [str(jar) for jar in jars], f"ZOOKEEPER_HOME={home}"


# Debian's zookeeper.jar manifest misses these netty jars, and no slf4j binding is listed.
_DEBIAN_EXTRA = (
    "zookeeper-jute",
    "netty-resolver",
    "netty-codec",
    "netty-transport-native-unix-common",
)
_DEBIAN_REQUIRED = (
    "zookeeper-jute",
    "slf4j-api",
    "netty-handler",
    "netty-common",
    "netty-transport",
    "netty-buffer",
    "netty-resolver",
    "netty-codec",
)
_SLF4J_BINDINGS = ("slf4j-simple", "slf4j-jdk14", "slf4j-nop")


def _debian_classpath(java_dir: Path) -> tuple[list[str] | None, str]:
    """Classpath for Debian's package: zookeeper.jar, its manifest Class-Path, and extras."""
    main = java_dir / "zookeeper.jar"
    if not main.is_file():
        return None, f"Debian package: {main} not found"
    try:
        with zipfile.ZipFile(main) as zf:
            manifest = zf.read("META-INF/MANIFEST.MF").decode()
    except (KeyError, OSError, zipfile.BadZipFile) as exc:
        return None, f"Debian package: cannot read the manifest of {main}: {exc}"
    # Manifest lines wrap at 72 bytes; a continuation line starts with one space.
    unfolded = manifest.replace("\r\n", "\n").replace("\n ", "")
    listed: list[Path] = []
    for line in unfolded.splitlines():
        if line.startswith("Class-Path:"):
            listed = [java_dir / Path(p) for p in line.split(":", 1)[1].split()]
    extras = [java_dir / f"{name}.jar" for name in _DEBIAN_EXTRA]
    missing = [n for n in _DEBIAN_REQUIRED if not (java_dir / f"{n}.jar").is_file()]
    if missing:
        return None, f"Debian package: missing jars in {java_dir}: {', '.join(missing)}"
    binding = next(
        (java_dir / f"{b}.jar" for b in _SLF4J_BINDINGS if (java_dir / f"{b}.jar").is_file()), None
    )
    classpath: list[str] = []
    for jar in [main, *extras, *listed, *([binding] if binding else [])]:
        if jar.is_file() and str(jar) not in classpath:
            classpath.append(str(jar))
    return classpath, f"Debian's zookeeper package in {java_dir}"


def _probe_local(environ: Mapping[str, str] | None = None) -> tuple[LocalInstall | None, list[str]]:
    """The local install to use, or None and the reasons each candidate was rejected."""
    env = os.environ if environ is None else environ
    disabled = _disabled(env)
    reasons: list[str] = []
    if not Path("/proc/self/cmdline").exists():
        return None, ["local servers need Linux (/proc)"]
    java = _find_java(env)
    if java is None:
        return None, ["no java on PATH or in JAVA_HOME"]
    home = env.get("ZOOKEEPER_HOME", "").strip()
    if "home" in disabled:
        reasons.append(f"ZOOKEEPER_HOME: disabled by {ENV_DISABLE}")
    elif not home:
        reasons.append("ZOOKEEPER_HOME is not set")
    else:
        classpath, note = _home_classpath(Path(home))
        if classpath is not None:
            return LocalInstall(java, tuple(classpath), note), reasons
        reasons.append(note)
    if "debian" in disabled:
        reasons.append(f"Debian package: disabled by {ENV_DISABLE}")
    else:
        classpath, note = _debian_classpath(DEBIAN_JAVA_DIR)
        if classpath is not None:
            return LocalInstall(java, tuple(classpath), note), reasons
        reasons.append(note)
    return None, reasons


def find_local_install(environ: Mapping[str, str] | None = None) -> LocalInstall | None:
    """The local ZooKeeper install to run (ZOOKEEPER_HOME first, then Debian's), if any."""
    return _probe_local(environ)[0]


def _unavailable_message(reasons: Sequence[str]) -> str:
    checked = "".join(f"\n  - {r}" for r in reasons)
    return (
        "No ZooKeeper available. Any one of these works:\n"
        f"  1. a connect string: pass --zookeeper host:port or set {ENV_CONNECT}=host:port;\n"
        f"  2. a Docker engine (for a testcontainers {CONTAINER_IMAGE} container);\n"
        "  3. a local ZooKeeper: set ZOOKEEPER_HOME to an Apache ZooKeeper 3.8 binary\n"
        "     distribution, or install Debian's zookeeper package with a Java runtime\n"
        "     (scripts/setup.sh does it when run as root on Debian).\n"
        f"What was checked:{checked}"
    )


def _free_ports(count: int) -> list[int]:
    """``count`` distinct free loopback ports, none of which the kernel hands out by itself
    (see cluster/ports.py): an ensemble member restarted binds the same ports again."""
    return ports.free_ports(count, HOST)


class LocalServer:
    """One ZooKeeper server process on loopback, with its own directory.

    ``server_dir`` holds ``zoo.cfg``, ``zookeeper.log`` (the process's output) and ``data/``.
    """

    def __init__(
        self,
        *,
        myid: int,
        client_port: int,
        server_dir: Path,
        argv: Sequence[str],
        detached: bool,
        quorum_port: int | None = None,
        election_port: int | None = None,
        pid: int | None = None,
    ) -> None:
        self.myid = myid
        self.client_port = client_port
        self.quorum_port = quorum_port
        self.election_port = election_port
        self.server_dir = server_dir
        self.argv = list(argv)
        self.detached = detached
        self._pid = pid
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    @property
    def pid(self) -> int | None:
        """The pid of the last process started for this server (kept after it exits)."""
        return self._pid

    @property
    def data_dir(self) -> Path:
        return self.server_dir / "data"

    @property
    def config_file(self) -> Path:
        return self.server_dir / "zoo.cfg"

    @property
    def log_file(self) -> Path:
        return self.server_dir / "zookeeper.log"

    @property
    def address(self) -> str:
        return f"{HOST}:{self.client_port}"

    @property
    def connect_string(self) -> str:
        """This server alone (the ensemble's connect string lists every member)."""
        return self.address

    def __repr__(self) -> str:
        return f"LocalServer(myid={self.myid}, pid={self._pid}, address={self.address!r})"

    # -- process control ----------------------------------------------------------------------

    def start(self) -> None:
        """Launch the process (use :meth:`wait_ready` to wait for it)."""
        if self.is_running():
            raise ZooKeeperError(f"ZooKeeper server {self.myid} already runs as pid {self._pid}")
        self.log_file.touch()
        self._log_offset = self.log_file.stat().st_size
        with self.log_file.open("ab") as log:
            if self.detached:
                # A new session: no controlling terminal, no hang-up when the CLI's terminal goes.
                self._proc = subprocess.Popen(
                    self.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.server_dir,
                    start_new_session=True,
                )
            else:
                # Its own process group keeps a terminal's Ctrl-C for the starter, which then
                # stops the server in order; the death signal covers the starter dying.
                self._proc = subprocess.Popen(
                    [
                        sys.executable,
                        "-I",
                        "-S",
                        "-c",
                        DEATHSIG_SHIM,
                        str(os.getpid()),
                        *self.argv,
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.server_dir,
                    process_group=0,
                )
        self._pid = self._proc.pid
        track_process(self._pid, str(self.config_file))

    def is_running(self) -> bool:
        """True while our process runs (paused counts as running)."""
        if self._proc is not None:
            return self._proc.poll() is None
        return self._pid is not None and self._owns(self._pid)

    def _owns(self, pid: int) -> bool:
        """Whether ``pid`` is a live java running QuorumPeerMain with our config file."""
        argv = cmdline(pid)
        return bool(
            argv
            and is_alive(pid)
            and Path(argv[0]).name.startswith("java")
            and MAIN_CLASS in argv
            and argv[-1] == str(self.config_file)
        )

    def _signal(self, sig: signal.Signals) -> bool:
        if self._pid is None or not self.is_running():
            return False
        # Without a Popen (a handle rebuilt from a dict) re-check the pid right before use.
        if self._proc is None and not self._owns(self._pid):
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._pid, sig)
        return True

    def kill(self, timeout: float = 10.0) -> None:
        """SIGKILL the server and wait until it is gone."""
        if self._signal(signal.SIGKILL):
            self._wait_exit(timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL if it is still there after ``timeout`` seconds."""
        if self._terminate():
            self._finish_stop(timeout)

    def _terminate(self) -> bool:
        if not self._signal(signal.SIGTERM):
            return False
        self._signal(signal.SIGCONT)  # a paused process acts on SIGTERM only once continued
        return True

    def _finish_stop(self, timeout: float) -> None:
        if self._pid is not None and not wait_gone(self._pid, self._proc, timeout):
            self.kill(timeout)

    def pause(self) -> None:
        """SIGSTOP: the process freezes, its sockets stay open (a hung server)."""
        if not self._signal(signal.SIGSTOP):
            raise ZooKeeperError(f"ZooKeeper server {self.myid} is not running")
        if self._pid is not None:
            wait_stopped(self._pid)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        if not self._signal(signal.SIGCONT):
            raise ZooKeeperError(f"ZooKeeper server {self.myid} is not running")

    def restart(self, timeout: float = 30.0, progress: Progress | None = None) -> None:
        """Stop if running, start again on the same port and data dir, wait until it serves."""
        self.stop()
        _say(progress, f"restarting ZooKeeper server {self.myid} on {self.address}")
        self.start()
        self.wait_ready(timeout)

    def _wait_exit(self, timeout: float) -> None:
        if self._pid is not None and not wait_gone(self._pid, self._proc, timeout):
            raise ZooKeeperError(f"ZooKeeper server {self.myid} (pid {self._pid}) did not exit")

    # -- state ---------------------------------------------------------------------------------

    def srvr(self, timeout: float = 1.0) -> str | None:
        """The ``srvr`` four-letter-word answer, or None."""
        return four_letter_word(HOST, self.client_port, "srvr", timeout)

    def mode(self, timeout: float = 1.0) -> str | None:
        """``standalone``, ``leader`` or ``follower`` while serving; None otherwise."""
        return _mode_from_srvr(self.srvr(timeout))

    def wait_ready(self, timeout: float = 30.0) -> str:
        """Wait until the server serves; return its mode. Raise if it dies or times out, or
        if another ZooKeeper server answers on its port (port_in_use: two starts chose the
        same free port, and the other bound it first; ours is about to die of it)."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.is_running():
                raise self._start_error("exited before it was ready")
            mode = self.mode()
            if mode in _SERVING_MODES:
                # The answer is the port's, not our process's: only ours may make us ready.
                conf = four_letter_word(HOST, self.client_port, "conf", 1.0)
                data_dir = _data_dir_from_conf(conf)
                if data_dir is not None and _is_data_dir(data_dir, self.data_dir):
                    return mode
                if data_dir is not None:
                    raise self._start_error(
                        f"found another ZooKeeper server (data directory {data_dir}) on its port",
                        port_in_use=True,
                    )
            if time.monotonic() >= deadline:
                raise self._start_error(f"was not ready after {timeout:.0f} s")
            time.sleep(0.1)

    def _recent_log(self) -> str:
        """What the process has written to its log since it was last started."""
        with contextlib.suppress(OSError), self.log_file.open("rb") as log:
            log.seek(self._log_offset)
            return log.read().decode(errors="replace")
        return ""

    def port_was_in_use(self) -> bool:
        """Whether, since it was last started, the server failed to bind a port."""
        return "Address already in use" in self._recent_log()

    def _start_error(self, what: str, *, port_in_use: bool = False) -> ZooKeeperStartError:
        code = self._proc.returncode if self._proc is not None else None
        port_in_use = port_in_use or self.port_was_in_use()
        hint = "; a port was already in use" if port_in_use else ""
        status = f", exit code {code}" if code is not None else ""
        return ZooKeeperStartError(
            f"ZooKeeper server {self.myid} (pid {self._pid}{status}) on {self.address} {what}"
            f"{hint}; see {self.log_file}",
            log_file=self.log_file,
            port_in_use=port_in_use,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "myid": self.myid,
            "pid": self._pid,
            "client_port": self.client_port,
            "quorum_port": self.quorum_port,
            "election_port": self.election_port,
            "server_dir": str(self.server_dir),
            "data_dir": str(self.data_dir),
            "log_file": str(self.log_file),
            "argv": self.argv,
            "detached": self.detached,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LocalServer:
        return cls(
            myid=int(data["myid"]),
            client_port=int(data["client_port"]),
            quorum_port=data.get("quorum_port"),
            election_port=data.get("election_port"),
            server_dir=Path(data["server_dir"]),
            argv=[str(a) for a in data["argv"]],
            detached=bool(data["detached"]),
            pid=data.get("pid"),
        )


# Handles that must not outlive this process; atexit stops whatever close() did not.
_LIVE: set[LocalZooKeeper] = set()
_LIVE_LOCK = threading.Lock()


@atexit.register
def _close_live_handles() -> None:
    with _LIVE_LOCK:
        handles = list(_LIVE)
    for handle in handles:
        with contextlib.suppress(Exception):
            handle.close()


class LocalZooKeeper(ZooKeeper):
    """A single local server or an ensemble of them."""

    kind = "local"

    def __init__(
        self, servers: Sequence[LocalServer], base_dir: Path, *, detached: bool, owns_dir: bool
    ) -> None:
        super().__init__(",".join(s.address for s in servers))
        self.servers = list(servers)
        self.base_dir = base_dir
        self.detached = detached
        self.owns_dir = owns_dir
        self._closed = False
        if not detached:
            with _LIVE_LOCK:
                _LIVE.add(self)

    @property
    def pids(self) -> list[int | None]:
        return [s.pid for s in self.servers]

    def server(self, myid: int) -> LocalServer:
        return next(s for s in self.servers if s.myid == myid)

    def leader(self) -> LocalServer | None:
        """The member whose ``srvr`` says leader (a single server counts as its own leader)."""
        for s in self.servers:
            if s.is_running() and s.mode() in ("leader", "standalone"):
                return s
        return None

    def wait_ready(self, timeout: float = 60.0, progress: Progress | None = None) -> None:
        """Wait until every member serves and, in an ensemble, one of them leads."""
        deadline = time.monotonic() + timeout
        try:
            for s in self.servers:
                _say(progress, f"waiting for ZooKeeper server {s.myid} on {s.address}")
                s.wait_ready(max(deadline - time.monotonic(), 0.1))
            self.wait_quorum(max(deadline - time.monotonic(), 0.1))
        except ZooKeeperStartError as exc:
            raise self._with_bind_errors(exc) from None

    def _with_bind_errors(self, exc: ZooKeeperStartError) -> ZooKeeperStartError:
        """``exc``, or when members other than the one it is about failed to bind a port
        since they started, an error that names their logs and says a port was in use (so
        :func:`start_local` retries on other ports). In an ensemble the member waited for
        is not always the one that lost the race: the elected leader binds its quorum port
        when it leads, and a member waiting for a leader only times out."""
        clashed = [s for s in self.servers if s.log_file != exc.log_file and s.port_was_in_use()]
        if not clashed:
            return exc
        found = "".join(
            f"; ZooKeeper server {s.myid} found a port already in use, see {s.log_file}"
            for s in clashed
        )
        return ZooKeeperStartError(
            f"{exc}{found}",
            log_file=exc.log_file if exc.port_in_use else clashed[0].log_file,
            port_in_use=True,
        )

    def wait_quorum(self, timeout: float = 30.0) -> LocalServer:
        """Wait until a majority of members serves with one leader; dead members are ignored."""
        deadline = time.monotonic() + timeout
        while True:
            modes = {s.myid: s.mode() for s in self.servers if s.is_running()}
            serving = [m for m in modes.values() if m in _SERVING_MODES]
            leaders = [i for i, m in modes.items() if m in ("leader", "standalone")]
            if len(serving) > len(self.servers) // 2 and len(leaders) == 1:
                return self.server(leaders[0])
            if time.monotonic() >= deadline:
                logs = ", ".join(str(s.log_file) for s in self.servers)
                raise ZooKeeperStartError(
                    f"no ZooKeeper quorum after {timeout:.0f} s (modes {modes}); see {logs}"
                )
            time.sleep(0.1)

    def close(self, *, remove_dir: bool | None = None) -> None:
        """Stop every member (SIGTERM, then SIGKILL); remove the directory if we created it."""
        if self._closed:
            return
        # Signal every member first, then wait: members shut down in parallel.
        terminated = [s for s in self.servers if s._terminate()]
        for s in terminated:
            s._finish_stop(10.0)
        self._closed = True
        with _LIVE_LOCK:
            _LIVE.discard(self)
        if self.owns_dir if remove_dir is None else remove_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "connect_string": self.connect_string,
            "base_dir": str(self.base_dir),
            "detached": self.detached,
            "owns_dir": self.owns_dir,
            "servers": [s.to_dict() for s in self.servers],
        }

    @classmethod
    def _from_dict(cls, data: Mapping[str, Any]) -> LocalZooKeeper:
        servers = [LocalServer.from_dict(s) for s in data["servers"]]
        return cls(
            servers,
            Path(data["base_dir"]),
            detached=bool(data["detached"]),
            owns_dir=bool(data["owns_dir"]),
        )


def _config_text(
    data_dir: Path, client_port: int, peers: Sequence[tuple[int, int, int]] | None
) -> str:
    """zoo.cfg, ASCII only: ZooKeeper reads it with Properties.load(InputStream), as
    ISO-8859-1 with backslash escapes, so a data dir written raw ("Übungen", "a\\b") would
    name another directory."""
    props = {
        "tickTime": str(TICK_MS),
        "initLimit": "20",
        "syncLimit": "10",
        "dataDir": str(data_dir),
        "clientPort": str(client_port),
        "clientPortAddress": HOST,
        "minSessionTimeout": str(MIN_SESSION_TIMEOUT_MS),
        "maxSessionTimeout": str(MAX_SESSION_TIMEOUT_MS),
        "admin.enableServer": "false",
        "4lw.commands.whitelist": "*",
        # Tests open many clients from one address.
        "maxClientCnxns": "0",
        # fsync per write costs milliseconds; a killed process's writes survive in the page
        # cache, and these servers never outlive a machine crash that would lose them.
        "forceSync": "no",
        # A background cluster (zkctl up) may run for days: keep its data dir bounded.
        "autopurge.snapRetainCount": "3",
        "autopurge.purgeInterval": "1",
    }
    for myid, quorum_port, election_port in peers or ():
        props[f"server.{myid}"] = f"{HOST}:{quorum_port}:{election_port}"
    return format_properties(props)


def _java_argv(install: LocalInstall, server_dir: Path) -> list[str]:
    return [
        install.java,
        "-Xmx512m",
        "-XX:+UseSerialGC",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        f"-Dzookeeper.log.dir={server_dir}",
        "-Dorg.slf4j.simpleLogger.showDateTime=true",
        "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd HH:mm:ss.SSS",
        "-cp",
        os.pathsep.join(install.classpath),
        MAIN_CLASS,
        str(server_dir / "zoo.cfg"),
    ]


def start_local(
    servers: int = 1,
    *,
    detached: bool = False,
    base_dir: Path | str | None = None,
    install: LocalInstall | None = None,
    progress: Progress | None = None,
    timeout: float = 60.0,
    attempts: int = 3,
    on_start: Callable[[ZooKeeper], None] | None = None,
) -> LocalZooKeeper:
    """Start ``servers`` local ZooKeeper servers (1, or an ensemble such as 3) and wait for them.

    ``base_dir`` gets one ``server-<myid>`` directory per member; without it a temporary
    directory is used and removed by ``close()``. A port taken between choosing and binding
    it is retried with fresh ports, up to ``attempts`` times. ``timeout`` bounds each attempt.
    ``on_start`` gets each attempt's handle as soon as its processes run, before the wait
    (``zkctl up`` records it, so that ``zkctl down`` finds a server whose starter died). A
    start that fails or is interrupted (any exception, a Ctrl-C too) stops what it launched.

    Not detached, the servers get SIGKILL when the *thread* that started them exits (Linux's
    death signal follows the creating thread): start them from a long-lived thread.
    """
    if servers < 1:
        raise ValueError("servers must be at least 1")
    if install is None:
        install, reasons = _probe_local()
        if install is None:
            raise ZooKeeperUnavailableError(_unavailable_message(reasons))
    owns_dir = base_dir is None
    base = Path(tempfile.mkdtemp(prefix="zkctl-zookeeper-")) if base_dir is None else Path(base_dir)
    base.mkdir(parents=True, exist_ok=True)
    what = "ZooKeeper server" if servers == 1 else f"{servers}-server ZooKeeper ensemble"
    started = time.monotonic()
    for attempt in range(1, attempts + 1):
        handle = _launch_local(servers, base, install, detached=detached, owns_dir=owns_dir)
        _say(progress, f"starting a {what} at {handle.connect_string} ({install.description})")
        try:
            if on_start is not None:
                on_start(handle)
            handle.wait_ready(timeout, progress)
        except ZooKeeperStartError as exc:
            handle.close(remove_dir=False)  # keep the logs the error points at
            if exc.port_in_use and attempt < attempts:
                _say(progress, f"{exc}; retrying on other ports")
                continue
            raise
        except BaseException:
            # Anything else (a Ctrl-C's KeyboardInterrupt, a failing on_start): stop what
            # was launched, or a detached server would run on with no handle to stop it.
            handle.close()
            raise
        _say(
            progress,
            f"{what} ready at {handle.connect_string} in {time.monotonic() - started:.1f} s",
        )
        return handle
    raise AssertionError("unreachable: the last attempt returns or raises")


def _launch_local(
    servers: int, base: Path, install: LocalInstall, *, detached: bool, owns_dir: bool
) -> LocalZooKeeper:
    ports = _free_ports(servers if servers == 1 else 3 * servers)
    clients = ports[:servers]
    peers = (
        None
        if servers == 1
        else [(i + 1, ports[servers + 2 * i], ports[servers + 2 * i + 1]) for i in range(servers)]
    )
    members = []
    for i in range(servers):
        myid = i + 1
        server_dir = base / f"server-{myid}"
        (server_dir / "data").mkdir(parents=True, exist_ok=True)
        (server_dir / "data" / "myid").write_text(f"{myid}\n")
        config = _config_text(server_dir / "data", clients[i], peers)
        (server_dir / "zoo.cfg").write_text(config, encoding="ascii")
        members.append(
            LocalServer(
                myid=myid,
                client_port=clients[i],
                quorum_port=peers[i][1] if peers else None,
                election_port=peers[i][2] if peers else None,
                server_dir=server_dir,
                argv=_java_argv(install, server_dir),
                detached=detached,
            )
        )
    handle = LocalZooKeeper(members, base, detached=detached, owns_dir=owns_dir)
    try:
        for member in members:
            member.start()
    except BaseException:
        handle.close(remove_dir=False)
        raise
    return handle


# --------------------------------------------------------------------------------------------
# The one entry point.


def provision(
    connect_string: str | None = None,
    *,
    detached: bool = False,
    base_dir: Path | str | None = None,
    progress: Progress | None = None,
    timeout: float = 60.0,
    on_start: Callable[[ZooKeeper], None] | None = None,
) -> ZooKeeper:
    """A single ZooKeeper: the given connect string or ZKCTL_ZOOKEEPER, else a container when
    Docker answers, else a local server; :class:`ZooKeeperUnavailableError` when none works.

    ``base_dir`` is only used for a local server (the CLI keeps its state there).
    ``on_start`` gets a container's or local server's handle as soon as it runs, before
    the wait for it to serve (see :func:`start_local`); a connect string starts nothing.
    """
    given = connect_string or os.environ.get(ENV_CONNECT, "").strip()
    if given:
        _say(progress, f"using ZooKeeper at {given}")
        return ExternalZooKeeper(given)
    reasons = [f"no connect string given and {ENV_CONNECT} is not set"]
    if docker_available():
        return start_container(
            detached=detached,
            progress=progress,
            timeout=max(timeout, 120.0),
            on_start=on_start,
        )
    if "docker" in _disabled():
        reasons.append(f"Docker: disabled by {ENV_DISABLE}")
    elif importlib.util.find_spec("testcontainers") is None:
        reasons.append("Docker: testcontainers is not installed (a dev dependency)")
    else:
        reasons.append("Docker: no engine answered within 2 s")
    install, local_reasons = _probe_local()
    if install is None:
        raise ZooKeeperUnavailableError(_unavailable_message(reasons + local_reasons))
    return start_local(
        1,
        detached=detached,
        base_dir=base_dir,
        install=install,
        progress=progress,
        timeout=timeout,
        on_start=on_start,
    )
