"""Build record batches (v2) as a producer would, for tests and benchmarks.

``build_batch`` encodes records per the protocol guide (section 5.3): varint-framed
records, the 61-byte header, CRC-32C. gzip batches are really compressed (zlib);
snappy, lz4 and zstd batches carry the uncompressed record bytes under the codec's
attribute bits: the storage layer passes compressed batches through without looking
inside, which is what tests of that need. ``legacy_message`` builds a magic 0/1 message
set entry, for refusal tests.
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from crc32c import crc32c

from storage.records import (
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    Compression,
)

__all__ = ["RecordSpec", "build_batch", "encode_varint", "legacy_message"]


@dataclass(frozen=True)
class RecordSpec:
    """One record to encode; ``timestamp`` None: the batch's base timestamp."""

    value: bytes | None
    key: bytes | None = None
    timestamp: int | None = None
    headers: tuple[tuple[str, bytes | None], ...] = field(default=())


def encode_varint(value: int) -> bytes:
    """Zig-zag varint (protobuf sint64), as record fields use."""
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = raw & 0x7F
        raw >>= 7
        if raw:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _bytes_field(data: bytes | None) -> bytes:
    if data is None:
        return encode_varint(-1)
    return encode_varint(len(data)) + data


def _encode_record(offset_delta: int, timestamp_delta: int, record: RecordSpec) -> bytes:
    body = bytearray(b"\x00")  # attributes
    body += encode_varint(timestamp_delta)
    body += encode_varint(offset_delta)
    body += _bytes_field(record.key)
    body += _bytes_field(record.value)
    body += encode_varint(len(record.headers))
    for name, value in record.headers:
        body += _bytes_field(name.encode())
        body += _bytes_field(value)
    return encode_varint(len(body)) + bytes(body)


def build_batch(
    records: Sequence[RecordSpec | bytes],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    base_timestamp: int | None = None,
    compression: int = Compression.NONE,
    log_append_time: bool = False,
    transactional: bool = False,
    control: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    magic: int = 2,
) -> bytearray:
    """One record batch holding ``records`` (bytes are values), as a bytearray."""
    specs = [r if isinstance(r, RecordSpec) else RecordSpec(r) for r in records]
    if base_timestamp is None:
        base_timestamp = int(time.time() * 1000)
    encoded = bytearray()
    max_ts = base_timestamp if not specs else -1
    for delta, spec in enumerate(specs):
        ts = base_timestamp if spec.timestamp is None else spec.timestamp
        max_ts = max(max_ts, ts)
        encoded += _encode_record(delta, ts - base_timestamp, spec)
    payload: bytes = bytes(encoded)
    if compression == Compression.GZIP:
        compressor = zlib.compressobj(wbits=31)
        payload = compressor.compress(payload) + compressor.flush()
    attributes = compression
    if log_append_time:
        attributes |= ATTR_TIMESTAMP_TYPE
    if transactional:
        attributes |= ATTR_TRANSACTIONAL
    if control:
        attributes |= ATTR_CONTROL
    last_offset_delta = max(len(specs) - 1, 0)
    batch = bytearray(BATCH_HEADER_SIZE) + payload
    struct.pack_into(
        ">qiibIhiqqqhii",
        batch,
        0,
        base_offset,
        len(batch) - LOG_OVERHEAD,
        partition_leader_epoch,
        magic,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        len(specs),
    )
    struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[21:]))
    return batch


def legacy_message(value: bytes, *, magic: int = 1, offset: int = 0) -> bytearray:
    """A message set entry of the old formats (magic 0 or 1), which storage refuses."""
    body = bytearray([magic, 0])  # magic, attributes
    if magic == 1:
        body += struct.pack(">q", int(time.time() * 1000))
    body += struct.pack(">i", -1)  # null key
    body += struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + bytes(body)
    return bytearray(struct.pack(">qi", offset, len(message)) + message)
