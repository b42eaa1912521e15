"""A topic's ``compression.type``: the leader compresses a producer's batches again with
it (``records.recompress``, called by ``PartitionLog.append_as_leader``), as Kafka's
LogValidator does; ``producer`` keeps them as they came."""

from __future__ import annotations

import gzip
import struct
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.config import effective_topic_config
from storage import codecs
from storage.errors import (
    CorruptRecordError,
    DecompressedTooLargeError,
    InvalidRecordError,
    RecordTooLargeError,
    UnknownCompressionError,
)
from storage.log import LogConfig, PartitionLog
from storage.records import (
    ATTR_CONTROL,
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    CRC_OFFSET,
    Compression,
    batch_crc,
    iter_batches,
    iter_records,
    recompress,
)
from storage.testing import RecordSpec, build_batch, with_body
from tests.unit.test_codecs import zstd_rle_frame

CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
NOW = 1_700_000_000_000


def _specs(n: int, seed: int = 0) -> list[RecordSpec]:
    return [
        RecordSpec(
            b"value-%d-" % i + b"v" * (i * 7 % 90), key=b"key-%d" % (i % 5), timestamp=NOW + i
        )
        for i in range(seed, seed + n)
    ]


def _batch(codec: int, n: int, seed: int = 0, **fields: int | bool) -> bytearray:
    return build_batch(_specs(n, seed), compression=codec, base_timestamp=NOW, **fields)  # type: ignore[arg-type]


def _records(
    buf: bytes | bytearray | memoryview,
) -> list[tuple[int, bytes | None, bytes | None, int]]:
    out = []
    for header in iter_batches(buf):
        batch = bytes(buf[header.position : header.position + header.size])
        out += [(r.offset, r.key, r.value, r.timestamp) for r in iter_records(batch)]
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(CODECS), st.integers(1, 40)), min_size=1, max_size=4),
    st.sampled_from(CODECS),
)
def test_every_codec_to_every_codec_keeps_the_records_and_the_batch_fields(
    batches: list[tuple[int, int]], target: int
) -> None:
    buf = bytearray()
    for i, (codec, n) in enumerate(batches):
        buf += _batch(codec, n, seed=i * 100, producer_id=7, producer_epoch=2, base_sequence=i * 40)
    out = recompress(buf, target)
    before = list(iter_batches(buf))
    after = list(iter_batches(out))  # validates each length and CRC
    assert [h.compression for h in after] == [target] * len(batches)
    for old, new in zip(before, after, strict=True):
        assert old._replace(position=0, size=0, crc=0, attributes=0) == new._replace(
            position=0, size=0, crc=0, attributes=0
        )
        assert old.attributes & ~7 == new.attributes & ~7
    assert _records(out) == _records(buf)
    if all(codec == target for codec, _ in batches):
        assert out is buf  # nothing to do: the producer's bytes as they came


def test_a_control_batch_is_left_as_it_is() -> None:
    control = _batch(Compression.NONE, 1, control=True)
    buf = control + _batch(Compression.NONE, 3)
    out = recompress(buf, Compression.GZIP)
    headers = list(iter_batches(out))
    assert headers[0].attributes & ATTR_CONTROL
    assert headers[0].compression == Compression.NONE
    assert headers[1].compression == Compression.GZIP
    assert bytes(out[: len(control)]) == bytes(control)


def test_a_corrupt_batch_is_refused_before_anything_is_compressed() -> None:
    buf = _batch(Compression.LZ4, 5)
    buf[-1] ^= 0xFF  # the CRC no longer matches
    with pytest.raises(CorruptRecordError, match="CRC"):
        recompress(buf, Compression.GZIP)
    # A body that is not a stream of its codec, its CRC right (a client's bug).
    bad = bytearray(_batch(Compression.NONE, 3))
    bad[21:23] = (Compression.SNAPPY).to_bytes(2, "big")
    bad[17:21] = batch_crc(bad).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError, match="cannot be read"):
        recompress(bad, Compression.GZIP)
    # A codec Kafka does not know: UNKNOWN_SERVER_ERROR, as Kafka's
    # Log.analyzeAndValidateRecords fails it before its LogValidator would rebuild it.
    unknown = bytearray(_batch(Compression.NONE, 3))
    unknown[21:23] = (6).to_bytes(2, "big")
    unknown[17:21] = batch_crc(unknown).to_bytes(4, "big")
    with pytest.raises(UnknownCompressionError, match="codec 6"):
        recompress(unknown, Compression.NONE)


