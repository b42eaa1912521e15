"""Message formats v0 and v1 (magic 0 and 1, the clients before Kafka 0.11), which the logs
never hold: a Produce v0-v2's message set is converted up to one record batch (magic 2),
and a Fetch v0-v3 answer's batches down to messages, as Kafka 2.8 converts them with
``log.message.format.version`` 2.8 (LogValidator.convertAndAssignOffsetsNonCompressed and
validateMessagesAndAssignOffsetsCompressed; RecordsUtil.downConvert).

A message (LegacyRecord)::

    offset int64, size int32, crc uint32 (CRC-32 of magic..end), magic int8,
    attributes int8 (bits 0-2 codec, bit 3 LogAppendTime: magic 1 only),
    [timestamp int64: magic 1 only], key bytes (int32 length, -1 null), value bytes

A compressed message (a wrapper) holds, in its value, the codec's stream of the inner
messages: of magic 1 with offsets relative to the first (the wrapper's offset is the last
one's), of magic 0 with absolute offsets.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from typing import Final, NamedTuple

from storage import codecs
from storage.codecs import Compression
from storage.errors import (
    CorruptRecordError,
    DecompressedTooLargeError,
    DecompressionError,
    InvalidRecordError,
)
from storage.records import (
    ATTR_COMPRESSION_MASK,
    ATTR_TIMESTAMP_TYPE,
    BATCH_HEADER_SIZE,
    CRC_OFFSET,
    NO_TIMESTAMP,
    BatchHeader,
    Record,
    RecordSpec,
    batch_crc,
    build_batch,
    entry_size,
    iter_batches,
    iter_records,
)

__all__ = ["LegacyUnsupportedCompressionError", "down_convert", "produce_records", "up_convert"]

_OFFSET_SIZE: Final = struct.Struct(">qi")
_CRC_MAGIC_ATTRIBUTES: Final = struct.Struct(">IBB")
_INT64: Final = struct.Struct(">q")
_INT32: Final = struct.Struct(">i")
_UINT32: Final = struct.Struct(">I")
LOG_OVERHEAD: Final = 12  # offset and size
_MAGIC_AT: Final = LOG_OVERHEAD + 4  # after the CRC: where a batch's magic is too
# crc, magic, attributes, key and value lengths; magic 1 adds the timestamp.
_MIN_SIZE: Final = {0: 14, 1: 22}
# LazyDownConversionRecordsSend.MAX_READ_SIZE: the bytes read a chunk converts at most.
_MAX_READ_SIZE: Final = 128 * 1024


class LegacyUnsupportedCompressionError(InvalidRecordError):
    """A zstd batch to send as messages of magic 0 or 1, which Kafka never writes in
    them (its MemoryRecordsBuilder refuses it): UNSUPPORTED_COMPRESSION_TYPE."""

    error_code = 76  # UNSUPPORTED_COMPRESSION_TYPE


class _Message(NamedTuple):
    offset: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None


def _bytes(data: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise ValueError("a length past the message's end")
    (length,) = _INT32.unpack_from(data, pos)
    pos += 4
    if length < 0:
        return None, pos
    if pos + length > end:
        raise ValueError(f"{length} bytes past the message's end")
    return data[pos : pos + length], pos + length


def _entries(data: bytes) -> list[tuple[int, int, int]]:
    """(magic, start, end) of each whole entry of a producer's message set, a message of
    magic 0 or 1 or a record batch of magic 2, as Kafka 2.8's ByteBufferLogInputStream
    reads them: an entry whose size field is below a message's smallest, or whose magic
    is none of those, is CorruptRecordError (CORRUPT_MESSAGE); an incomplete one at the
    end is not read (Log.append appends the whole ones only, trimInvalidBytes): the
    reading of ``entry_size``, which a Produce v3+'s records get too."""
    out: list[tuple[int, int, int]] = []
    pos = 0
    while (size := entry_size(data, pos)) is not None:
        out.append((data[pos + _MAGIC_AT], pos, pos + size))
        pos += size
    return out


