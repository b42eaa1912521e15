"""cluster.zookeeper: where ZooKeeper comes from, and how its processes live and die."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss
from kazoo.handlers.threading import KazooTimeoutError

from cluster import zookeeper as zkp

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def _alive(pid: int) -> bool:
    """The pid exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _eventually(check: Callable[[], bool], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _retry(op: Callable[[], T], timeout: float = 30.0) -> T:
    """Retry a kazoo call across connection loss, for at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return op()
        except (ConnectionLoss, KazooTimeoutError):
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


def _client(hosts: str) -> AbstractContextManager[KazooClient]:
    return zkp.kazoo_client(hosts, 10.0, start_timeout=15.0)


def _kill_if_ours(pid: int, marker: str) -> None:
    """Test clean-up of a grandchild: by pid, and only if its command line has our marker."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except FileNotFoundError:
        return
    if marker in argv and _alive(pid):
        os.kill(pid, signal.SIGKILL)


def _read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, f"no output from the child within {timeout} s"
    return proc.stdout.readline().strip()


@pytest.mark.integration
def test_single_local_server_starts_answers_kazoo_and_stops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(zkp.ENV_CONNECT, raising=False)
    monkeypatch.setenv(zkp.ENV_DISABLE, "docker")
    messages: list[str] = []
    started = time.monotonic()
    handle = zkp.provision(progress=messages.append)
    elapsed = time.monotonic() - started
    assert isinstance(handle, zkp.LocalZooKeeper)
    server = handle.servers[0]
    pid = server.pid
    assert pid is not None
    try:
        print(f"single local server ready in {elapsed:.2f} s")
        assert any("ready" in m for m in messages)
        assert handle.connect_string == f"127.0.0.1:{server.client_port}"
        assert pid in zkp.started_pids()
        assert server.is_running()
        assert server.mode() == "standalone"
        assert zkp.four_letter_word("127.0.0.1", server.client_port, "ruok") == "imok"
        assert (server.data_dir / "myid").is_file()
        with _client(handle.connect_string) as zk:
            zk.create("/hello", b"world")
            assert zk.get("/hello")[0] == b"world"
        # The configured bounds let clients ask for sessions from 1 s to 60 s.
        conf = zkp.four_letter_word("127.0.0.1", server.client_port, "conf") or ""
        assert "minSessionTimeout=1000" in conf
        assert "maxSessionTimeout=60000" in conf
    finally:
        handle.close()
    assert not server.is_running()
    assert not _alive(pid)
    assert not handle.base_dir.exists()  # a temporary directory is removed by close()


@pytest.mark.integration
def test_pause_resume_and_restart_keep_port_data_and_session() -> None:
    with zkp.start_local(1) as handle:
        server = handle.servers[0]
        with _client(handle.connect_string) as zk:
            zk.create("/persistent", b"kept")
            zk.create("/ephemeral", ephemeral=True)
            session_id = zk.client_id[0]

            server.pause()
            assert server.srvr(timeout=0.5) is None  # a frozen server does not answer
            server.resume()
            assert _eventually(lambda: server.mode() == "standalone")

            old_pid, port = server.pid, server.client_port
            server.restart(timeout=30)
            assert server.pid != old_pid
            assert not _alive(old_pid or 0)
            assert server.client_port == port
            # The session is in the data dir, so the client resumes it within its timeout.
            assert _retry(lambda: zk.get_async("/persistent").get(timeout=5))[0] == b"kept"
            assert _retry(lambda: zk.exists_async("/ephemeral").get(timeout=5)) is not None
            assert zk.client_id[0] == session_id


@pytest.mark.integration
@pytest.mark.parametrize("name", ["projekt-\u00fcbung", "back\\slash"])
def test_a_server_in_a_directory_named_beyond_ascii_keeps_its_data_there(
    tmp_path: Path, name: str
) -> None:
    """zoo.cfg is read as ISO-8859-1 with backslash escapes: written raw, such a directory
    gave ZooKeeper a data directory outside it, and the wait took the server's own answer
    for another server's ("a port was already in use"), three times over."""
    base = tmp_path / name
    with zkp.start_local(1, base_dir=base, attempts=1, timeout=30) as handle:
        server = handle.servers[0]
        assert server.mode() == "standalone"
        with _client(handle.connect_string) as zk:
            zk.create("/hello", b"world")
        assert (server.data_dir / "version-2").is_dir()
    assert [p.name for p in tmp_path.iterdir()] == [name]


@pytest.mark.integration
def test_chroots_isolate_two_clients(zookeeper: zkp.ZooKeeper) -> None:
    hosts, base = zkp.split_chroot(zookeeper.connect_string)
    top = f"/isolation-{uuid.uuid4().hex[:8]}"
    first = zkp.chroot_connect_string(zookeeper.connect_string, f"{top}/a")
    second = zkp.chroot_connect_string(zookeeper.connect_string, f"{top}/b")
    assert first == f"{hosts}{base}{top}/a"
    try:
        with _client(first) as za, _client(second) as zb:
            za.create("/shared", b"from a")
            assert zb.exists("/shared") is None
            zb.create("/shared", b"from b")
            assert za.get("/shared")[0] == b"from a"
            assert zb.get("/shared")[0] == b"from b"
        with _client(zookeeper.connect_string) as root:
            assert sorted(root.get_children(top)) == ["a", "b"]
    finally:
        zkp.delete_chroot(zookeeper.connect_string.rstrip("/") + top)
    with _client(zookeeper.connect_string) as root:
        assert root.exists(top) is None


@pytest.mark.integration
def test_zk_connect_gives_each_test_its_own_existing_chroot(
    zk_connect: str, zookeeper: zkp.ZooKeeper
) -> None:
    hosts, chroot = zkp.split_chroot(zk_connect)
    assert chroot.startswith(zkp.split_chroot(zookeeper.connect_string)[1] + "/tests/")
    assert "zk_connect_gives_each_test" in chroot
    with _client(hosts) as root:
        assert root.exists(chroot) is not None
    with _client(zk_connect) as zk:
        assert zk.get_children("/") == []


@pytest.mark.integration
@pytest.mark.slow
def test_ensemble_keeps_serving_when_a_member_is_sigkilled(
    zk_ensemble: zkp.LocalZooKeeper,
) -> None:
    assert len(zk_ensemble.servers) == 3
    assert sorted(s.mode() or "" for s in zk_ensemble.servers) == ["follower", "follower", "leader"]
    with _client(zk_ensemble.connect_string) as zk:
        zk.create("/survivor", b"before")
        session_id = zk.client_id[0]
        victim = zk_ensemble.leader()  # the leader: its loss forces an election as well
        assert victim is not None
        old_pid, port = victim.pid, victim.client_port
        assert old_pid is not None

        victim.kill()
        assert not victim.is_running()
        assert not _alive(old_pid)
        assert zk_ensemble.wait_quorum(timeout=30) is not victim
        _retry(lambda: zk.set_async("/survivor", b"after").get(timeout=5))
        assert _retry(lambda: zk.get_async("/survivor").get(timeout=5))[0] == b"after"
        assert zk.client_id[0] == session_id  # the client moved to a survivor, same session

        victim.restart(timeout=30)
        assert victim.pid != old_pid
        assert victim.client_port == port
        assert victim.mode() in ("follower", "leader")
        zk_ensemble.wait_ready(timeout=30)
    # The rejoined member caught up with the write made while it was dead.
    with _client(victim.address) as only_victim:
        only_victim.sync("/survivor")
        assert only_victim.get("/survivor")[0] == b"after"


def test_explicit_connect_string_is_used_as_is(monkeypatch: pytest.MonkeyPatch) -> None:
    def must_not_run(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("nothing may be started for an explicit connect string")

    monkeypatch.setattr(zkp, "docker_available", must_not_run)
    monkeypatch.setattr(zkp, "start_local", must_not_run)
    monkeypatch.setattr(zkp, "start_container", must_not_run)
    before = zkp.started_pids()

    given = "zk1.example:2181,zk2.example:2181/kafka"
    handle = zkp.provision(given)
    assert isinstance(handle, zkp.ExternalZooKeeper)
    assert handle.connect_string == given

    monkeypatch.setenv(zkp.ENV_CONNECT, "10.0.0.7:2181")
    assert zkp.provision().connect_string == "10.0.0.7:2181"
    assert zkp.provision(given).connect_string == given  # the explicit one wins

    assert zkp.ZooKeeper.from_dict(handle.to_dict()).connect_string == given
    handle.close()
    assert zkp.started_pids() == before


def test_no_way_available_names_the_three_ways(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(zkp.ENV_CONNECT, raising=False)
    monkeypatch.setenv("ZOOKEEPER_HOME", str(tmp_path))  # an empty directory
    monkeypatch.setenv(zkp.ENV_DISABLE, "docker,debian")
    before = zkp.started_pids()
    with pytest.raises(zkp.ZooKeeperUnavailableError) as provision_error:
        zkp.provision()
    message = str(provision_error.value)
    for needle in (
        "--zookeeper",
        zkp.ENV_CONNECT,
        "Docker engine",
        "ZOOKEEPER_HOME",
        "Debian's zookeeper package",
        "root on Debian",
        str(tmp_path),  # why the given ZOOKEEPER_HOME did not do
    ):
        assert needle in message
    with pytest.raises(zkp.ZooKeeperUnavailableError, match="ZOOKEEPER_HOME"):
        zkp.start_local(3)
    assert zkp.started_pids() == before


@pytest.mark.integration
def test_zookeeper_home_distribution_layout(tmp_path: Path) -> None:
    env = {"PATH": os.environ.get("PATH", ""), zkp.ENV_DISABLE: "home"}
    debian = zkp.find_local_install(env)
    if debian is None:
        pytest.skip("builds a ZOOKEEPER_HOME from Debian's jars, which are not installed")
    (tmp_path / "lib").mkdir()
    for jar in debian.classpath:
        (tmp_path / "lib" / Path(jar).name).symlink_to(jar)
    env = {"PATH": env["PATH"], "ZOOKEEPER_HOME": str(tmp_path), zkp.ENV_DISABLE: "debian"}
    install = zkp.find_local_install(env)
    assert install is not None
    assert install.description == f"ZOOKEEPER_HOME={tmp_path}"
    with zkp.start_local(1, install=install, base_dir=tmp_path / "run") as handle:
        assert handle.servers[0].mode() == "standalone"


@pytest.mark.integration
def test_busy_port_is_retried_and_a_dead_server_names_its_log(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_free_ports = zkp._free_ports
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        busy_port = busy.getsockname()[1]

        monkeypatch.setattr(zkp, "_free_ports", lambda count: [busy_port])
        with pytest.raises(zkp.ZooKeeperStartError) as error:
            zkp.start_local(1, attempts=1)
        log_file = error.value.log_file
        assert log_file is not None
        assert str(log_file) in str(error.value)
        assert "already in use" in str(error.value)
        assert "Address already in use" in log_file.read_text()

        calls: list[int] = []

        def busy_first(count: int) -> list[int]:
            calls.append(count)
            return [busy_port] if len(calls) == 1 else real_free_ports(count)

        monkeypatch.setattr(zkp, "_free_ports", busy_first)
        messages: list[str] = []
        with zkp.start_local(1, progress=messages.append) as handle:
            assert handle.servers[0].client_port != busy_port
            assert handle.servers[0].mode() == "standalone"
        assert len(calls) == 2
        assert any("retrying on other ports" in m for m in messages)
    # A failed start keeps its directory so the log can be read; this test is done with it.
    shutil.rmtree(log_file.parents[1], ignore_errors=True)


@pytest.mark.integration
def test_attached_server_dies_with_its_parent(tmp_path: Path) -> None:
    script = (
        "import sys, time\n"
        "from cluster import zookeeper as zkp\n"
        "handle = zkp.start_local(1, base_dir=sys.argv[1])\n"
        "print(handle.servers[0].pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    pid = 0
    try:
        pid = int(_read_line(parent, 60))
        assert _alive(pid)
        parent.kill()  # SIGKILL: no atexit, no close(); only the death signal is left
        parent.wait(10)
        assert _eventually(lambda: not _alive(pid), 10), "the server outlived its parent"
    finally:
        parent.kill()
        parent.wait(10)
        if pid:
            _kill_if_ours(pid, str(tmp_path))


@pytest.mark.integration
def test_detached_server_outlives_its_starter_round_trips_and_stops_by_pid(
    tmp_path: Path,
) -> None:
    script = (
        "import json, sys\n"
        "from cluster import zookeeper as zkp\n"
        "handle = zkp.start_local(1, detached=True, base_dir=sys.argv[1])\n"
        "print(json.dumps(handle.to_dict()))\n"
    )
    starter = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=90,
        check=True,
    )
    data = json.loads(starter.stdout.splitlines()[-1])
    pid = data["servers"][0]["pid"]
    try:
        handle = zkp.ZooKeeper.from_dict(data)
        assert isinstance(handle, zkp.LocalZooKeeper)
        assert handle.to_dict() == data
        assert json.loads(json.dumps(handle.to_dict())) == data
        server = handle.servers[0]
        assert server.pid == pid
        assert server.is_running()  # its starter has exited
        assert os.getsid(pid) == pid  # a session of its own
        assert server.mode() == "standalone"
        with _client(handle.connect_string) as zk:
            zk.create("/detached", b"yes")
        handle.close()
        assert not _alive(pid)
        assert not server.is_running()
        assert (tmp_path / "server-1" / "zookeeper.log").is_file()  # a given base_dir is kept
    finally:
        _kill_if_ours(pid, str(tmp_path))


@pytest.mark.integration
def test_stop_by_pid_leaves_other_processes_alone(tmp_path: Path) -> None:
    with zkp.start_local(1, detached=True, base_dir=tmp_path / "real") as real:
        # A handle whose pid runs ZooKeeper, but with another config: not ours to stop.
        impostor = real.to_dict()
        impostor["servers"][0]["server_dir"] = str(tmp_path / "other")
        zkp.ZooKeeper.from_dict(impostor).close()
        assert real.servers[0].is_running()
        assert real.servers[0].mode() == "standalone"

        # A handle whose pid is not java at all.
        with subprocess.Popen(["sleep", "60"]) as sleeper:
            try:
                stranger = real.to_dict()
                stranger["servers"][0]["pid"] = sleeper.pid
                zkp.ZooKeeper.from_dict(stranger).close()
                assert sleeper.poll() is None
            finally:
                sleeper.kill()


@pytest.mark.integration
def test_a_start_interrupted_while_waiting_stops_what_it_launched(tmp_path: Path) -> None:
    """A Ctrl-C (KeyboardInterrupt) while a detached server starts: what was launched is
    stopped, or it would run on in a session of its own with no handle to stop it by."""

    def interrupt(message: str) -> None:
        if message.startswith("waiting for ZooKeeper server"):
            raise KeyboardInterrupt

    # The entries recorded since, not the pids absent before: the suite starts thousands of
    # processes, and a pid it recorded earlier is reused once pids wrap around.
    before = len(zkp.started_pids())
    with pytest.raises(KeyboardInterrupt):
        zkp.start_local(1, detached=True, base_dir=tmp_path, progress=interrupt)
    launched = zkp.started_pids()[before:]
    try:
        assert launched, "a server was launched"
        assert [pid for pid in launched if _alive(pid)] == []
    finally:
        for pid in launched:
            _kill_if_ours(pid, str(tmp_path))


@pytest.mark.integration
def test_a_port_taken_by_another_zookeeper_is_not_taken_for_ours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two starts raced for one free port: the second server's wait asked `srvr` of the
    port, got the first server's answer, and start_local returned a handle whose own server
    had died on "Address already in use" (and whose connect string was the other's
    ZooKeeper); the retry on other ports, made for this very race, never ran. A server is
    ready only when the one answering is ours (its `conf` names our data directory)."""
    first = zkp.start_local(1, base_dir=tmp_path / "first", timeout=60)
    second = None
    try:
        taken = first.servers[0].client_port
        real_free_ports = zkp._free_ports
        calls: list[int] = []

        def racing(count: int) -> list[int]:
            calls.append(count)
            return [taken] if len(calls) == 1 else real_free_ports(count)

        monkeypatch.setattr(zkp, "_free_ports", racing)
        messages: list[str] = []
        second = zkp.start_local(
            1, base_dir=tmp_path / "second", timeout=60, progress=messages.append
        )
        server = second.servers[0]
        assert len(calls) == 2, "the start was not retried on other ports"
        assert server.client_port != taken
        assert any("retrying on other ports" in m for m in messages)
        assert server.is_running()
        conf = zkp.four_letter_word("127.0.0.1", server.client_port, "conf") or ""
        assert str(server.data_dir) in conf
    finally:
        if second is not None:
            second.close()
        first.close()
