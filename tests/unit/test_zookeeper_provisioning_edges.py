"""cluster.zookeeper without a ZooKeeper: the order of the three ways and what the error
says when none works, the local install found (ZOOKEEPER_HOME, Debian's package), the
chroots and handles, and how a server process is started, waited for and stopped. A
"server" here is a Python child whose command line looks like ZooKeeper's (a ``java``
running QuorumPeerMain with our zoo.cfg), stopped by pid after each test."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster import zookeeper as zkp
from tests.unit.test_zookeeper_start import BIND_ERROR, _member, _waiting_times_out

# --- the three ways ------------------------------------------------------------------------


@pytest.fixture
def no_way(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No connect string, Docker switched off, no ZOOKEEPER_HOME, no Debian package."""
    monkeypatch.delenv(zkp.ENV_CONNECT, raising=False)
    monkeypatch.delenv("ZOOKEEPER_HOME", raising=False)
    monkeypatch.setenv(zkp.ENV_DISABLE, "docker")
    monkeypatch.setattr(zkp, "DEBIAN_JAVA_DIR", tmp_path / "no-java-dir")


def test_a_connect_string_is_used_as_is_before_any_other_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(zkp, "docker_available", lambda: pytest.fail("Docker was asked"))
    monkeypatch.setenv(zkp.ENV_CONNECT, "ignored:1")
    handle = zkp.provision("h1:1,h2:2/c")
    assert isinstance(handle, zkp.ExternalZooKeeper)
    assert handle.connect_string == "h1:1,h2:2/c"
    monkeypatch.setenv(zkp.ENV_CONNECT, "  h3:3/d ")
    assert zkp.provision().connect_string == "h3:3/d"