def _messages(data: bytes, position: int) -> Iterator[_Message]:
    """The whole messages of a message set (an incomplete one at its end is not read, as
    Kafka's ByteBufferLogInputStream leaves it), each one's CRC checked
    (CorruptRecordError, as LegacyRecord.ensureValid)."""
    pos = 0
    while len(data) - pos >= LOG_OVERHEAD:
        offset, size = _OFFSET_SIZE.unpack_from(data, pos)
        start = pos + LOG_OVERHEAD
        end = start + size
        if size < _MIN_SIZE[0]:
            raise CorruptRecordError(
                f"a message of {size} bytes, below the smallest", position=position + pos
            )
        if end > len(data):
            return
        crc, magic, attributes = _CRC_MAGIC_ATTRIBUTES.unpack_from(data, start)
        if magic not in (0, 1):
            raise CorruptRecordError(
                f"magic {magic} in a message set of magic 0 and 1", position=position + pos
            )
        if size < _MIN_SIZE[magic] or crc != zlib.crc32(data[start + 4 : end]):
            raise CorruptRecordError(
                f"message at offset {offset} is corrupt (its CRC or size)",
                position=position + pos,
            )
        at = start + 6
        timestamp = NO_TIMESTAMP
        if magic == 1:
            (timestamp,) = _INT64.unpack_from(data, at)
            at += 8
        try:
            key, at = _bytes(data, at, end)
            value, at = _bytes(data, at, end)
        except ValueError as e:
            raise CorruptRecordError(
                f"message at offset {offset}: {e}", position=position + pos
            ) from None
        yield _Message(offset, magic, attributes, timestamp, key, value)
        pos = end


def produce_records(records: bytes | bytearray | memoryview, *, max_size: int) -> bytearray:
    """What a Produce v0-v2's message set appends, as Kafka 2.8's log takes it: those
    versions are not checked by ProduceRequest.validateRecords (versions 3 and up), so
    the log's reading and LogValidator's are all there is. The message set is read as
    ByteBufferLogInputStream reads it (``_entries``): an incomplete entry at its end is
    left out, and one holding no whole entry is nothing to append (an empty bytearray),
    which Log.append answers with no error and offset -1. One record batch of magic 2 is
    appended as sent, for the log to check as any (a zstd one too: Kafka refuses zstd
    only below Produce v7 and inter.broker.protocol.version 2.1); messages of magic 0
    and 1 are converted (``up_convert``). Every entry's CRC is checked before their
    magics are compared, as Log.analyzeAndValidateRecords checks them before
    LogValidator (CorruptRecordError, CORRUPT_MESSAGE); then a record batch with any
    other entry is InvalidRecordError (INVALID_RECORD): LogValidator's
    getFirstBatchAndMaybeValidateNoMoreBatches after a first batch of magic 2,
    validateBatch's magic check after a first message."""
    data = bytes(records)
    entries = _entries(data)
    if not entries:
        return bytearray()
    data = data[: entries[-1][2]]
    if all(magic < 2 for magic, _, _ in entries):
        return up_convert(data, max_size=max_size)
    if len(entries) == 1:
        return bytearray(data)
    for magic, start, end in entries:
        if magic < 2:
            list(_messages(data[start:end], start))
            continue
        (crc,) = _UINT32.unpack_from(data, start + CRC_OFFSET)
        if end - start < BATCH_HEADER_SIZE or crc != batch_crc(data[start:end]):
            raise CorruptRecordError("a record batch whose CRC does not hold", position=start)
    if entries[0][0] == 2:
        raise InvalidRecordError("a record batch of magic 2 with another entry", position=0)
    raise InvalidRecordError(
        "record batches of magic 2 and messages of magic 0 or 1 in one request", position=0
    )


