"""cluster.zookeeper without a ZooKeeper: what a start that fails or is interrupted leaves
behind."""

from __future__ import annotations

import pytest

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