def test_a_blank_environment_connect_string_is_no_connect_string(
    no_way: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(zkp.ENV_CONNECT, "   ")
    with pytest.raises(zkp.ZooKeeperUnavailableError):
        zkp.provision()


def test_nothing_available_names_the_three_ways_and_what_was_checked(no_way: None) -> None:
    with pytest.raises(zkp.ZooKeeperUnavailableError) as error:
        zkp.provision()
    message = str(error.value)
    assert "--zookeeper host:port" in message
    assert f"{zkp.ENV_CONNECT}=host:port" in message
    assert "Docker engine" in message
    assert "ZOOKEEPER_HOME" in message
    assert "Debian's zookeeper package" in message
    assert f"  - no connect string given and {zkp.ENV_CONNECT} is not set" in message
    assert f"  - Docker: disabled by {zkp.ENV_DISABLE}" in message
    assert "  - ZOOKEEPER_HOME is not set" in message
    assert "  - Debian package:" in message


def test_docker_without_testcontainers_says_so(
    no_way: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(zkp.ENV_DISABLE, "")
    monkeypatch.setattr(zkp, "docker_available", lambda: False)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "testcontainers" else real_find_spec(name, *a),
    )
    with pytest.raises(zkp.ZooKeeperUnavailableError, match="testcontainers is not installed"):
        zkp.provision()


def test_a_docker_engine_gives_a_container_with_at_least_two_minutes_to_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(zkp.ENV_CONNECT, raising=False)
    monkeypatch.setattr(zkp, "docker_available", lambda: True)
    seen: dict[str, Any] = {}
    container = zkp.ContainerZooKeeper("127.0.0.1:1", "c0ffee")

    def start_container(**kwargs: Any) -> zkp.ContainerZooKeeper:
        seen.update(kwargs)
        return container

    monkeypatch.setattr(zkp, "start_container", start_container)
    monkeypatch.setattr(zkp, "start_local", lambda *a, **k: pytest.fail("started locally"))
    assert zkp.provision(timeout=5, detached=True) is container
    assert seen["timeout"] == 120.0
    assert seen["detached"] is True
    assert zkp.provision(timeout=300) is container
    assert seen["timeout"] == 300


def test_a_local_install_gets_the_base_dir_and_on_start(
    no_way: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install = zkp.LocalInstall("java", (), "an install")
    monkeypatch.setattr(zkp, "_probe_local", lambda: (install, []))
    seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def start_local(*args: Any, **kwargs: Any) -> zkp.ExternalZooKeeper:
        seen.append((args, kwargs))
        return zkp.ExternalZooKeeper("127.0.0.1:1")

    def on_start(_handle: zkp.ZooKeeper) -> None:
        pass

    monkeypatch.setattr(zkp, "start_local", start_local)
    zkp.provision(base_dir=tmp_path, on_start=on_start, timeout=7)
    [(args, kwargs)] = seen
    assert args == (1,)
    assert kwargs["base_dir"] == tmp_path
    assert kwargs["install"] is install
    assert kwargs["on_start"] is on_start
    assert kwargs["timeout"] == 7


@pytest.mark.parametrize("value", ["DOCKER", " docker , home", "home,Docker"])
def test_disabled_ways_are_read_whatever_their_case_and_spacing(value: str) -> None:
    assert "docker" in zkp._disabled({zkp.ENV_DISABLE: value})


class _FakeDockerClient:
    def ping(self) -> bool:
        return True

    def close(self) -> None:
        pass


def test_docker_switched_off_is_not_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    import docker

    monkeypatch.setattr(docker, "from_env", lambda **_kw: _FakeDockerClient())
    monkeypatch.setenv(zkp.ENV_DISABLE, "")
    assert zkp.docker_available()
    monkeypatch.setenv(zkp.ENV_DISABLE, "docker")
    assert not zkp.docker_available()


def test_docker_without_testcontainers_is_not_available(monkeypatch: pytest.MonkeyPatch) -> None:
    import docker

    monkeypatch.setattr(docker, "from_env", lambda **_kw: _FakeDockerClient())
    monkeypatch.setenv(zkp.ENV_DISABLE, "")
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "testcontainers" else real_find_spec(name, *a),
    )
    assert not zkp.docker_available()


def test_the_container_is_configured_as_a_local_server_is() -> None:
    env = zkp._container_env()
    assert env["ZOO_TICK_TIME"] == "500"
    assert env["ZOO_4LW_COMMANDS_WHITELIST"] == "*"
    assert env["ZOO_MAX_CLIENT_CNXNS"] == "0"
    assert "minSessionTimeout=1000" in env["ZOO_CFG_EXTRA"]
    assert "maxSessionTimeout=60000" in env["ZOO_CFG_EXTRA"]


def test_a_container_handle_is_stopped_once() -> None:
    class Container:
        stops = 0

        def stop(self) -> None:
            self.stops += 1

    container = Container()
    with zkp.ContainerZooKeeper("127.0.0.1:1", "c0ffee", container=container) as handle:
        handle.close()
    assert container.stops == 1


# --- the local install ---------------------------------------------------------------------


def _jar(path: Path, *entries: str, manifest: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        for entry in entries:
            zf.writestr(entry, b"")
        if manifest is not None:
            zf.writestr("META-INF/MANIFEST.MF", manifest)
    return path


MAIN_ENTRY = zkp.MAIN_CLASS.replace(".", "/") + ".class"


def test_java_home_comes_before_the_path(tmp_path: Path) -> None:
    for where in ("home/bin", "path"):
        (tmp_path / where).mkdir(parents=True)
        (tmp_path / where / "java").write_text("#!/bin/sh\n")
        (tmp_path / where / "java").chmod(0o755)
    path = str(tmp_path / "path")
    home = str(tmp_path / "home")
    assert zkp._find_java({"PATH": path, "JAVA_HOME": home}) == f"{home}/bin/java"
    assert zkp._find_java({"PATH": path}) == f"{path}/java"
    assert zkp._find_java({"PATH": str(tmp_path / "none")}) is None


def test_a_zookeeper_home_distribution_gives_conf_and_every_jar(tmp_path: Path) -> None:
    home = tmp_path / "apache-zookeeper-3.8.4-bin"
    (home / "conf").mkdir(parents=True)
    top = _jar(home / "zookeeper-3.8.4.jar", "x/Other.class")
    lib = [_jar(home / "lib" / "zookeeper-jute.jar"), _jar(home / "lib" / "zk.jar", MAIN_ENTRY)]
    classpath, note = zkp._home_classpath(home)
    assert classpath == [str(home / "conf"), str(top), *sorted(map(str, lib))]
    assert note == f"ZOOKEEPER_HOME={home}"


def test_a_zookeeper_home_without_the_main_class_is_refused(tmp_path: Path) -> None:
    _jar(tmp_path / "lib" / "zookeeper.jar", "org/apache/zookeeper/ZooKeeper.class")
    # The class named with dots, as a zip entry, is not the class.
    _jar(tmp_path / "dotted.jar", zkp.MAIN_CLASS + ".class")
    (tmp_path / "lib" / "broken.jar").write_text("not a zip")
    classpath, note = zkp._home_classpath(tmp_path)
    assert classpath is None
    assert "no jar with" in note


DEBIAN_REQUIRED = [*zkp._DEBIAN_REQUIRED, "netty-transport-native-unix-common"]


def _debian(java_dir: Path, *, manifest: str, binding: str | None = "slf4j-simple") -> None:
    _jar(java_dir / "zookeeper.jar", MAIN_ENTRY, manifest=manifest)
    for name in DEBIAN_REQUIRED:
        _jar(java_dir / f"{name}.jar")
    if binding:
        _jar(java_dir / f"{binding}.jar")


def test_debians_classpath_follows_the_folded_manifest_and_adds_a_binding(
    tmp_path: Path,
) -> None:
    _jar(tmp_path / "commons-cli.jar")
    _jar(tmp_path / "audience-annotations.jar")
    # A manifest line wraps at 72 bytes, the continuation starting with a space.
    manifest = (
        "Manifest-Version: 1.0\r\nClass-Path: slf4j-api.jar commons-\r\n cli.jar"
        " audience-annotations.jar\r\nCreated-By: test\r\n"
    )
    _debian(tmp_path, manifest=manifest)
    classpath, note = zkp._debian_classpath(tmp_path)
    assert classpath is not None
    jars = [Path(p).name for p in classpath]
    assert jars[0] == "zookeeper.jar"
    assert "commons-cli.jar" in jars
    assert "audience-annotations.jar" in jars
    assert {"zookeeper-jute.jar", "netty-codec.jar", "netty-resolver.jar"} <= set(jars)
    assert jars[-1] == "slf4j-simple.jar"
    assert len(jars) == len(set(jars))
    assert note == f"Debian's zookeeper package in {tmp_path}"


def test_debians_package_missing_a_jar_is_refused_naming_it(tmp_path: Path) -> None:
    _debian(tmp_path, manifest="Manifest-Version: 1.0\n")
    (tmp_path / "netty-codec.jar").unlink()
    classpath, note = zkp._debian_classpath(tmp_path)
    assert classpath is None
    assert note == f"Debian package: missing jars in {tmp_path}: netty-codec"


@pytest.fixture
def java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A java on the PATH, a ZOOKEEPER_HOME distribution and a Debian package directory."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "java").write_text("#!/bin/sh\n")
    (bin_dir / "java").chmod(0o755)
    _jar(tmp_path / "home" / "lib" / "zookeeper.jar", MAIN_ENTRY)
    _debian(tmp_path / "debian", manifest="Manifest-Version: 1.0\n")
    monkeypatch.setattr(zkp, "DEBIAN_JAVA_DIR", tmp_path / "debian")
    return bin_dir / "java"


def test_zookeeper_home_comes_before_debians_package(java: Path, tmp_path: Path) -> None:
    env = {"PATH": str(java.parent), "ZOOKEEPER_HOME": str(tmp_path / "home")}
    install, reasons = zkp._probe_local(env)
    assert install is not None
    assert install.java == str(java)
    assert install.description == f"ZOOKEEPER_HOME={tmp_path / 'home'}"
    assert reasons == []
    env["ZOOKEEPER_HOME"] = str(tmp_path / "empty")
    install, reasons = zkp._probe_local(env)
    assert install is not None
    assert install.description.startswith("Debian's zookeeper package")
    assert reasons == [
        f"ZOOKEEPER_HOME={tmp_path / 'empty'}: no jar with {zkp.MAIN_CLASS} in it or in its lib/"
    ]


def test_each_local_way_can_be_switched_off(java: Path, tmp_path: Path) -> None:
    env = {
        "PATH": str(java.parent),
        "ZOOKEEPER_HOME": str(tmp_path / "home"),
        zkp.ENV_DISABLE: "home",
    }
    install, reasons = zkp._probe_local(env)
    assert install is not None
    assert install.description.startswith("Debian's")
    assert reasons == [f"ZOOKEEPER_HOME: disabled by {zkp.ENV_DISABLE}"]
    env[zkp.ENV_DISABLE] = "home,debian"
    install, reasons = zkp._probe_local(env)
    assert install is None
    assert reasons[-1] == f"Debian package: disabled by {zkp.ENV_DISABLE}"
    assert zkp.find_local_install(env) is None


def test_no_java_is_the_reason(tmp_path: Path) -> None:
    install, reasons = zkp._probe_local({"PATH": str(tmp_path)})
    assert install is None
    assert reasons == ["no java on PATH or in JAVA_HOME"]


# --- four-letter words and chroots ---------------------------------------------------------


def _one_answer(answer: bytes) -> tuple[int, threading.Thread]:
    """A loopback port that reads a word and answers ``answer`` once."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def serve() -> None:
        with server:
            conn, _ = server.accept()
            with conn:
                conn.recv(4)
                conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return port, thread


def test_a_four_letter_word_answered_with_nothing_is_no_answer() -> None:
    port, thread = _one_answer(b"")
    assert zkp.four_letter_word("127.0.0.1", port, "srvr", timeout=10) is None
    thread.join(10)
    port, thread = _one_answer(b"Mode: follower\n")
    answer = zkp.four_letter_word("127.0.0.1", port, "srvr", timeout=10)
    assert zkp._mode_from_srvr(answer) == "follower"
    thread.join(10)


def test_the_data_dir_a_conf_answer_names_is_ours_with_or_without_version_2(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    answer = f"clientPort=1\ndataDir={data}/version-2\ndataLogDir={data}/version-2\n"
    assert zkp._data_dir_from_conf(answer) == f"{data}/version-2"
    assert zkp._is_data_dir(f"{data}/version-2", data)
    assert zkp._is_data_dir(str(data), data)
    assert not zkp._is_data_dir(f"{tmp_path}/other/version-2", data)
    assert zkp._data_dir_from_conf(None) is None


@pytest.mark.parametrize(
    ("connect", "split"),
    [
        ("h1:1,h2:2", ("h1:1,h2:2", "")),
        ("h1:1,h2:2/a/b", ("h1:1,h2:2", "/a/b")),
        ("h:1/a/", ("h:1", "/a")),
        ("h:1/", ("h:1", "")),
        ("/a", ("", "/a")),
    ],
)
def test_split_chroot(connect: str, split: tuple[str, str]) -> None:
    assert zkp.split_chroot(connect) == split


def test_a_chroot_nests_under_the_one_given() -> None:
    assert zkp.chroot_connect_string("h:1/a/", "/b/c/", create=False) == "h:1/a/b/c"
    assert zkp.chroot_connect_string("h:1", "t", create=False) == "h:1/t"
    with pytest.raises(ValueError, match="empty chroot"):
        zkp.chroot_connect_string("h:1", "/", create=False)


def test_a_chroot_is_created_unless_asked_not_to(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple[str, str]] = []

    class Client:
        def __init__(self, hosts: str) -> None:
            self.hosts = hosts

        def ensure_path(self, path: str) -> None:
            made.append((self.hosts, path))

    def kazoo_client(hosts: str, _timeout: float) -> Any:
        import contextlib

        return contextlib.nullcontext(Client(hosts))

    monkeypatch.setattr(zkp, "kazoo_client", kazoo_client)
    assert zkp.chroot_connect_string("h:1,h:2/a", "b") == "h:1,h:2/a/b"
    zkp.chroot_connect_string("h:1/a", "b", create=False)
    assert made == [("h:1,h:2", "/a/b")]
    # Deleting one: tests/integration/test_zk_delete_tree.py. Never the root.
    with pytest.raises(ValueError, match="refusing to delete '/'"):
        zkp.delete_chroot("h:1/")


# --- handles -------------------------------------------------------------------------------


def _server_dict(tmp_path: Path, **changes: Any) -> dict[str, Any]:
    server = zkp.LocalServer(
        myid=2,
        client_port=20002,
        quorum_port=21002,
        election_port=22002,
        server_dir=tmp_path / "server-2",
        argv=["java", zkp.MAIN_CLASS, str(tmp_path / "server-2" / "zoo.cfg")],
        detached=True,
        pid=4242,
    )
    return {**server.to_dict(), **changes}


def test_handles_round_trip(tmp_path: Path) -> None:
    local = {
        "kind": "local",
        "connect_string": "127.0.0.1:20002",
        "base_dir": str(tmp_path),
        "detached": True,
        "owns_dir": False,
        "servers": [_server_dict(tmp_path)],
    }
    for data in (
        {"kind": "external", "connect_string": "h:1/c"},
        {"kind": "container", "connect_string": "h:2", "container_id": "c0ffee"},
        local,
    ):
        zkp.ZooKeeper.check_dict(data)
        handle = zkp.ZooKeeper.from_dict(data)
        assert handle.kind == data["kind"]
        assert handle.to_dict() == data
    rebuilt = zkp.ZooKeeper.from_dict(local)
    assert isinstance(rebuilt, zkp.LocalZooKeeper)
    assert rebuilt.pids == [4242]
    assert rebuilt.server(2).quorum_port == 21002


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (["kind", "external"], TypeError),
        ({"kind": "cloud", "connect_string": "h:1"}, ValueError),
        ({"connect_string": "h:1"}, ValueError),
        ({"kind": "external", "connect_string": 2181}, TypeError),
        ({"kind": "container", "connect_string": "h:1"}, TypeError),
        ({"kind": "local", "base_dir": "d", "detached": 1, "owns_dir": False, "servers": []},
         TypeError),
        ({"kind": "local", "base_dir": "d", "detached": True, "servers": []}, TypeError),
        ({"kind": "local", "base_dir": "d", "detached": True, "owns_dir": False,
          "servers": ["s"]}, TypeError),
        ({"kind": "local", "base_dir": "d", "detached": True, "owns_dir": False,
          "servers": [{"myid": 1, "client_port": "2181", "server_dir": "d", "argv": [],
                       "detached": True}]}, TypeError),
    ],
)  # fmt: skip
def test_a_handle_of_another_shape_is_refused(data: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        zkp.ZooKeeper.check_dict(data)


def test_an_attached_handle_is_stopped_at_exit_and_a_detached_one_is_not(tmp_path: Path) -> None:
    attached = zkp.LocalZooKeeper([], tmp_path, detached=False, owns_dir=False)
    detached = zkp.LocalZooKeeper([], tmp_path, detached=True, owns_dir=False)
    try:
        assert attached in zkp._LIVE
        assert detached not in zkp._LIVE
    finally:
        attached.close()
    assert attached not in zkp._LIVE


def test_close_removes_the_directory_it_owns_unless_told_otherwise(tmp_path: Path) -> None:
    for owns, remove, removed in [
        (True, None, True),
        (False, None, False),
        (True, False, False),
        (False, True, True),
    ]:
        base = tmp_path / f"{owns}-{remove}"
        base.mkdir()
        zkp.LocalZooKeeper([], base, detached=True, owns_dir=owns).close(remove_dir=remove)
        assert base.exists() != removed, (owns, remove)


# --- zoo.cfg and the ensemble's ports ------------------------------------------------------


def test_zoo_cfg_lets_tests_open_many_clients_with_short_sessions(tmp_path: Path) -> None:
    from broker.config import parse_properties

    read = parse_properties(zkp._config_text(tmp_path, 2181, None))
    assert read["maxClientCnxns"] == "0"
    assert read["clientPortAddress"] == "127.0.0.1"
    assert (read["tickTime"], read["minSessionTimeout"], read["maxSessionTimeout"]) == (
        "500",
        "1000",
        "60000",
    )
    assert not any(key.startswith("server.") for key in read)


def test_an_ensemble_gets_distinct_ports_and_each_member_its_myid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from broker.config import parse_properties

    monkeypatch.setattr(zkp, "_free_ports", lambda n: list(range(30000, 30000 + n)))
    monkeypatch.setattr(zkp.LocalServer, "start", lambda self: None)
    install = zkp.LocalInstall("java", ("zk.jar",), "an install")
    handle = zkp._launch_local(3, tmp_path, install, detached=True, owns_dir=False)
    used = [s.client_port for s in handle.servers]
    used += [p for s in handle.servers for p in (s.quorum_port, s.election_port) if p]
    assert sorted(used) == list(range(30000, 30009))
    assert handle.connect_string == "127.0.0.1:30000,127.0.0.1:30001,127.0.0.1:30002"
    for s in handle.servers:
        assert (s.data_dir / "myid").read_text() == f"{s.myid}\n"
        read = parse_properties(s.config_file.read_text())
        assert read["clientPort"] == str(s.client_port)
        assert read["dataDir"] == str(s.data_dir)
        assert read[f"server.{s.myid}"] == f"127.0.0.1:{s.quorum_port}:{s.election_port}"
        assert s.argv[-1] == str(s.config_file)
    single = zkp._launch_local(1, tmp_path / "one", install, detached=True, owns_dir=False)
    assert [(s.quorum_port, s.election_port) for s in single.servers] == [(None, None)]


def test_a_member_failing_to_start_stops_those_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(zkp, "_free_ports", lambda n: list(range(30000, 30000 + n)))
    started: list[int] = []

    def start(self: zkp.LocalServer) -> None:
        if self.myid == 2:
            raise OSError("no java")
        started.append(self.myid)

    closed: list[bool | None] = []
    monkeypatch.setattr(zkp.LocalServer, "start", start)
    monkeypatch.setattr(
        zkp.LocalZooKeeper, "close", lambda self, remove_dir=None: closed.append(remove_dir)
    )
    install = zkp.LocalInstall("java", (), "an install")
    with pytest.raises(OSError, match="no java"):
        zkp._launch_local(3, tmp_path, install, detached=True, owns_dir=True)
    assert started == [1]
    assert closed == [False]


# --- start_local's attempts ----------------------------------------------------------------


class _Launched:
    """A launch whose wait raises what it is given."""

    def __init__(self, error: BaseException | None) -> None:
        self.error = error
        self.connect_string = "127.0.0.1:1"
        self.closed: list[bool | None] = []

    def wait_ready(self, _timeout: float, _progress: object) -> None:
        if self.error is not None:
            raise self.error

    def close(self, remove_dir: bool | None = None) -> None:
        self.closed.append(remove_dir)


class _Launches(list[_Launched]):
    """What start_local launched; each launch's wait raises the next of ``errors``."""

    def __init__(self) -> None:
        super().__init__()
        self.errors: list[BaseException | None] = []

    def __call__(self, *_args: object, **_kwargs: object) -> _Launched:
        self.append(_Launched(self.errors.pop(0) if self.errors else None))
        return self[-1]


@pytest.fixture
def launches(monkeypatch: pytest.MonkeyPatch) -> _Launches:
    launched = _Launches()
    monkeypatch.setattr(zkp, "_launch_local", launched)
    return launched


INSTALL = zkp.LocalInstall("java", (), "an install")


def _port_taken() -> zkp.ZooKeeperStartError:
    return zkp.ZooKeeperStartError("port taken", port_in_use=True)


def test_a_port_taken_is_retried_up_to_the_attempts_keeping_the_logs(
    launches: _Launches, tmp_path: Path
) -> None:
    launches.errors.extend([_port_taken(), _port_taken()])
    handle = zkp.start_local(install=INSTALL, base_dir=tmp_path, attempts=3)
    last: object = launches[-1]
    assert handle is last
    assert [launch.closed for launch in launches] == [[False], [False], []]


def test_the_last_attempt_is_not_retried(launches: _Launches, tmp_path: Path) -> None:
    launches.errors.extend([_port_taken(), _port_taken(), None])
    with pytest.raises(zkp.ZooKeeperStartError, match="port taken"):
        zkp.start_local(install=INSTALL, base_dir=tmp_path, attempts=2)
    assert len(launches) == 2


def test_another_start_error_is_not_retried(launches: _Launches, tmp_path: Path) -> None:
    launches.errors.append(zkp.ZooKeeperStartError("died"))
    with pytest.raises(zkp.ZooKeeperStartError, match="died"):
        zkp.start_local(install=INSTALL, base_dir=tmp_path)
    assert [launch.closed for launch in launches] == [[False]]


def test_an_interrupted_start_stops_what_it_launched(launches: _Launches, tmp_path: Path) -> None:
    launches.errors.append(KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        zkp.start_local(install=INSTALL, base_dir=tmp_path)
    assert [launch.closed for launch in launches] == [[None]]


def test_no_servers_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        zkp.start_local(0, install=INSTALL, base_dir=tmp_path, timeout=1)


# --- an ensemble's leader and quorum -------------------------------------------------------


def _members(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *modes: str | None) -> list[Any]:
    servers = []
    for myid, mode in enumerate(modes, start=1):
        server = zkp.LocalServer(
            myid=myid,
            client_port=20000 + myid,
            server_dir=tmp_path / f"server-{myid}",
            argv=["java"],
            detached=True,
        )
        monkeypatch.setattr(server, "is_running", lambda mode=mode: mode != "dead")
        monkeypatch.setattr(server, "mode", lambda mode=mode: mode)
        servers.append(server)
    return servers


def test_a_single_server_is_its_own_leader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    [server] = _members(tmp_path, monkeypatch, "standalone")
    ensemble = zkp.LocalZooKeeper([server], tmp_path, detached=True, owns_dir=False)
    assert ensemble.leader() is server
    assert ensemble.wait_quorum(5) is server


def test_a_quorum_is_a_majority_serving_with_one_leader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    servers = _members(tmp_path, monkeypatch, "dead", "leader", "follower")
    ensemble = zkp.LocalZooKeeper(servers, tmp_path, detached=True, owns_dir=False)
    assert ensemble.wait_quorum(5) is servers[1]
    assert ensemble.leader() is servers[1]
    for modes in [("dead", "leader", None), ("leader", "dead", "dead"), ("leader", "leader", None)]:
        servers = _members(tmp_path, monkeypatch, *modes)
        ensemble = zkp.LocalZooKeeper(servers, tmp_path, detached=True, owns_dir=False)
        with pytest.raises(zkp.ZooKeeperStartError, match="no ZooKeeper quorum"):
            ensemble.wait_quorum(0)


def test_waiting_says_which_member_it_waits_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    servers = _members(tmp_path, monkeypatch, "leader", "follower")
    for server in servers:
        monkeypatch.setattr(server, "wait_ready", lambda _t: "follower")
    said: list[str] = []
    ensemble = zkp.LocalZooKeeper(servers, tmp_path, detached=True, owns_dir=False)
    ensemble.wait_ready(5, said.append)
    assert said == [
        "waiting for ZooKeeper server 1 on 127.0.0.1:20001",
        "waiting for ZooKeeper server 2 on 127.0.0.1:20002",
    ]


# --- a server process ----------------------------------------------------------------------

SLEEP = "import time; time.sleep(60)"
IGNORES_TERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
    " print('ignoring SIGTERM', flush=True); time.sleep(60)"
)
EXITS = "import sys; print('Address already in use'); sys.exit(3)"


@pytest.fixture
def fake_java(tmp_path: Path) -> Path:
    """A ``java`` that is Python (a link to the interpreter)."""
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.symlink_to(os.path.realpath(sys.executable))
    return java


@pytest.fixture
def servers() -> Iterator[list[zkp.LocalServer]]:
    """Servers a test started, SIGKILLed by pid after it."""
    started: list[zkp.LocalServer] = []
    yield started
    for server in started:
        pid = server.pid
        if pid is not None and server._proc is not None and server._proc.poll() is None:
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
            server._proc.wait(10)


def _server(
    tmp_path: Path,
    java: Path,
    servers: list[zkp.LocalServer],
    code: str = SLEEP,
    *,
    detached: bool = True,
    config: Path | None = None,
) -> zkp.LocalServer:
    server_dir = tmp_path / "server-1"
    server_dir.mkdir(parents=True, exist_ok=True)
    config = server_dir / "zoo.cfg" if config is None else config
    server = zkp.LocalServer(
        myid=1,
        client_port=1,
        server_dir=server_dir,
        argv=[str(java), "-c", code, zkp.MAIN_CLASS, str(config)],
        detached=detached,
    )
    servers.append(server)
    return server


@pytest.mark.parametrize("detached", [True, False])
def test_a_server_runs_once_and_stops(
    tmp_path: Path, fake_java: Path, servers: list[zkp.LocalServer], detached: bool
) -> None:
    server = _server(tmp_path, fake_java, servers, detached=detached)
    server.start()
    assert server.is_running()
    with pytest.raises(zkp.ZooKeeperError, match="already runs"):
        server.start()
    server.stop()
    assert not server.is_running()
    with pytest.raises(zkp.ZooKeeperError, match="not running"):
        server.pause()
    with pytest.raises(zkp.ZooKeeperError, match="not running"):
        server.resume()


def test_a_paused_server_stops_on_sigterm(
    tmp_path: Path, fake_java: Path, servers: list[zkp.LocalServer]
) -> None:
    server = _server(tmp_path, fake_java, servers)
    server.start()
    server.pause()
    server.stop(timeout=30)
    assert server._proc is not None
    assert server._proc.returncode == -signal.SIGTERM


def test_a_server_ignoring_sigterm_is_killed(
    tmp_path: Path, fake_java: Path, servers: list[zkp.LocalServer]
) -> None:
    server = _server(tmp_path, fake_java, servers, IGNORES_TERM)
    server.start()
    deadline = time.monotonic() + 30
    while "ignoring SIGTERM" not in server.log_file.read_text():
        assert time.monotonic() < deadline, "the server never started"
        time.sleep(0.01)
    server.stop(timeout=0.5)
    assert not server.is_running()
    assert server._proc is not None
    assert server._proc.returncode == -signal.SIGKILL


def test_kill_returns_once_the_server_is_gone(
    tmp_path: Path, fake_java: Path, servers: list[zkp.LocalServer]
) -> None:
    server = _server(tmp_path, fake_java, servers)
    server.start()
    pid = server.pid
    assert pid is not None
    server.kill()
    assert server._proc is not None
    assert server._proc.returncode == -signal.SIGKILL


def test_restart_stops_the_running_process_first(
    tmp_path: Path,
    fake_java: Path,
    servers: list[zkp.LocalServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = _server(tmp_path, fake_java, servers)
    monkeypatch.setattr(server, "wait_ready", lambda _timeout: "standalone")
    server.start()
    first = server._proc
    assert first is not None
    server.restart()
    assert first.returncode == -signal.SIGTERM
    assert server.is_running()
    assert server.pid != first.pid


def test_a_bind_error_of_an_earlier_run_is_not_this_ones(
    tmp_path: Path, fake_java: Path, servers: list[zkp.LocalServer]
) -> None:
    server = _server(tmp_path, fake_java, servers)
    server.log_file.write_text("java.net.BindException: Address already in use\n")
    server.start()
    assert not server.port_was_in_use()


def test_a_server_that_exits_says_so_with_its_bind_error(
    tmp_path: Path, fake_java: Path, servers: list[zkp.LocalServer]
) -> None:
    server = _server(tmp_path, fake_java, servers, EXITS)
    server.start()
    with pytest.raises(zkp.ZooKeeperStartError) as error:
        server.wait_ready(30)
    assert "exited before it was ready" in str(error.value)
    assert ", exit code 3)" in str(error.value)
    assert "a port was already in use" in str(error.value)
    assert error.value.port_in_use
    assert error.value.log_file == server.log_file


def test_a_port_answering_without_a_data_dir_is_not_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = zkp.LocalServer(
        myid=1, client_port=1, server_dir=tmp_path, argv=["java"], detached=True
    )
    monkeypatch.setattr(server, "is_running", lambda: True)
    answers = {"srvr": "Mode: standalone\n", "conf": "clientPort=1\n"}
    monkeypatch.setattr(zkp, "four_letter_word", lambda _h, _p, word, _t=2.0: answers[word])
    with pytest.raises(zkp.ZooKeeperStartError, match="was not ready after 0 s"):
        server.wait_ready(0.3)


def test_a_handle_read_back_stops_only_its_own_process(
    tmp_path: Path, fake_java: Path, servers: list[zkp.LocalServer]
) -> None:
    """Without a Popen, the pid is signalled only while it runs java's QuorumPeerMain
    with our zoo.cfg: a pid reused by another process is left alone (another server's,
    or one naming our zoo.cfg that is not java, or not QuorumPeerMain)."""
    ours = _server(tmp_path, fake_java, servers)
    ours.start()
    other_config = tmp_path / "other" / "zoo.cfg"
    other = _server(tmp_path / "o", fake_java, servers, config=other_config)
    other.start()
    python = Path(os.path.realpath(sys.executable))
    not_java = _server(tmp_path / "p", python, servers, config=ours.config_file)
    not_java.start()
    no_main = _server(tmp_path / "q", fake_java, servers, config=ours.config_file)
    no_main.argv.remove(zkp.MAIN_CLASS)
    no_main.start()
    for started in (other, not_java, no_main):
        # A handle of our server, rebuilt from a dict, that names the other's pid.
        read_back = zkp.LocalServer.from_dict({**ours.to_dict(), "pid": started.pid})
        assert not read_back.is_running()
        read_back.stop()
        read_back.kill()
        assert started.is_running()
    read_back = zkp.LocalServer.from_dict(ours.to_dict())
    assert read_back.pid == ours.pid
    assert read_back.is_running()
    read_back.stop()
    assert not read_back.is_running()
    assert ours._proc is not None
    assert ours._proc.wait(10) == -signal.SIGTERM
    assert not read_back.is_running()  # a zombie is not running


@pytest.mark.parametrize("others_clash", [False, True])
def test_a_member_whose_own_bind_error_is_raised_is_not_named_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, others_clash: bool
) -> None:
    """The member waited for found its port taken: its error says so and names its log,
    and the ensemble adds only other members' bind errors."""
    waited = _member(tmp_path, 1, "", BIND_ERROR)
    quiet = _member(tmp_path, 2, "", "LOOKING\n")
    other = _member(tmp_path, 3, "", BIND_ERROR if others_clash else "LOOKING\n")
    _waiting_times_out(waited, monkeypatch)
    ensemble = zkp.LocalZooKeeper([waited, quiet, other], tmp_path, detached=True, owns_dir=False)
    with pytest.raises(zkp.ZooKeeperStartError) as error:
        ensemble.wait_ready(1)
    assert error.value.port_in_use
    assert error.value.log_file == waited.log_file
    message = str(error.value)
    assert "ZooKeeper server 1 found a port" not in message
    if others_clash:
        assert message.endswith(f"server 3 found a port already in use, see {other.log_file}")
    else:
        assert message.endswith(f"a port was already in use; see {waited.log_file}")
