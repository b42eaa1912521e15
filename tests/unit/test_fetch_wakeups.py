"""Which changes wake a long-polling fetch: new data and partition state changes wake
followers' and consumers' fetches; a high watermark move alone wakes only consumers'.
A follower still gets the new high watermark: with its next records, or when its long
poll ends."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tests.unit.test_fetch_session import T0, Loopback, fetch_body, make_leader
from wire.api import ApiKey


def _long_poll(
    replica_id: int, wake: bool, monkeypatch: pytest.MonkeyPatch
) -> tuple[float, list[float]]:
    """A session fetch waiting 400 ms, during which a high watermark move (wake=False) or
    a data/state change (wake=True) is notified 50 ms in: (seconds it took, when it read
    its partitions again, in seconds from its start)."""
    apis, _replicas, _zk = make_leader([T0])
    conn = Loopback(apis)
    first = fetch_body({T0: 0}, replica_id=replica_id)
    session_id = conn.request(ApiKey.FETCH, 12, first)["session_id"]
    rereads: list[float] = []
    reads: list[float] = []
    read = apis._read_fetch

    def counting(ctx: Any, rid: int, *again: Any) -> Any:
        if reads:  # not the request's first read
            rereads.append(time.monotonic() - started)
        reads.append(time.monotonic() - started)
        return read(ctx, rid, *again)

    monkeypatch.setattr(apis, "_read_fetch", counting)
    body = fetch_body({}, session_id=session_id, epoch=1, replica_id=replica_id)
    body["max_wait_ms"] = 400

    def notify() -> None:
        time.sleep(0.05)
        apis.wake_fetches(wake)

    started = time.monotonic()
    notifier = threading.Thread(target=notify)
    notifier.start()
    conn.request(ApiKey.FETCH, 12, body)
    notifier.join()
    return time.monotonic() - started, rereads


def test_a_high_watermark_move_does_not_wake_a_followers_fetch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    took, rereads = _long_poll(2, False, monkeypatch)
    assert took >= 0.39
    # Not woken, but read once more when the long poll ends: the move is answered then.
    assert len(rereads) == 1
    assert rereads[0] >= 0.39


def test_a_high_watermark_move_wakes_a_consumers_fetch(monkeypatch: pytest.MonkeyPatch) -> None:
    _took, rereads = _long_poll(-1, False, monkeypatch)
    assert rereads
    assert rereads[0] < 0.3


def test_new_data_wakes_a_followers_fetch(monkeypatch: pytest.MonkeyPatch) -> None:
    _took, rereads = _long_poll(2, True, monkeypatch)
    assert rereads
    assert rereads[0] < 0.3
