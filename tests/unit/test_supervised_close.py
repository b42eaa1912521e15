"""SupervisedCluster.close stops every broker and its ZooKeeper client whatever stopping
one of them raises: a broker whose reaping timed out left the ones after it running, and
the client open, until the test session ended."""

from __future__ import annotations

import subprocess
from typing import Any
from unittest.mock import MagicMock

import pytest

from cluster.supervised import SupervisedCluster


class _Broker:
    def __init__(self, fails: bool) -> None:
        self.fails = fails
        self.killed = False
        self.pid = -1

    def alive(self) -> bool:
        return False

    def kill(self) -> None:
        self.killed = True
        if self.fails:
            raise subprocess.TimeoutExpired("broker", 30)


def test_close_kills_every_broker_and_closes_the_client_though_one_kill_fails() -> None:
    cluster: Any = SupervisedCluster.__new__(SupervisedCluster)
    cluster.brokers = {1: _Broker(fails=True), 2: _Broker(fails=False), 3: _Broker(fails=False)}
    cluster.zk = MagicMock()
    with pytest.raises(subprocess.TimeoutExpired):
        cluster.close()
    assert [b.killed for b in cluster.brokers.values()] == [True, True, True]
    cluster.zk.close.assert_called_once()
