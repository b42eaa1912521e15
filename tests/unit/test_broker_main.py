"""`python -m broker` stops with a clear message, not a traceback, when it cannot start."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from broker.__main__ import main
from broker.config import load_broker_config
from broker.server import SWITCH_INTERVAL_S
from storage.log_manager import LogManager


def test_a_listener_on_a_port_in_use_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        props = tmp_path / "server.properties"
        props.write_text(
            "broker.id=1\n"
            f"listeners=CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:{port}\n"
            "listener.security.protocol.map=CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT\n"
            "inter.broker.listener.name=REPLICATION\n"
            "zookeeper.connect=127.0.0.1:1\n"
            f"log.dirs={tmp_path / 'data'}\n"
        )
        assert main([str(props)]) == 1
    err = capsys.readouterr().err
    assert (
        f"broker: socket server failed to bind to REPLICATION://127.0.0.1:{port}:"
        " Address already in use"
    ) in err
    assert "Traceback" not in err


def test_a_broker_runs_with_its_switch_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Its controller's event thread gets the GIL back sooner after each ZooKeeper wait.
    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)
        assert main([str(tmp_path / "missing.properties")]) == 1
        assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_S)
    finally:
        sys.setswitchinterval(before)
    assert "cannot read" in capsys.readouterr().err


def test_a_value_not_utf8_is_an_invalid_configuration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The file was read as UTF-8 and the UnicodeDecodeError ended in a traceback; it is
    read as ISO-8859-1 (Kafka's Properties.load), and the value is then refused."""
    props = tmp_path / "server.properties"
    props.write_bytes(b"zookeeper.connect=127.0.0.1:1\nbroker.id=\xff\n")
    assert main([str(props)]) == 1
    err = capsys.readouterr().err
    assert "invalid value '\xff' for config key 'broker.id'" in err
    assert "Traceback" not in err


def test_a_broker_on_log_dirs_another_broker_holds_stops_before_touching_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second broker started on a running broker's log.dirs is refused by the .lock, as
    in Kafka, before anything is written there: it opened the running broker's
    state-change log in its constructor (and its failed start appended its controlled
    shutdown attempts there, then overwrote the running broker's status file)."""
    running = tmp_path / "running"
    running.mkdir()
    logs = LogManager([running], load_broker_config(text="zookeeper.connect=127.0.0.1:1\n"))
    try:
        before = sorted(p.name for p in running.iterdir())
        props = tmp_path / "server.properties"
        props.write_text(
            "broker.id=1\n"
            "listeners=PLAINTEXT://127.0.0.1:0\n"
            "zookeeper.connect=127.0.0.1:1\n"
            "zookeeper.connection.timeout.ms=500\n"
            f"log.dirs={running}\n"
        )
        assert main([str(props)]) == 1
        assert sorted(p.name for p in running.iterdir()) == before
    finally:
        logs.close()
    err = capsys.readouterr().err
    assert f"broker: {running} is in use by another broker (its .lock is locked)" in err
    assert "Traceback" not in err


def test_the_same_log_dir_twice_stops_the_broker_as_a_duplicate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """log.dirs=/x,/x/ said "/x is in use by another broker" (its own first lock);
    Kafka 2.8's LogManager says "Duplicate log directory found"."""
    data = tmp_path / "data"
    props = tmp_path / "server.properties"
    props.write_text(
        "broker.id=1\n"
        "listeners=PLAINTEXT://127.0.0.1:0\n"
        "zookeeper.connect=127.0.0.1:1\n"
        f"log.dirs={data},{data}/\n"
    )
    assert main([str(props)]) == 1
    err = capsys.readouterr().err
    assert f"broker: Duplicate log directory found: {data}, {data}/ ({data}/ is {data})" in err
    assert "another broker" not in err
    assert "Traceback" not in err
    assert not data.exists()


@pytest.mark.timeout(60)  # a start that waits out its connection timeout (600 s) hangs
def test_a_zookeeper_host_that_is_no_name_stops_the_broker_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """zookeeper.connect=a..b:2181: kazoo's connection thread died on the resolver's
    UnicodeError (its traceback printed) and the start waited out the whole connection
    timeout for "Connection time-out". It is a bad value of zookeeper.connect."""
    props = tmp_path / "server.properties"
    props.write_text(
        "broker.id=1\n"
        "listeners=PLAINTEXT://127.0.0.1:0\n"
        "zookeeper.connect=a..b:2181\n"
        "zookeeper.connection.timeout.ms=600000\n"
        f"log.dirs={tmp_path / 'data'}\n"
    )
    assert main([str(props)]) == 1
    err = capsys.readouterr().err
    assert (
        "invalid value 'a..b:2181' for config key 'zookeeper.connect': expected"
        " host:port[,host:port...][/chroot]; 'a..b' is not a host name"
    ) in err
    assert "Traceback" not in err
    assert not (tmp_path / "data").exists()


def test_an_override_host_that_does_not_resolve_stops_the_broker_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kafka's broker fails to start with UnknownHostException on such a host of
    max.connections.per.ip.overrides; here, one line naming it, and nothing bound."""
    props = tmp_path / "server.properties"
    props.write_text(
        "broker.id=1\n"
        "listeners=PLAINTEXT://127.0.0.1:0\n"
        "zookeeper.connect=127.0.0.1:1\n"
        "max.connections.per.ip.overrides=127.0.0.1:5,a..b:2\n"
        f"log.dirs={tmp_path / 'data'}\n"
    )
    assert main([str(props)]) == 1
    err = capsys.readouterr().err
    assert "broker: max.connections.per.ip.overrides: cannot resolve host 'a..b'" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("file", ["broker-identity-temp", "broker-identity"])
def test_an_identity_file_that_cannot_be_written_is_a_clear_error(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    file: str,
) -> None:
    """A persistent identity's temp or final file that cannot be written (a full or
    read-only disk; here a directory where its temporary file goes) stops the broker with
    the file named, as a meta.properties that cannot be read does. Before, the OSError
    left KafkaServer's construction uncaught: a traceback."""
    from contextlib import contextmanager

    from election import identity_store
    from storage.checkpoints import temporary_path
    from tests.unit.fake_cluster import empty_cluster

    zk = empty_cluster()

    @contextmanager
    def fake_store(*_args: object, **_kwargs: object):  # type: ignore[no-untyped-def]
        yield identity_store.ZkIdentityStore(zk)  # type: ignore[arg-type]

    monkeypatch.setattr(identity_store, "zk_identity_store", fake_store)
    data = tmp_path / "data"
    temporary_path(data / file).mkdir(parents=True)
    props = tmp_path / "server.properties"
    props.write_text(
        "broker.identity.mode=persistent\nbroker.name=red\n"
        "listeners=PLAINTEXT://127.0.0.1:0\n"
        "zookeeper.connect=127.0.0.1:1\n"
        f"log.dirs={data}\n"
    )
    assert main([str(props)]) == 1
    err = capsys.readouterr().err
    assert f"broker: cannot write {data / file}: " in err
    assert "Traceback" not in err
