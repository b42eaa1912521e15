"""A consumer's Fetch sent to a follower is refused NOT_LEADER_OR_FOLLOWER at every
version (docs/architecture.md item 48): Kafka 2.8 serves one of v11 and up from the
follower's log up to its high watermark (KIP-392), which only matters to a client that
a replica selector sent there; no broker here names a preferred read replica."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import BrokerConfig
from storage.log_manager import LogManager
from storage.testing import build_batch
from tests.unit.test_fetch_session import (
    FOLLOWER,
    LEADER,
    T0,
    Loopback,
    change_partitions,
    fetch_body,
    make_leader,
    response_partitions,
)
from wire.api import ApiKey
from wire.errors import ErrorCode


@pytest.mark.parametrize("version", [4, 11, 12])
def test_a_follower_refuses_a_consumer_fetch(tmp_path: Path, version: int) -> None:
    config = BrokerConfig.from_properties({"zookeeper.connect": "x:2181", "broker.id": str(LEADER)})
    logs = LogManager([tmp_path], config)
    try:
        apis, replicas, _zk = make_leader([T0], isr=(LEADER,), logs=logs)
        error, _p, _i, why = replicas.append_as_leader(T0, build_batch([b"v1", b"v2"]), 1)
        assert error == ErrorCode.NONE, why
        # This broker now follows FOLLOWER at epoch 1, with the records it had.
        change_partitions(apis, {T0: (FOLLOWER, 1, (LEADER, FOLLOWER))})
        assert replicas.partitions[T0].high_watermark == 2
        got = Loopback(apis).request(
            ApiKey.FETCH, version, fetch_body({T0: 0}, replica_id=-1, leader_epoch=1)
        )
        part = response_partitions(got)[T0]
        assert part["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert not part["records"]
    finally:
        logs.close()
