"""zkctl's argument types at their bounds (a partition or broker id up to a Java int's
maximum, a timeout up to MAX_SECONDS), and the ZooKeeper session's timeouts and close."""

from __future__ import annotations

import argparse
import pathlib
import shutil

import pytest
from kazoo.exceptions import ConnectionLoss

import zkdata.client
from cluster import local
from tests.unit.test_cli_args import run, sample_cluster
from zkctl.common import (
    ENV_CONNECT,
    MAX_ID,
    MAX_SECONDS,
    partition_id,
    resolve_connect,
    seconds,
    zk_session,
)


def test_a_partition_id_may_be_a_java_ints_maximum() -> None:
    assert partition_id("2147483647") == MAX_ID == 2**31 - 1
    assert partition_id("0") == 0
    with pytest.raises(argparse.ArgumentTypeError, match="2147483648 is more than 2147483647"):
        partition_id("2147483648")


def test_a_timeout_may_be_max_seconds_itself() -> None:
    assert seconds(str(MAX_SECONDS)) == MAX_SECONDS
    assert seconds("0.001") == 0.001
    with pytest.raises(argparse.ArgumentTypeError, match="is more than 1000000"):
        seconds(str(MAX_SECONDS + 1))


class RecordingClient:
    """Stands for ZkClient in zk_session: what it was made with and how it was closed."""

    made: list[RecordingClient] = []

    def __init__(self, connect: str, **timeouts: int) -> None:
        self.connect, self.timeouts = connect, timeouts
        self.closed_with: list[float] = []
        self.writes_sent = 3
        RecordingClient.made.append(self)

    def start(self) -> None:
        pass

    def exists(self, path: str) -> object:
        return object()

    def close(self, *, timeout_s: float) -> None:
        self.closed_with.append(timeout_s)


def session_args(zk_timeout: float) -> argparse.Namespace:
    return argparse.Namespace(zookeeper="127.0.0.1:2181/c", zk_timeout=zk_timeout)


@pytest.fixture
def recording(monkeypatch: pytest.MonkeyPatch) -> list[RecordingClient]:
    monkeypatch.setattr(RecordingClient, "made", [])
    monkeypatch.setattr(zkdata.client, "ZkClient", RecordingClient)
    return RecordingClient.made


def test_the_session_timeout_stays_at_10_s_at_least(recording: list[RecordingClient]) -> None:
    """--zk-timeout bounds the connection and each answer; a short one must not expire
    the session of a slow but live ZooKeeper mid-command."""
    for zk_timeout, session_ms in ((1.5, 10_000), (30.0, 30_000)):
        args = session_args(zk_timeout)
        with zk_session(args):
            pass
        assert args.connect_string == "127.0.0.1:2181/c"
        client = recording[-1]
        assert client.timeouts == {
            "session_timeout_ms": session_ms,
            "connection_timeout_ms": int(zk_timeout * 1000),
            "request_timeout_ms": int(zk_timeout * 1000),
        }
        assert client.closed_with == [zk_timeout]
    # Under a millisecond: 1 ms, not 0 (no timeout at all, to kazoo).
    with zk_session(session_args(0.0001)):
        pass
    assert recording[-1].timeouts["connection_timeout_ms"] == 1
    assert recording[-1].timeouts["request_timeout_ms"] == 1


def test_a_zookeeper_that_stopped_answering_is_not_waited_for_at_the_close(
    recording: list[RecordingClient],
) -> None:
    """It would leave the close unanswered too; main() is told how many writes were sent."""
    args = session_args(2.0)
    with pytest.raises(ConnectionLoss), zk_session(args):
        raise ConnectionLoss()
    assert recording[-1].closed_with == [0]
    assert args.zk_writes_sent == 3

    args = session_args(2.0)
    with pytest.raises(KeyError), zk_session(args):
        raise KeyError("a bug, ZooKeeper fine")
    assert recording[-1].closed_with == [2.0]
    assert not hasattr(args, "zk_writes_sent")


def test_connect_strings_are_taken_trimmed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    """--zookeeper, then $ZKCTL_ZOOKEEPER: spaces around either (a quoted shell variable)
    are no part of it, and a blank --zookeeper is none given."""
    monkeypatch.setenv(ENV_CONNECT, " 10.0.0.2:2181/env\n")
    empty_dir = str(tmp_path)
    args = argparse.Namespace(zookeeper="  127.0.0.1:2181/c ", dir=empty_dir)
    assert resolve_connect(args) == "127.0.0.1:2181/c"
    args = argparse.Namespace(zookeeper="  ", dir=empty_dir)
    assert resolve_connect(args) == "10.0.0.2:2181/env"


def test_a_cluster_file_copied_from_another_directory_is_an_operational_error(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No argument is wrong: the directory holds another's cluster.json. One line, exit 1,
    no usage (acting on it would reach the other directory's cluster)."""
    monkeypatch.delenv(ENV_CONNECT, raising=False)
    original, copy = tmp_path / "a", tmp_path / "b"
    original.mkdir()
    copy.mkdir()
    local.save(sample_cluster(original))
    shutil.copy(original / local.CLUSTER_FILE, copy / local.CLUSTER_FILE)
    code, out, err = run(["topic", "list", "--dir", str(copy)], capsys)
    assert (code, out) == (1, "")
    assert err.startswith("zkctl: error: ")
    assert "was the directory moved or copied?" in err
    assert "usage:" not in err