def up_convert(records: bytes | bytearray | memoryview, *, max_size: int) -> bytearray:
    """A producer's message set (magic 0 and 1) as one record batch (magic 2) of its
    records, for the log's usual append: as Kafka 2.8's LogValidator converts it, the
    records of every message, a compressed one's inner messages in its place, keep their
    keys, values and timestamps (magic 0 has none: -1, NO_TIMESTAMP, never checked
    against message.timestamp.difference.max.ms), and the batch is compressed with the
    codec of the compressed message, if any (the topic's compression.type applies
    after). A message claiming LogAppendTime makes a LogAppendTime batch, which the log
    refuses INVALID_TIMESTAMP, as Kafka refuses it. ``max_size`` bounds what a
    compressed message may hold decompressed. InvalidRecordError (INVALID_RECORD) for
    what Kafka's LogValidator refuses so: messages of two magics (validateBatch), a
    compressed message with any other (getFirstBatchAndMaybeValidateNoMoreBatches), and
    AbstractLegacyRecordBatch's DeepRecordsIterator's refusals: a compressed message of
    zstd, without a value or holding none, of magic 1 whose offset, not 0, is below its
    last inner message's, holding one of another magic or itself compressed. Whole
    messages only (see produce_records)."""
    data = bytes(records)
    outers = list(_messages(data, 0))  # each CRC checked first, as Log.append does
    first = outers[0]
    for outer in outers:
        if outer.magic != first.magic:
            raise InvalidRecordError(
                f"a message of magic {outer.magic} after one of magic {first.magic}",
                position=0,
                offset=outer.offset,
            )
    compressed = [o for o in outers if o.attributes & ATTR_COMPRESSION_MASK]
    if compressed and len(outers) > 1:
        raise InvalidRecordError(
            "a compressed message with another in the request", position=0, offset=first.offset
        )
    specs: list[RecordSpec] = []
    codec = Compression.NONE
    log_append_time = False
    for outer in outers:
        outer_codec = outer.attributes & ATTR_COMPRESSION_MASK
        if outer.magic == 1 and outer.attributes & ATTR_TIMESTAMP_TYPE:
            log_append_time = True
        if outer_codec == Compression.NONE:
            specs.append(RecordSpec(outer.value, outer.key, outer.timestamp))
            continue
        if outer_codec == Compression.ZSTD:
            raise InvalidRecordError(
                f"zstd in a message of magic {outer.magic}", position=0, offset=outer.offset
            )
        if outer.value is None:
            raise InvalidRecordError(
                "a compressed message without a value", position=0, offset=outer.offset
            )
        value = outer.value
        if outer_codec == Compression.LZ4 and outer.magic == 0:
            # Kafka reads magic 0's frames ignoring their header checksum (KAFKA-3160).
            value = _lz4_header_checksum(value, magic_0=False)
        try:
            inner_data = codecs.decompress(outer_codec, value, max_size)
        except codecs.UnsupportedCodecError as e:
            raise InvalidRecordError(str(e), position=0, offset=outer.offset) from None
        except codecs.TooLargeError as e:
            raise DecompressedTooLargeError(str(e), position=0, offset=outer.offset) from None
        except codecs.CodecError as e:
            raise DecompressionError(str(e), position=0, offset=outer.offset) from None
        codec = outer_codec
        inners = list(_messages(inner_data, 0))
        if not inners:
            raise InvalidRecordError(
                "a compressed message holding none", position=0, offset=outer.offset
            )
        if outer.magic == 1 and 0 != outer.offset < inners[-1].offset:
            # Its inner offsets are relative to the first, the wrapper's the last one's
            # (0 from some librdkafka versions): it cannot be below the last inner one.
            raise InvalidRecordError(
                f"a compressed message of offset {outer.offset} holding one of offset"
                f" {inners[-1].offset}",
                position=0,
                offset=outer.offset,
            )
        for inner in inners:
            # LogValidator.validateRecord: an inner message of another magic, or itself
            # compressed, is refused.
            if inner.magic != outer.magic or inner.attributes & ATTR_COMPRESSION_MASK:
                raise InvalidRecordError(
                    f"an inner message of magic {inner.magic}, attributes {inner.attributes}"
                    f" in a compressed message of magic {outer.magic}",
                    position=0,
                    offset=outer.offset,
                )
            specs.append(RecordSpec(inner.value, inner.key, inner.timestamp))
    return build_batch(
        specs,
        base_timestamp=specs[0].timestamp,
        compression=codec,
        log_append_time=log_append_time,
    )


