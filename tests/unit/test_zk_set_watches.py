"""The SetWatches request that re-arms watches after a reconnection: its bytes, and how
many watches go in one request. No server."""

from __future__ import annotations

import struct

from zkdata import client


def test_set_watches_is_serialized_as_zookeeper_reads_it() -> None:
    (request,) = client._set_watches_requests(0x1234, ["/a"], ["/b", "/c"], [])
    assert request.type == 101
    assert bytes(request.serialize()) == (
        struct.pack(">q", 0x1234)
        + struct.pack(">i", 1)
        + struct.pack(">i", 2)
        + b"/a"
        + struct.pack(">i", 2)
        + struct.pack(">i", 2)
        + b"/b"
        + struct.pack(">i", 2)
        + b"/c"
        + struct.pack(">i", 0)
    )


def test_many_watches_are_re_armed_in_requests_under_the_size_limit() -> None:
    data = [f"/brokers/topics/topic-{i:06d}" for i in range(20_000)]
    child = ["/brokers/ids", "/isr_change_notification"]
    requests = client._set_watches_requests(7, data, [], child)
    assert len(requests) > 1
    for r in requests:
        assert r.relative_zxid == 7
        assert len(r.serialize()) <= client._SET_WATCHES_MAX_BYTES + 8 + 3 * 4
    assert [p for r in requests for p in r.data] == data
    assert [p for r in requests for p in r.child] == child
    assert client._set_watches_requests(7, [], [], []) == []
