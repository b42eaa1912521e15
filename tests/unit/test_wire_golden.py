"""Byte-exact frames written by hand from the protocol guide and the JSON schemas."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from wire.api import ApiKey
from wire.codec import get_codec
from wire.errors import EncodeError
from wire.protocol import (
    decode_request_body,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)


def hexbytes(text: str) -> bytes:
    """Hex with spaces, newlines and # comments."""
    return bytes.fromhex(" ".join(line.split("#")[0] for line in text.splitlines()))


def test_api_versions_request_v3_with_header_v2() -> None:
    frame = encode_request(
        ApiKey.API_VERSIONS,
        3,
        1,
        "rdkafka",
        {"client_software_name": "librdkafka", "client_software_version": "2.5.0"},
    )
    assert frame == hexbytes(
        """
        00 00 00 24                     # size 36
        00 12 00 03                     # api key 18, version 3
        00 00 00 01                     # correlation id
        00 07 72 64 6b 61 66 6b 61      # client id: int16 length even in header v2
        00                              # header tagged fields
        0b 6c 69 62 72 64 6b 61 66 6b 61  # compact string "librdkafka" (10 + 1)
        06 32 2e 35 2e 30               # compact string "2.5.0"
        00                              # body tagged fields
        """
    )
    header, offset = decode_request_header(frame[4:])
    assert header == {
        "request_api_key": 18,
        "request_api_version": 3,
        "correlation_id": 1,
        "client_id": "rdkafka",
    }
    assert decode_request_body(18, 3, frame[4:], offset) == {
        "client_software_name": "librdkafka",
        "client_software_version": "2.5.0",
    }


def test_metadata_request_v1_with_null_topics() -> None:
    frame = encode_request(ApiKey.METADATA, 1, 7, "cli", {"topics": None})
    assert frame == hexbytes(
        """
        00 00 00 11                     # size 17
        00 03 00 01 00 00 00 07         # api key 3, version 1, correlation id 7
        00 03 63 6c 69                  # client id "cli"
        ff ff ff ff                     # topics: null array (all topics)
        """
    )
    _header, offset = decode_request_header(frame[4:])
    assert decode_request_body(3, 1, frame[4:], offset) == {
        "topics": None,
        "allow_auto_topic_creation": True,  # absent before v4: the schema default
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }


def test_metadata_request_v0_cannot_carry_null_topics() -> None:
    with pytest.raises(EncodeError, match="topics: null is not allowed"):
        encode_request(ApiKey.METADATA, 0, 7, "cli", {"topics": None})


LEADER_AND_ISR_V5 = {
    "controller_id": 1,
    "controller_epoch": 2,
    "broker_epoch": 3,
    "type": 0,
    "topic_states": [
        {
            "topic_name": "t",
            "topic_id": uuid.UUID(int=1),
            "partition_states": [
                {
                    "partition_index": 0,
                    "controller_epoch": 2,
                    "leader": 1,
                    "leader_epoch": 4,
                    "isr": [1, 2],
                    "partition_epoch": 5,
                    "replicas": [1, 2],
                    "is_new": True,
                }
            ],
        }
    ],
    "live_leaders": [{"broker_id": 1, "host_name": "h", "port": 9092}],
}

LEADER_AND_ISR_V5_BYTES = """
    00 00 00 01                         # controller_id
    00 00 00 02                         # controller_epoch
    00 00 00 00 00 00 00 03             # broker_epoch
    00                                  # type
    02                                  # topic_states: compact array of 1
      02 74                             #   topic_name "t"
      00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 01  # topic_id
      02                                #   partition_states: 1
        00 00 00 00                     #     partition_index
        00 00 00 02                     #     controller_epoch
        00 00 00 01                     #     leader
        00 00 00 04                     #     leader_epoch
        03 00 00 00 01 00 00 00 02      #     isr [1, 2]
        00 00 00 05                     #     partition_epoch
        03 00 00 00 01 00 00 00 02      #     replicas [1, 2]
        01                              #     adding_replicas []
        01                              #     removing_replicas []
        01                              #     is_new
        00                              #     tagged fields
      00                                #   tagged fields
    02                                  # live_leaders: 1
      00 00 00 01                       #   broker_id
      02 68                             #   host_name "h"
      00 00 23 84                       #   port 9092
      00                                #   tagged fields
    00                                  # tagged fields
"""


