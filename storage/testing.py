"""Test helpers for record batches: ``legacy_message`` builds a magic 0/1 message set
entry, for refusal tests; ``with_body`` a batch whose records body is any bytes, as a
producer's CRC covers whatever it sends.

The v2 batch encoder (``RecordSpec``, ``encode_varint``, ``build_batch``) now lives in
``storage.records``, where broker code uses it too; it is re-exported here so that tests
and benchmarks importing it from ``storage.testing`` keep working.
"""

from __future__ import annotations

import struct
import time
import zlib

from storage.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    CRC_OFFSET,
    RecordSpec,
    batch_crc,
    build_batch,
    encode_varint,
)

__all__ = ["RecordSpec", "build_batch", "encode_varint", "legacy_message", "with_body"]


def with_body(batch: bytearray, body: bytes, *, compression: int | None = None) -> bytearray:
    """``batch`` (one batch) with ``body`` for its records body (and ``compression`` for
    its codec, if given): its header's other fields as they were, its length and CRC
    right, so that only the body is wrong."""
    rebuilt = batch[:BATCH_HEADER_SIZE] + body
    struct.pack_into(">i", rebuilt, 8, len(rebuilt) - 12)
    if compression is not None:
        struct.pack_into(">h", rebuilt, ATTRIBUTES_OFFSET, compression)
    struct.pack_into(">I", rebuilt, CRC_OFFSET, batch_crc(rebuilt))
    return rebuilt


def legacy_message(value: bytes, *, magic: int = 1, offset: int = 0) -> bytearray:
    """A message set entry of the old formats (magic 0 or 1), which storage refuses."""
    body = bytearray([magic, 0])  # magic, attributes
    if magic == 1:
        body += struct.pack(">q", int(time.time() * 1000))
    body += struct.pack(">i", -1)  # null key
    body += struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + bytes(body)
    return bytearray(struct.pack(">qi", offset, len(message)) + message)
