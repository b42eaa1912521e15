"""cluster.zookeeper without a ZooKeeper: what a start that fails or is interrupted leaves
behind (a container; the errors of an ensemble whose ports were taken), and the zoo.cfg a
local server is given."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import parse_properties
from cluster import zookeeper as zkp


class FakeContainer:
    """Stands in for a testcontainers container: what ContainerZooKeeper.close() stops."""

    def __init__(self) -> None:
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True


@pytest.fixture
def container(monkeypatch: pytest.MonkeyPatch) -> FakeContainer:
    """The container start_container(detached=True) gets, running and never serving."""
    fake = FakeContainer()
    handle = zkp.ContainerZooKeeper("127.0.0.1:1", "0123456789abcdef", container=fake)
    monkeypatch.setattr(zkp, "_start_detached_container", lambda: handle)
    return fake


def test_a_container_start_interrupted_while_waiting_removes_the_container(
    container: FakeContainer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def ctrl_c(*_args: object, **_kwargs: object) -> str | None:
        raise KeyboardInterrupt

    monkeypatch.setattr(zkp, "four_letter_word", ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        zkp.start_container(detached=True, timeout=5)
    assert container.stopped


def test_a_container_whose_recording_fails_is_removed(container: FakeContainer) -> None:
    def on_start(handle: zkp.ZooKeeper) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        zkp.start_container(detached=True, timeout=5, on_start=on_start)
    assert container.stopped


def test_a_container_never_serving_is_removed_and_named(
    container: FakeContainer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(zkp, "four_letter_word", lambda *_args, **_kwargs: None)
    started: list[zkp.ZooKeeper] = []
    with pytest.raises(zkp.ZooKeeperStartError, match="container 0123456789ab not serving"):
        zkp.start_container(detached=True, timeout=0, on_start=started.append)
    assert [h.connect_string for h in started] == ["127.0.0.1:1"]
    assert container.stopped


# --- an ensemble's bind errors ------------------------------------------------------------


def _member(base: Path, myid: int, before: str, since: str) -> zkp.LocalServer:
    """A member that was started once, with ``before`` in its log from an earlier run and
    ``since`` written since it started."""
    server = zkp.LocalServer(
        myid=myid,
        client_port=20000 + myid,
        quorum_port=21000 + myid,
        election_port=22000 + myid,
        server_dir=base / f"server-{myid}",
        argv=["java"],
        detached=True,
    )
    server.server_dir.mkdir(parents=True)
    server.log_file.write_text(before)
    server._log_offset = len(before.encode())
    with server.log_file.open("a") as log:
        log.write(since)
    return server


BIND_ERROR = "java.net.BindException: Address already in use\n"


def _waiting_times_out(server: zkp.LocalServer, monkeypatch: pytest.MonkeyPatch) -> None:
    def wait_ready(timeout: float = 30.0) -> str:
        raise server._start_error(f"was not ready after {timeout:.0f} s")

    monkeypatch.setattr(server, "wait_ready", wait_ready)


def test_an_ensemble_member_that_lost_a_port_is_named_and_the_start_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The elected leader could not bind its quorum port (taken since it was chosen); the
    member waited for only times out looking for a leader. The error says a port was in use,
    so start_local retries, and names the log that holds the bind error; an earlier run's
    bind error, before a member's start, counts for nothing."""
    waited = _member(tmp_path, 1, "", "LOOKING\n")
    leader = _member(tmp_path, 2, "", "LEADING\n" + BIND_ERROR)
    old = _member(tmp_path, 3, BIND_ERROR, "FOLLOWING\n")
    _waiting_times_out(waited, monkeypatch)
    ensemble = zkp.LocalZooKeeper([waited, leader, old], tmp_path, detached=True, owns_dir=False)
    with pytest.raises(zkp.ZooKeeperStartError) as error:
        ensemble.wait_ready(1)
    assert error.value.port_in_use
    message = str(error.value)
    assert message.startswith("ZooKeeper server 1 (pid None) on 127.0.0.1:20001 was not ready")
    assert f"ZooKeeper server 2 found a port already in use, see {leader.log_file}" in message
    assert str(old.log_file) not in message
    assert error.value.log_file == leader.log_file


def test_an_ensemble_without_bind_errors_raises_the_members_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    waited = _member(tmp_path, 1, "", "LOOKING\n")
    others = [_member(tmp_path, i, BIND_ERROR, "LOOKING\n") for i in (2, 3)]
    _waiting_times_out(waited, monkeypatch)
    ensemble = zkp.LocalZooKeeper([waited, *others], tmp_path, detached=True, owns_dir=False)
    with pytest.raises(zkp.ZooKeeperStartError) as error:
        ensemble.wait_ready(1)
    assert not error.value.port_in_use
    assert error.value.log_file == waited.log_file
    assert "already in use" not in str(error.value)


# --- whose answer a server's wait takes ------------------------------------------------------


def _answering(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data_dir: Path) -> zkp.LocalServer:
    """A running member whose port answers as a standalone server with ``data_dir``."""
    server = _member(tmp_path, 1, "", "")
    monkeypatch.setattr(server, "is_running", lambda: True)
    answers = {
        "srvr": "Zookeeper version: 3.8\nMode: standalone\n",
        "conf": f"clientPort=20001\ndataDir={data_dir}/version-2\ntickTime=500\n",
    }
    monkeypatch.setattr(zkp, "four_letter_word", lambda _h, _p, word, _t=2.0: answers[word])
    return server


def test_a_server_is_ready_when_the_answer_on_its_port_is_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = _answering(tmp_path, monkeypatch, tmp_path / "server-1" / "data")
    assert server.wait_ready(1) == "standalone"


def test_another_servers_answer_on_its_port_is_a_port_in_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two starts chose the same free port and the other bound it first: its answer made
    ours ready, start_local returned a handle to a server dying of "Address already in
    use", and never retried on other ports."""
    server = _answering(tmp_path, monkeypatch, tmp_path / "elsewhere" / "data")
    with pytest.raises(zkp.ZooKeeperStartError) as error:
        server.wait_ready(1)
    assert error.value.port_in_use
    assert "found another ZooKeeper server" in str(error.value)
    assert str(tmp_path / "elsewhere" / "data") in str(error.value)


# --- zoo.cfg ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["projekt-\u00fcbung", "back\\slash", "emoji-\U0001f600"])
def test_zoo_cfg_names_the_data_dir_as_java_reads_it(tmp_path: Path, name: str) -> None:
    """ZooKeeper reads zoo.cfg with Properties.load(InputStream): ISO-8859-1, backslash
    escapes. Written raw, a cluster directory named "projekt-übung" or "back\\slash" gave
    ZooKeeper another data directory, outside the cluster's, and `zkctl up` failed as if a
    port were in use."""
    data_dir = tmp_path / name / "server-1" / "data"
    text = zkp._config_text(data_dir, 2181, [(1, 2888, 3888), (2, 2889, 3889)])
    read = parse_properties(text.encode("utf-8").decode("iso-8859-1"))
    assert read["dataDir"] == str(data_dir)
    assert read["clientPort"] == "2181"
    assert read["server.2"] == "127.0.0.1:2889:3889"
    assert read["4lw.commands.whitelist"] == "*"
