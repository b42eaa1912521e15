"""Test helpers for record batches: ``legacy_message`` builds a magic 0/1 message set
entry, for refusal tests.

The v2 batch encoder (``RecordSpec``, ``encode_varint``, ``build_batch``) now lives in
``storage.records``, where broker code uses it too; it is re-exported here so that tests
and benchmarks importing it from ``storage.testing`` keep working.
"""

from __future__ import annotations

import struct
import time
import zlib

from storage.records import RecordSpec, build_batch, encode_varint

__all__ = ["RecordSpec", "build_batch", "encode_varint", "legacy_message"]


def legacy_message(value: bytes, *, magic: int = 1, offset: int = 0) -> bytearray:
    """A message set entry of the old formats (magic 0 or 1), which storage refuses."""
    body = bytearray([magic, 0])  # magic, attributes
    if magic == 1:
        body += struct.pack(">q", int(time.time() * 1000))
    body += struct.pack(">i", -1)  # null key
    body += struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + bytes(body)
    return bytearray(struct.pack(">qi", offset, len(message)) + message)