def _message(
    offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None
) -> bytes:
    body = bytearray(struct.pack(">BB", magic, attributes))
    if magic == 1:
        body += _INT64.pack(timestamp)
    for field in (key, value):
        if field is None:
            body += _INT32.pack(-1)
        else:
            body += _INT32.pack(len(field))
            body += field
    crc = zlib.crc32(body)
    return _OFFSET_SIZE.pack(offset, 4 + len(body)) + struct.pack(">I", crc) + bytes(body)


def _lz4_header_checksum(frame: bytes, *, magic_0: bool) -> bytes:
    """``frame`` with its header checksum the frame format's (xxHash32 of the
    descriptor), or with ``magic_0`` the one Kafka writes and reads in messages of magic
    0 (KAFKA-3160: over the frame's magic number too); a frame too short is kept."""
    if len(frame) < 7:
        return frame
    end = 6 + (8 if frame[4] & 0x08 else 0)  # FLG, BD and a content size, if any
    if len(frame) <= end:
        return frame
    out = bytearray(frame)
    out[end] = (codecs.xxh32(bytes(out[0 if magic_0 else 4 : end])) >> 8) & 0xFF
    return bytes(out)


def down_convert(
    records: bytes | bytearray | memoryview, to_magic: int, fetch_offset: int, *, max_size: int
) -> bytes:
    """A fetch answer's batches (magic 2) as messages of ``to_magic`` (0 or 1), as Kafka
    2.8's RecordsUtil.downConvert makes them: an uncompressed batch's records from
    ``fetch_offset`` on, each a message, a compressed batch's as one compressed message
    of its codec holding all its records, those below ``fetch_offset`` too (consumers
    drop them); control batches dropped, and the records' headers, which messages
    cannot carry; magic 0 drops the timestamps, magic 1 keeps them (a LogAppendTime
    batch's, its time, the attribute set).

    The answer holds the messages a consumer gets from Kafka's: the first converted
    batch whole, so that a consumer always gets on, then the converted messages in
    order while each fits whole within max(the bytes read, the first converted
    batch's), the size LazyDownConversionRecords.sizeInBytes commits to. So a later
    uncompressed batch gives the messages that fit, and a compressed one, one message,
    fits whole or ends the answer. Kafka's LazyDownConversionRecordsSend writes exactly
    that many bytes: the message at the limit cut short, and, if the converted
    messages run short, an overflow batch (when nothing converts, 12 bytes of one are
    the answer), both of which consumers ignore. Converting eagerly, this answer need
    not commit to a size first: it stops at its last whole message (empty when nothing
    converts), the same messages reaching the consumer without a partial tail.

    A zstd batch, which magic 0 and 1 cannot carry, is LegacyUnsupportedCompressionError
    when it is the first; a later one ends the answer where Kafka's ends (an overflow
    batch): at the start of its chunk, Kafka converting the batches after the first in
    chunks of up to MAX_READ_SIZE (128 KiB) read, each failing whole on a zstd batch, so
    the consumer gets the messages of the chunks before. One deliberate difference: when
    batches with no message (control ones) come before the first converted one, Kafka's
    iterator converts and sends that one again, repeats the consumer drops; here it is
    sent once, so the answer may hold more of the later messages. Bytes holding no whole
    batch (a Fetch v0-v2's first batch cut at its hard limit) are answered as they are,
    as Kafka's hasCompatibleMagic, finding no batch, leaves them unconverted."""
    limit = len(records)
    if limit < LOG_OVERHEAD or LOG_OVERHEAD + _INT32.unpack_from(records, 8)[0] > limit:
        return bytes(records)
    view = memoryview(records)
    headers = list(iter_batches(view))
    out = bytearray()
    first: BatchHeader | None = None
    for header in headers:
        converted = _batch_messages(view, header, to_magic, fetch_offset, max_size)
        if converted:
            out += b"".join(converted)
            first = header
            break
    if first is None:
        return b""
    # LazyDownConversionRecords.sizeInBytes: max(raw, first converted batch).
    size = max(limit, len(out))
    # LazyDownConversionRecordsSend's iterator skips one batch, the first, and converts
    # the rest a chunk at a time; a zstd batch makes its chunk's downConvert throw, and
    # an overflow batch is sent from there on.
    for chunk in _chunks(headers[1:]):
        if any(h.compression == Compression.ZSTD and not h.is_control for h in chunk):
            break
        for header in chunk:
            if header.position <= first.position:
                # Kafka converts again the batch sent first when batches without
                # messages came before it; the consumer drops the repeats.
                continue
            # The stream is cut at size: a message past it is partial, which the
            # consumer ignores, and nothing after it is sent.
            for message in _batch_messages(view, header, to_magic, fetch_offset, max_size):
                if len(out) + len(message) > size:
                    return bytes(out)
                out += message
    return bytes(out)


