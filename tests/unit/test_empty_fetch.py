"""A Fetch naming no partition is answered at once, whatever its max_wait_ms: Kafka 2.8's
ReplicaManager.fetchMessages answers without waiting when ``fetchInfos.isEmpty``. Java
consumers from 3.5 close their fetch session in close() with such a fetch (the session
id, FINAL_EPOCH, no partitions: KAFKA-7109) and wait for its answer; an incremental fetch
forgetting its last partition is one too."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from broker.fetch_session import FINAL_EPOCH, INITIAL_EPOCH
from tests.unit.test_fetch_session import T0, Loopback, fetch_body, make_leader
from wire.api import ApiKey
from wire.errors import ErrorCode

# Long enough that waiting it out is a hang to this test (bounded by HANG_S).
LONG_WAIT_MS = 600_000
HANG_S = 30.0


def consumer_body(partitions: dict[Any, int], **kw: Any) -> dict[str, Any]:
    body = fetch_body(partitions, replica_id=-1, leader_epoch=-1, **kw)
    body["max_wait_ms"] = LONG_WAIT_MS
    return body


def answered(conn: Loopback, body: dict[str, Any]) -> dict[str, Any]:
    got: list[dict[str, Any]] = []
    t = threading.Thread(target=lambda: got.append(conn.request(ApiKey.FETCH, 12, body)))
    t.daemon = True
    t.start()
    t.join(HANG_S)
    assert got, f"the fetch waited out max_wait_ms ({LONG_WAIT_MS} ms)"
    return got[0]


def open_session(conn: Loopback) -> int:
    # Offset 0 of an empty log would wait: opened with max_wait 0.
    opened = conn.request(
        ApiKey.FETCH, 12, {**consumer_body({T0: 0}, epoch=INITIAL_EPOCH), "max_wait_ms": 0}
    )
    assert opened["error_code"] == ErrorCode.NONE
    assert opened["session_id"] != 0
    return int(opened["session_id"])


@pytest.mark.parametrize("how", ["close", "forget_all", "full_empty", "sessionless_empty"])
def test_a_fetch_of_no_partition_is_answered_at_once(how: str) -> None:
    apis, _replicas, _zk = make_leader([T0], isr=(1,))
    conn = Loopback(apis)
    if how == "close":
        body = consumer_body({}, session_id=open_session(conn), epoch=FINAL_EPOCH)
    elif how == "forget_all":
        body = consumer_body({}, session_id=open_session(conn), epoch=1, forgotten=[T0])
    elif how == "full_empty":
        body = consumer_body({}, epoch=INITIAL_EPOCH)
    else:
        body = consumer_body({}, epoch=FINAL_EPOCH)
    got = answered(conn, body)
    assert got["error_code"] == ErrorCode.NONE
    assert got["responses"] == []