def _two_member_gzip_batch() -> bytearray:
    """A gzip batch of 4 records whose body is two gzip members of 2 records each."""
    plain = _batch(Compression.NONE, 4)
    half = len(_batch(Compression.NONE, 2)) - BATCH_HEADER_SIZE  # the first 2 records
    body = bytes(plain[BATCH_HEADER_SIZE:])
    batch = plain[:BATCH_HEADER_SIZE] + gzip.compress(body[:half]) + gzip.compress(body[half:])
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, Compression.GZIP)
    struct.pack_into(">I", batch, CRC_OFFSET, batch_crc(batch))
    return batch


@pytest.mark.parametrize("target", [Compression.NONE, Compression.LZ4])
def test_a_gzip_batch_of_several_members_is_recompressed_whole(target: int) -> None:
    # Read to its first member only, it was rebuilt with 2 records under a header
    # counting 4, and acknowledged.
    batch = _two_member_gzip_batch()
    out = recompress(batch, target)
    assert _records(out) == _records(_batch(Compression.NONE, 4))


def test_a_body_holding_fewer_records_than_its_header_counts_is_refused() -> None:
    # What the header counts is what the producer is acknowledged for: a rebuilt batch
    # holding fewer would lose the rest (Kafka reads every record here).
    short = _batch(Compression.NONE, 3)
    full = _batch(Compression.NONE, 4)
    lying = full[:BATCH_HEADER_SIZE] + codecs.compress(Compression.GZIP, short[BATCH_HEADER_SIZE:])
    struct.pack_into(">i", lying, 8, len(lying) - 12)
    struct.pack_into(">h", lying, ATTRIBUTES_OFFSET, Compression.GZIP)
    struct.pack_into(">I", lying, CRC_OFFSET, batch_crc(lying))
    with pytest.raises(InvalidRecordError, match="records do not parse"):
        recompress(lying, Compression.LZ4)


def test_a_batch_holding_more_than_its_topic_reads_is_refused_before_it_is_made(
    tmp_path: Path,
) -> None:
    # max.message.bytes 64 KB: a batch's records may take 1 MB decompressed; this zstd
    # body of 263 bytes holds 8 MB. MESSAGE_TOO_LARGE, which the Java producer answers
    # by sending the batch again in halves.
    log = _log(tmp_path, compression=Compression.LZ4, max_message_bytes=64 * 1024)
    bomb = with_body(_batch(Compression.NONE, 1), zstd_rle_frame(64), compression=Compression.ZSTD)
    tracemalloc.start()
    try:
        with pytest.raises(DecompressedTooLargeError, match="too large") as refused:
            log.append_as_leader(bomb, 0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert refused.value.error_code == 10  # MESSAGE_TOO_LARGE
    assert peak < 2 << 20
    assert log.config.max_decompressed_bytes == 16 * 64 * 1024
    assert log.log_end_offset == 0


def test_a_producers_batch_over_max_message_bytes_is_refused_before_it_is_recompressed(
    tmp_path: Path,
) -> None:
    # Kafka's Log.analyzeAndValidateRecords checks each batch as the producer sent it,
    # before its LogValidator compresses it again (and the rebuilt one after).
    batch = _batch(Compression.NONE, 40)
    assert len(recompress(bytearray(batch), Compression.GZIP)) < 2000 < len(batch)
    log = _log(tmp_path, compression=Compression.GZIP, max_message_bytes=2000)
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(batch, 0)
    assert log.log_end_offset == 0


def _log(tmp_path: Path, **config: object) -> PartitionLog:
    return PartitionLog(tmp_path / "t-0", LogConfig(**config), time_ms=lambda: NOW)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("compression_type", "codec"),
    [("gzip", Compression.GZIP), ("uncompressed", Compression.NONE), ("zstd", Compression.ZSTD)],
)
def test_the_leader_writes_what_the_topics_compression_type_names(
    tmp_path: Path, compression_type: str, codec: int
) -> None:
    config = effective_topic_config(None, {"compression.type": compression_type})
    log = _log(tmp_path, compression=LogConfig.from_topic_config(config).compression)
    first = log.append_as_leader(_batch(Compression.SNAPPY, 10), 0)
    second = log.append_as_leader(
        _batch(Compression.NONE, 5, seed=10) + _batch(Compression.LZ4, 4, seed=15), 0
    )
    assert (first.first_offset, first.last_offset) == (0, 9)
    assert (second.first_offset, second.last_offset, second.batch_count) == (10, 18, 2)
    assert log.log_end_offset == 19
    stored = log.read(0, 1 << 20).to_bytes()
    assert {h.compression for h in iter_batches(stored)} == {codec}
    assert [(r[0], r[1], r[2]) for r in _records(stored)] == [
        (i, s.key, s.value) for i, s in enumerate(_specs(19))
    ]
    assert second.size == len(stored) - first.size  # what was written, as compressed here