def _chunks(headers: list[BatchHeader]) -> Iterator[list[BatchHeader]]:
    """``headers`` in LazyDownConversionRecords' chunks: each of at least one batch,
    then the next ones while the chunk's bytes stay within MAX_READ_SIZE."""
    chunk: list[BatchHeader] = []
    read = 0
    for header in headers:
        if chunk and read + header.size > _MAX_READ_SIZE:
            yield chunk
            chunk, read = [], 0
        chunk.append(header)
        read += header.size
    if chunk:
        yield chunk


def _batch_messages(
    view: memoryview, header: BatchHeader, to_magic: int, fetch_offset: int, max_size: int
) -> list[bytes]:
    """A batch's messages of ``to_magic`` (RecordsUtil.downConvert's checks, in its
    order): none for a control batch, LegacyUnsupportedCompressionError for zstd, none
    for a batch with no record to send."""
    if header.is_control:
        return []
    if header.compression == Compression.ZSTD:
        raise LegacyUnsupportedCompressionError(
            f"zstd records cannot be sent as messages of magic {to_magic}",
            position=header.position,
            offset=header.base_offset,
        )
    batch = view[header.position : header.position + header.size]
    kept = list(iter_records(batch, max_size=max_size))
    if header.compression == Compression.NONE:
        # downConvert drops the records below the fetch offset of an uncompressed batch
        # only (firstOffset): a compressed one's message holds them all.
        kept = [r for r in kept if r.offset >= fetch_offset]
    if not kept:
        return []
    return _converted(header, kept, to_magic)


def _converted(header: BatchHeader, kept: list[Record], to_magic: int) -> list[bytes]:
    """A batch's ``kept`` records as messages of ``to_magic``: one each if uncompressed,
    else one compressed message of the batch's codec holding them all (Kafka 2.8's
    RecordsUtil.convertRecordBatch)."""
    log_append_time = to_magic == 1 and header.is_log_append_time
    attributes = ATTR_TIMESTAMP_TYPE if log_append_time else 0
    codec = header.compression
    if codec == Compression.NONE:
        return [_message(r.offset, to_magic, attributes, r.timestamp, r.key, r.value) for r in kept]
    inner = bytearray()
    first = kept[0].offset
    for r in kept:
        offset = r.offset - first if to_magic == 1 else r.offset
        inner += _message(offset, to_magic, attributes, r.timestamp, r.key, r.value)
    value = codecs.compress(codec, inner)
    if codec == Compression.LZ4 and to_magic == 0:
        value = _lz4_header_checksum(value, magic_0=True)
    timestamp = max(r.timestamp for r in kept)
    return [_message(kept[-1].offset, to_magic, attributes | codec, timestamp, None, value)]
