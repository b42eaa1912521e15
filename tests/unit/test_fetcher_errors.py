"""A partition whose fetched records its log cannot take is dealt with alone, as Kafka's
AbstractFetcherThread does: invalid records, fetched again after the backoff; any other
storage error (a batch starting inside what the log holds, a failed log), no longer
fetched until a LeaderAndIsr follows it again. The other partitions from the same leader
go on; raised to the fetcher, one such partition stopped them all."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from broker.fetcher import FetchState, ReplicaFetcherThread
from storage.errors import CorruptRecordError, UnexpectedAppendOffsetError
from wire.api import ApiKey
from zkdata.znodes import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


class Leader:
    """Answers every Fetch with a few bytes of records for each partition listed."""

    def request(self, api_key: int, _version: int, body: Mapping[str, Any]) -> Any:
        assert api_key == ApiKey.FETCH
        return {
            "error_code": 0,
            "session_id": 0,
            "responses": [
                {
                    "topic": t["topic"],
                    "partitions": [
                        {
                            "partition_index": p["partition"],
                            "error_code": 0,
                            "high_watermark": 100,
                            "records": b"records",
                        }
                        for p in t["partitions"]
                    ],
                }
                for t in body["topics"]
            ],
        }

    def close(self) -> None:
        pass


def test_a_partition_its_log_refuses_is_dealt_with_alone() -> None:
    appended: list[TopicPartition] = []

    def sink(tp: TopicPartition, *_: object) -> int:
        if tp == A0:
            raise UnexpectedAppendOffsetError(
                "the first batch starts below the log end offset", expected=20, found=7
            )
        if tp == A1:
            raise CorruptRecordError("CRC-32C mismatch", position=0)
        appended.append(tp)
        return 30

    fetcher = ReplicaFetcherThread(
        2, 1, ("127.0.0.1", 1), sink, None, backoff_ms=60_000, connect=lambda *_: Leader()
    )
    states = {tp: FetchState(20, 5, truncating=False) for tp in (A0, A1, B0)}
    fetcher.add_all(states.items())
    fetch = fetcher._build_fetch()
    assert fetch is not None
    fetcher._fetch_once(fetch)  # raises nothing

    assert A0 not in fetcher.partitions  # failed: not fetched until followed again
    assert fetcher.partitions[A1].delayed_until > time.monotonic()  # fetched again later
    assert appended == [B0]
    assert fetcher.partitions[B0].fetch_offset == 30
    fetcher.add_all([(A0, FetchState(20, 6, truncating=False))])  # a new LeaderAndIsr
    assert A0 in fetcher.partitions