def test_producer_keeps_the_producers_bytes(tmp_path: Path) -> None:
    config = effective_topic_config(None)
    assert config.compression_type == "producer"
    log = _log(tmp_path, compression=LogConfig.from_topic_config(config).compression)
    batch = _batch(Compression.LZ4, 10)
    log.append_as_leader(bytearray(batch), 0)
    stored = log.read(0, 1 << 20).to_bytes()
    assert stored[BATCH_HEADER_SIZE:] == bytes(batch[BATCH_HEADER_SIZE:])


def test_a_batch_too_large_once_decompressed_is_refused_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    # max.message.bytes holds for the batch as it is written, after recompression.
    values = [RecordSpec(b"x" * 5000, key=b"k%d" % i) for i in range(40)]
    batch = build_batch(values, compression=Compression.GZIP)
    assert len(batch) < 2000
    log = _log(tmp_path, compression=Compression.NONE, max_message_bytes=100_000)
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(batch, 0)
    assert log.log_end_offset == 0
    log.append_as_leader(build_batch(values[:5], compression=Compression.GZIP), 0)
    assert log.log_end_offset == 5


def test_a_compressed_batch_and_its_recompressed_copy_decode_alike() -> None:
    # The codecs' own round trip: what recompress writes is read by codecs.decompress.
    batch = _batch(Compression.ZSTD, 30)
    out = recompress(batch, Compression.LZ4)
    (header,) = iter_batches(out)
    body = codecs.decompress(Compression.LZ4, out[BATCH_HEADER_SIZE:])
    assert body == codecs.decompress(Compression.ZSTD, batch[BATCH_HEADER_SIZE:])
    assert header.record_count == 30


@pytest.mark.parametrize("target", [Compression.NONE, Compression.GZIP])
def test_an_incomplete_entry_after_the_batches_is_left_out(target: int) -> None:
    """Kafka's LogValidator rebuilds the batches its iterator read, the whole ones: an
    incomplete entry after them (MemoryRecords.batches ends there) is not in the
    result, whether a batch was rebuilt or none needed it. A bad size field there is
    CorruptRecordException (ByteBufferLogInputStream.nextBatchSize). Both were
    CorruptRecordError before."""
    batch = build_batch([b"a", b"b"])
    tail = bytes(build_batch([b"c"]))[:30]
    out = recompress(batch + tail, target)
    assert [r.value for r in iter_records(bytes(out))] == [b"a", b"b"]
    assert [h.size for h in iter_batches(out)] == [len(out)]
    with pytest.raises(CorruptRecordError, match="13"):
        recompress(batch + struct.pack(">qi", 0, 13), target)