def test_leader_and_isr_request_v5_with_one_partition() -> None:
    frame = encode_request(ApiKey.LEADER_AND_ISR, 5, 9, "c", LEADER_AND_ISR_V5)
    header = hexbytes("00 04 00 05 00 00 00 09 00 01 63 00")  # header v2, client id "c"
    body = hexbytes(LEADER_AND_ISR_V5_BYTES)
    assert frame == len(header + body).to_bytes(4, "big") + header + body
    decoded = get_codec("LeaderAndIsrRequest", 5).decode(body)
    partition = decoded["topic_states"][0]["partition_states"][0]
    assert partition["isr"] == [1, 2]
    assert partition["topic_name"] == ""  # v0-1 only: default
    assert partition["leader_recovery_state"] == 0  # v6+: default
    assert decoded["topic_states"][0]["topic_id"] == uuid.UUID(int=1)
    assert decoded["is_kraft_controller"] is False


def test_api_versions_response_v3_with_tagged_fields_uses_header_v0() -> None:
    body = {
        "error_code": 0,
        "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}],
        "throttle_time_ms": 0,
        "finalized_features_epoch": 5,
        "zk_migration_ready": True,
    }
    frame = encode_response(ApiKey.API_VERSIONS, 3, 7, body)
    assert frame == hexbytes(
        """
        00 00 00 20                     # size 32
        00 00 00 07                     # correlation id; no tagged fields (header v0)
        00 00                           # error_code
        02 00 12 00 00 00 03 00         # api_keys: [(18, 0, 3)], struct tagged fields
        00 00 00 00                     # throttle_time_ms
        02                              # two tagged fields
        01 08 00 00 00 00 00 00 00 05   # tag 1 finalized_features_epoch, 8 bytes
        03 01 01                        # tag 3 zk_migration_ready, 1 byte
        """
    )
    correlation_id, decoded = decode_response(ApiKey.API_VERSIONS, 3, frame[4:])
    assert correlation_id == 7
    assert decoded == {**body, "supported_features": [], "finalized_features": []}


def test_metadata_response_v9_uses_response_header_v1() -> None:
    body: dict[str, Any] = {"brokers": [], "cluster_id": None, "controller_id": 1, "topics": []}
    frame = encode_response(ApiKey.METADATA, 9, 5, body)
    assert frame == hexbytes(
        """
        00 00 00 15                     # size 21
        00 00 00 05 00                  # correlation id, header tagged fields
        00 00 00 00                     # throttle_time_ms
        01                              # brokers []
        00                              # cluster_id null
        00 00 00 01                     # controller_id
        01                              # topics []
        80 00 00 00                     # cluster_authorized_operations default
        00
        """
    )


def test_controlled_shutdown_v0_uses_request_header_v0() -> None:
    frame = encode_request(ApiKey.CONTROLLED_SHUTDOWN, 0, 3, "ignored", {"broker_id": 2})
    assert frame == hexbytes("00 00 00 0c 00 07 00 00 00 00 00 03 00 00 00 02")
    header, offset = decode_request_header(frame[4:])
    assert header["client_id"] == ""
    assert offset == 8


def test_fetch_response_v12_tagged_struct_in_a_partition() -> None:
    body = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                "topic": "t",
                "partitions": [
                    {
                        "partition_index": 0,
                        "error_code": 0,
                        "high_watermark": 10,
                        "diverging_epoch": {"epoch": 3, "end_offset": 7},
                        "records": b"RB",
                    }
                ],
            }
        ],
    }
    assert get_codec("FetchResponse", 12).encode(body) == hexbytes(
        """
        00 00 00 00 00 00 00 00 00 00   # throttle_time_ms, error_code, session_id
        02 02 74                        # responses: 1; topic "t"
        02                              # partitions: 1
        00 00 00 00 00 00               # partition_index, error_code
        00 00 00 00 00 00 00 0a         # high_watermark
        ff ff ff ff ff ff ff ff         # last_stable_offset -1
        ff ff ff ff ff ff ff ff         # log_start_offset -1
        01                              # aborted_transactions [] (null is 00)
        ff ff ff ff                     # preferred_read_replica -1
        03 52 42                        # records: compact bytes "RB"
        01 00 0d                        # one tagged field: tag 0, 13 bytes
        00 00 00 03 00 00 00 00 00 00 00 07 00  # epoch 3, end_offset 7, tagged fields
        00                              # topic tagged fields
        00                              # tagged fields
        """
    )
