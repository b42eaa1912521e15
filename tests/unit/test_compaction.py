"""Log compaction's decisions (storage.compaction): a batch's keyed records, the retain
rule, rewriting a batch with only some of its records (offsets, base timestamp and the
kept records' bytes unchanged), the offset map's budget, and planning over segments
(cleanable range, dirty ratio, when to clean, delete horizon, grouping)."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import codecs
from storage.compaction import (
    Filtered,
    KeyedRecord,
    OffsetMap,
    SegmentStat,
    batch_keys,
    cleanable_range,
    delete_horizon_ms,
    dirty_ratio,
    filter_batch,
    first_keyless_offset,
    group_segments,
    keyed_records,
    read_headers,
    retain,
    should_clean,
)
from storage.errors import CorruptRecordError
from storage.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    Compression,
    Record,
    RecordSpec,
    assign_offsets,
    batch_crc,
    build_batch,
    encode_varint,
    iter_batches,
    iter_records,
    read_header,
)

INT32_MAX = 2**31 - 1
BASE_TS = 1_700_000_000_000
# The codecs whose batches are read here: all; an attribute naming none (5-7) is not.
READABLE = [
    Compression.NONE,
    Compression.GZIP,
    Compression.SNAPPY,
    Compression.LZ4,
    Compression.ZSTD,
]
UNKNOWN_CODEC = 5


def _batch(
    records: Sequence[RecordSpec | bytes],
    *,
    base_offset: int = 0,
    compression: int = Compression.NONE,
    control: bool = False,
    transactional: bool = False,
    leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    return bytes(
        build_batch(
            records,
            base_offset=base_offset,
            partition_leader_epoch=leader_epoch,
            base_timestamp=BASE_TS,
            compression=compression,
            control=control,
            transactional=transactional,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
        )
    )


def _with_body(batch: bytes, body: bytes, record_count: int | None = None) -> bytes:
    """``batch`` with its records body replaced (length, count and CRC made to match)."""
    out = bytearray(batch[:BATCH_HEADER_SIZE]) + body
    struct.pack_into(">i", out, 8, len(out) - LOG_OVERHEAD)
    if record_count is not None:
        struct.pack_into(">i", out, 57, record_count)
    struct.pack_into(">I", out, 17, batch_crc(out))
    return bytes(out)


def _record_bytes(
    key: bytes | None, value: bytes | None, *, key_length: int | None = None
) -> bytes:
    """One encoded record (offset and timestamp deltas 0), its key length forgeable."""
    body = b"\x00" + encode_varint(0) + encode_varint(0)
    if key is None:
        body += encode_varint(-1)
    else:
        body += encode_varint(len(key) if key_length is None else key_length) + key
    body += encode_varint(-1) if value is None else encode_varint(len(value)) + value
    body += encode_varint(0)
    return encode_varint(len(body)) + body


def _keep_offsets(*offsets: int) -> Callable[[KeyedRecord], bool]:
    wanted = set(offsets)
    return lambda record: record.offset in wanted


def _keep_none(_record: KeyedRecord) -> bool:
    return False


def _keep_all(_record: KeyedRecord) -> bool:
    return True


MIXED = [
    RecordSpec(b"v0", key=b"k0", timestamp=BASE_TS + 5, headers=(("h", b"x"),)),
    RecordSpec(b"v1", key=None, timestamp=BASE_TS - 3),
    RecordSpec(None, key=b"k2", timestamp=BASE_TS + 90),  # tombstone, the batch's max
    RecordSpec(b"v" * 70, key=b"k" * 200, timestamp=BASE_TS + 12, headers=(("t", None),)),
    RecordSpec(b"", key=b"", timestamp=BASE_TS + 7),
    RecordSpec(b"x" * 10_000, key=b"k5", timestamp=BASE_TS + 10**12),
]


# --------------------------------------------------------------------------- keyed_records


@pytest.mark.parametrize("compression", READABLE)
def test_keyed_records_reads_keys_tombstones_offsets_and_timestamps(compression: int) -> None:
    batch = _batch(MIXED, base_offset=5000, compression=compression)
    header = read_header(batch)
    body, records = keyed_records(batch, header)
    assert [r.offset for r in records] == list(range(5000, 5006))
    assert [r.key for r in records] == [b"k0", None, b"k2", b"k" * 200, b"", b"k5"]
    assert [r.tombstone for r in records] == [False, False, True, False, False, False]
    assert [r.timestamp for r in records] == [spec.timestamp for spec in MIXED]
    # each record's bytes are body[start:end], after its length prefix, and nothing else
    rebuilt = b"".join(encode_varint(r.end - r.start) + body[r.start : r.end] for r in records)
    assert rebuilt == body
    if compression == Compression.NONE:
        assert body == batch[BATCH_HEADER_SIZE:]
    else:
        assert body == codecs.decompress(compression, batch[BATCH_HEADER_SIZE:])


def test_keyed_records_of_a_memoryview_and_an_empty_batch() -> None:
    batch = _batch([RecordSpec(b"v", key=b"k")], base_offset=3)
    body, records = keyed_records(memoryview(batch), read_header(batch))
    assert body == batch[BATCH_HEADER_SIZE:]
    assert [(r.key, r.offset) for r in records] == [(b"k", 3)]
    empty = _batch([])
    assert keyed_records(empty, read_header(empty)) == (b"", [])


@pytest.mark.parametrize("compression", READABLE)
def test_keyed_records_of_a_log_append_time_batch_give_its_max_timestamp(
    compression: int,
) -> None:
    buf = build_batch(MIXED[:3], base_timestamp=BASE_TS, compression=compression)
    assign_offsets(buf, 77, 4, log_append_time_ms=BASE_TS + 123_456)
    batch = bytes(buf)
    header = read_header(batch)
    assert header.is_log_append_time
    _, records = keyed_records(batch, header)
    assert [r.timestamp for r in records] == [BASE_TS + 123_456] * 3
    assert [r.offset for r in records] == [77, 78, 79]
    assert [r.timestamp for r in records] == [r.timestamp for r in iter_records(batch)]


def _corrupt_bodies() -> list[tuple[str, bytes, int]]:
    good = _record_bytes(b"key", b"value")
    return [
        ("count above the records", good, 2),
        ("count below the records", good + good, 1),
        ("bytes after the records", good + b"\x00", 1),
        ("record length past the end", encode_varint(200) + good[1:], 1),
        ("negative record length", encode_varint(-2) + good[1:], 1),
        ("empty record", encode_varint(0), 1),
        ("key past the record", _record_bytes(b"k", b"v", key_length=50), 1),
        ("key past the record, another after", _record_bytes(b"k", b"v", key_length=9) + good, 2),
        ("varint over 10 bytes", b"\xff" * 11 + b"\x01", 1),
        ("truncated varint", b"\x80", 1),
        ("empty body", b"", 1),
    ]


@pytest.mark.parametrize(
    ("body", "count"),
    [pytest.param(body, count, id=name) for name, body, count in _corrupt_bodies()],
)
def test_keyed_records_of_a_corrupt_body_raise_corrupt_record_error(
    body: bytes, count: int
) -> None:
    batch = _with_body(_batch([b"x"], base_offset=40), body, count)
    header = read_header(batch)
    with pytest.raises(CorruptRecordError) as info:
        keyed_records(batch, header)
    assert info.value.offset == 40
    assert info.value.position == header.position
    # a corrupt batch is kept whole and its keys go nowhere
    assert _kept_unread(filter_batch(batch, header, _keep_none)) is batch
    assert batch_keys(batch, header) == []


@pytest.mark.parametrize(
    "body",
    [b"not gzip at all", zlib.compress(_record_bytes(b"k", b"v"))[:-3], b""],
    ids=["not gzip", "truncated", "empty"],
)
def test_keyed_records_of_a_bad_gzip_body_raise_corrupt_record_error(body: bytes) -> None:
    batch = _with_body(_batch([b"x"], compression=Compression.GZIP), body, 1)
    header = read_header(batch)
    with pytest.raises(CorruptRecordError):
        keyed_records(batch, header)
    assert _kept_unread(filter_batch(batch, header, _keep_none)) is batch


@pytest.mark.parametrize("compression", [Compression.SNAPPY, Compression.LZ4, Compression.ZSTD])
def test_keyed_records_of_a_bad_snappy_lz4_or_zstd_body_raise_corrupt_record_error(
    compression: int,
) -> None:
    good = codecs.compress(compression, _record_bytes(b"k", b"v"))
    for body in (b"not a stream", good[:-3], b""):
        batch = _with_body(_batch([b"x"], compression=compression), body, 1)
        header = read_header(batch)
        with pytest.raises(CorruptRecordError):
            keyed_records(batch, header)
        assert _kept_unread(filter_batch(batch, header, _keep_none)) is batch


def test_keyed_records_of_a_gzip_body_holding_a_corrupt_record() -> None:
    compressor = zlib.compressobj(wbits=31)
    body = compressor.compress(_record_bytes(b"k", b"v") + b"\x07") + compressor.flush()
    batch = _with_body(_batch([b"x"], compression=Compression.GZIP), body, 1)
    with pytest.raises(CorruptRecordError, match="after its records"):
        keyed_records(batch, read_header(batch))


# --------------------------------------------------------------------------- batch_keys


def test_batch_keys_are_the_keyed_records_in_offset_order() -> None:
    batch = _batch(MIXED, base_offset=10, compression=Compression.GZIP)
    assert batch_keys(batch, read_header(batch)) == [
        (b"k0", 10),
        (b"k2", 12),
        (b"k" * 200, 13),
        (b"", 14),
        (b"k5", 15),
    ]


def test_batch_keys_of_an_undecodable_batch_are_none() -> None:
    batch = _batch(MIXED, compression=UNKNOWN_CODEC)
    assert batch_keys(batch, read_header(batch)) == []


def test_batch_keys_of_a_control_batch_are_none() -> None:
    batch = _batch([RecordSpec(b"\x00\x00\x00\x00", key=b"\x00\x00\x00\x01")], control=True)
    assert batch_keys(batch, read_header(batch)) == []


def test_read_headers_gives_the_whole_batches_only() -> None:
    first = _batch([b"a", b"b"], base_offset=0)
    second = _batch([RecordSpec(b"c", key=b"k")], base_offset=2)
    headers = read_headers(first + second + second[:30])
    assert [(h.position, h.base_offset) for h in headers] == [(0, 0), (len(first), 2)]
    assert read_headers(first + second[:-1]) == [read_header(first)]
    assert read_headers(b"") == []


@pytest.mark.parametrize("length", [-12, 0, BATCH_HEADER_SIZE - LOG_OVERHEAD - 1])
def test_read_headers_refuses_a_batch_length_below_a_header(
    monkeypatch: pytest.MonkeyPatch, length: int
) -> None:
    # A damaged length field (-12: a batch of 0 bytes) never moved the reading on: the
    # same header was appended again and again until memory ran out. A guard on
    # read_header turns that into a failure here.
    calls = 0
    real_read_header = read_header

    def counted(blob: bytes | memoryview, position: int = 0) -> object:
        nonlocal calls
        calls += 1
        assert calls < 100, "read_headers does not move on"
        return real_read_header(blob, position)

    monkeypatch.setattr("storage.compaction.read_header", counted)
    first = _batch([b"a", b"b"], base_offset=0)
    damaged = bytearray(_batch([RecordSpec(b"c", key=b"k")], base_offset=2))
    struct.pack_into(">i", damaged, 8, length)
    with pytest.raises(CorruptRecordError, match="below the minimum") as refused:
        read_headers(first + damaged + bytes(200))
    assert refused.value.position == len(first)
    assert refused.value.offset == 2


# --------------------------------------------------------------------------- retain


def _keyed(offset: int, key: bytes | None, tombstone: bool = False) -> KeyedRecord:
    return KeyedRecord(0, 1, offset, BASE_TS, key, tombstone)


def test_retain_drops_a_record_without_a_key() -> None:
    for latest in (-1, 5, 10):
        for keep_tombstones in (True, False):
            assert not retain(_keyed(5, None), latest, keep_tombstones)


def test_retain_drops_a_record_with_a_later_one_of_its_key() -> None:
    assert not retain(_keyed(5, b"k"), 6, keep_tombstones=True)
    assert not retain(_keyed(5, b"k", tombstone=True), 6, keep_tombstones=True)
    assert retain(_keyed(5, b"k"), 5, keep_tombstones=True)
    assert retain(_keyed(5, b"k"), 5, keep_tombstones=False)
    # not in the map (-1), or the map's entry is older (mapped from an earlier part)
    assert retain(_keyed(5, b"k"), -1, keep_tombstones=False)
    assert retain(_keyed(5, b"k"), 3, keep_tombstones=False)
    assert retain(_keyed(0, b""), -1, keep_tombstones=False)  # an empty key is a key


def test_retain_drops_a_latest_tombstone_only_when_tombstones_go() -> None:
    assert retain(_keyed(5, b"k", tombstone=True), 5, keep_tombstones=True)
    assert not retain(_keyed(5, b"k", tombstone=True), 5, keep_tombstones=False)
    assert not retain(_keyed(5, b"k", tombstone=True), -1, keep_tombstones=False)


def test_retain_keeps_a_tombstone_above_a_batch_kept_unread() -> None:
    # The batch kept unread (base offset 3) may hold a record the tombstone deleted: that
    # record stays, so the tombstone does too, past the horizon. One below it cannot
    # have deleted a record in it.
    tombstone = _keyed(5, b"k", tombstone=True)
    assert retain(tombstone, 5, keep_tombstones=False, first_unread=3)
    assert retain(tombstone, -1, keep_tombstones=False, first_unread=4)
    assert not retain(tombstone, 5, keep_tombstones=False, first_unread=6)
    assert not retain(tombstone, 5, keep_tombstones=False, first_unread=-1)
    # a later record of its key still drops it, as it does any record
    assert not retain(tombstone, 8, keep_tombstones=False, first_unread=3)
    assert retain(_keyed(5, b"k"), 5, keep_tombstones=False, first_unread=3)


def test_filter_batch_keeps_a_batch_over_its_bound_unread() -> None:
    batch = _batch([b"x" * 1000], compression=Compression.GZIP)
    header = read_header(batch)
    assert filter_batch(batch, header, _keep_none).batch is None
    filtered = filter_batch(batch, header, _keep_none, max_size=500)
    assert filtered.batch is batch
    assert filtered.unread == "its records decompress to more than 500 bytes"


# --------------------------------------------------------------------------- filter_batch


def _by_offset(batch: bytes) -> dict[int, Record]:
    return {r.offset: r for r in iter_records(batch)}


def test_filter_batch_keeping_every_record_returns_the_same_object() -> None:
    for compression in (Compression.NONE, Compression.GZIP):
        batch = _batch(MIXED, compression=compression)
        assert filter_batch(batch, read_header(batch), _keep_all).batch is batch
    empty = _batch([])
    assert filter_batch(empty, read_header(empty), _keep_none).batch is empty


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.GZIP])
def test_the_cleaners_timestamps_wrap_at_64_bits_and_its_max_starts_at_no_timestamp(
    compression: int,
) -> None:
    """A record's timestamp is base + delta in Java's longs (DefaultRecord), which wrap,
    and the batch the cleaner rebuilds takes its maxTimestamp as MemoryRecordsBuilder
    does: the largest kept record's, from NO_TIMESTAMP (-1). So kept records before the
    epoch, or one wrapped to the bottom, leave -1 in the header, as Kafka 2.8 writes."""
    top, bottom = 2**63 - 1, -(2**63)
    specs = [
        RecordSpec(b"a", key=b"ka", timestamp=top),
        RecordSpec(b"b", key=b"kb", timestamp=bottom),  # delta 1 on top: wraps
        RecordSpec(b"c", key=b"kc", timestamp=-5),
    ]
    batch = bytes(build_batch(specs, base_offset=10, base_timestamp=top, compression=compression))
    header = read_header(batch)
    _, records = keyed_records(batch, header)
    assert [r.timestamp for r in records] == [top, bottom, -5]
    for kept, max_timestamp in (((11,), -1), ((11, 12), -1), ((12,), -1), ((10, 11), top)):
        out = filter_batch(batch, header, _keep_offsets(*kept)).batch
        assert out is not None
        assert read_header(out).max_timestamp == max_timestamp, kept
        assert [r.timestamp for r in iter_records(out)] == [
            r.timestamp for r in records if r.offset in kept
        ]


def test_filter_batch_keeping_no_record_returns_none() -> None:
    for compression in (Compression.NONE, Compression.GZIP):
        batch = _batch(MIXED, compression=compression)
        assert filter_batch(batch, read_header(batch), _keep_none).batch is None


@pytest.mark.parametrize("compression", READABLE)
@pytest.mark.parametrize(
    "kept",
    [(9000,), (9001,), (9005,), (9000, 9003), (9001, 9004), (9000, 9001, 9003, 9004, 9005)],
)
def test_filter_batch_keeps_the_records_bytes_offsets_and_header(
    compression: int, kept: tuple[int, ...]
) -> None:
    batch = _batch(
        MIXED,
        base_offset=9000,
        compression=compression,
        transactional=True,
        leader_epoch=7,
        producer_id=42,
        producer_epoch=3,
        base_sequence=100,
    )
    before = read_header(batch)
    out = filter_batch(batch, before, _keep_offsets(*kept)).batch
    assert out is not None
    (after,) = iter_batches(out)  # a valid batch: length, magic, CRC
    assert after == read_header(out)
    assert batch_crc(out) == after.crc
    originals = _by_offset(batch)
    assert list(iter_records(out)) == [originals[offset] for offset in kept]
    assert after.record_count == len(kept)
    assert after.size == len(out)
    assert after.compression == compression
    if compression == Compression.GZIP:
        assert out[BATCH_HEADER_SIZE : BATCH_HEADER_SIZE + 2] == b"\x1f\x8b"
    # all else of the header stays: offsets are never reassigned
    unchanged = (
        "base_offset",
        "partition_leader_epoch",
        "magic",
        "attributes",
        "last_offset_delta",
        "base_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
    )
    for name in unchanged:
        assert getattr(after, name) == getattr(before, name), name
    assert after.next_offset == 9006
    assert after.max_timestamp == max(originals[offset].timestamp for offset in kept)
    if compression == Compression.NONE:  # the kept records' bytes are copied verbatim
        _, records = keyed_records(batch, before)
        body = batch[BATCH_HEADER_SIZE:]
        expected = b"".join(
            encode_varint(r.end - r.start) + body[r.start : r.end]
            for r in records
            if r.offset in kept
        )
        assert out[BATCH_HEADER_SIZE:] == expected


def test_filter_batch_lowers_the_max_timestamp_of_a_create_time_batch() -> None:
    batch = _batch(MIXED, base_offset=0)
    assert read_header(batch).max_timestamp == BASE_TS + 10**12
    out = filter_batch(batch, read_header(batch), _keep_offsets(0, 1)).batch
    assert out is not None
    assert read_header(out).max_timestamp == BASE_TS + 5
    # a max below the base timestamp stays what the records say
    out = filter_batch(batch, read_header(batch), _keep_offsets(1)).batch
    assert out is not None
    assert read_header(out).max_timestamp == BASE_TS - 3
    assert read_header(out).base_timestamp == BASE_TS


@pytest.mark.parametrize("compression", READABLE)
def test_filter_batch_keeps_the_max_timestamp_of_a_log_append_time_batch(
    compression: int,
) -> None:
    buf = build_batch(MIXED, base_timestamp=BASE_TS, compression=compression)
    info = assign_offsets(buf, 300, 2, log_append_time_ms=BASE_TS + 500)
    batch = bytes(buf)
    before = read_header(batch)
    assert before == info.batches[0]
    out = filter_batch(batch, before, _keep_offsets(301, 303)).batch
    assert out is not None
    (after,) = iter_batches(out)
    assert after.is_log_append_time
    assert after.max_timestamp == BASE_TS + 500
    assert after.base_timestamp == before.base_timestamp
    assert [(r.offset, r.timestamp) for r in iter_records(out)] == [
        (301, BASE_TS + 500),
        (303, BASE_TS + 500),
    ]


def test_filter_batch_keeps_an_undecodable_batch_whole() -> None:
    batch = _batch(MIXED, compression=UNKNOWN_CODEC)
    header = read_header(batch)
    assert header.compression == UNKNOWN_CODEC
    assert _kept_unread(filter_batch(batch, header, _keep_none)) is batch
    assert _kept_unread(filter_batch(batch, header, _keep_offsets(0))) is batch


@pytest.mark.parametrize("compression", READABLE)
def test_filter_batch_keeps_a_control_batch_whole(compression: int) -> None:
    # an abort marker: key (version 0, type 0), value (version 0, coordinator epoch 5)
    marker = RecordSpec(b"\x00\x00\x00\x00\x00\x05", key=b"\x00\x00\x00\x00")
    batch = _batch(
        [marker], control=True, transactional=True, producer_id=9, compression=compression
    )
    header = read_header(batch)
    assert header.is_control
    assert filter_batch(batch, header, _keep_none) == Filtered(batch)  # not unread: no data


def test_filter_batch_of_a_batch_inside_a_blob() -> None:
    first = _batch([b"a"], base_offset=0)
    second = _batch(MIXED, base_offset=1)
    (_, header) = read_headers(first + second)
    assert header.position == len(first)
    out = filter_batch(second, header, _keep_offsets(3)).batch
    assert out is not None
    assert [r.offset for r in iter_records(out)] == [3]


# ------------------------------------------------------------------ compaction, as a property

_KEYS = st.one_of(st.none(), st.sampled_from([b"", b"a", b"b", b"c", b"dd"]))
_VALUES = st.one_of(st.none(), st.binary(max_size=12))
_HEADERS = st.lists(
    st.tuples(st.sampled_from(["h", "trace"]), st.one_of(st.none(), st.binary(max_size=4))),
    max_size=2,
).map(tuple)
_SPECS = st.builds(
    RecordSpec,
    value=_VALUES,
    key=_KEYS,
    timestamp=st.one_of(st.none(), st.integers(BASE_TS - 10**6, BASE_TS + 10**6)),
    headers=_HEADERS,
)


@st.composite
def _logs(draw: st.DrawFn) -> list[bytes]:
    """Batches with consecutive offsets from a random base, each uncompressed or gzip."""
    specs = draw(st.lists(_SPECS, min_size=1, max_size=40))
    offset = draw(st.integers(0, 2**40))
    batches: list[bytes] = []
    i = 0
    while i < len(specs):
        n = draw(st.integers(1, 8))
        compression = draw(st.sampled_from(READABLE))
        batches.append(_batch(specs[i : i + n], base_offset=offset, compression=compression))
        offset += len(specs[i : i + n])
        i += n
    return batches


def _kept_unread(filtered: Filtered) -> bytes | None:
    """The batch ``filter_batch`` kept unread (it says why)."""
    assert filtered.unread
    return filtered.batch


def _keeper(offset_map: OffsetMap, keep_tombstones: bool) -> Callable[[KeyedRecord], bool]:
    def keep(record: KeyedRecord) -> bool:
        latest = -1 if record.key is None else offset_map.get(record.key)
        return retain(record, latest, keep_tombstones)

    return keep


def _compact(
    batches: list[bytes], offset_map: OffsetMap, keep_tombstones: bool
) -> list[bytes | None]:
    keep = _keeper(offset_map, keep_tombstones)
    return [filter_batch(batch, read_header(batch), keep).batch for batch in batches]


def _check_shape(batches: list[bytes], out: list[bytes | None]) -> list[Record]:
    """Each rewritten batch is valid, covers its original's offsets, and holds a subset of
    its records unchanged; the retained records, in order."""
    retained: list[Record] = []
    for batch, result in zip(batches, out, strict=True):
        if result is None:
            continue
        before = read_header(batch)
        (after,) = iter_batches(result)
        assert (after.base_offset, after.last_offset_delta) == (
            before.base_offset,
            before.last_offset_delta,
        )
        assert (after.base_timestamp, after.attributes) == (
            before.base_timestamp,
            before.attributes,
        )
        originals = _by_offset(batch)
        records = list(iter_records(result))
        assert records
        assert after.record_count == len(records)
        for record in records:
            assert originals[record.offset] == record  # same offset, timestamp, bytes
        if not after.is_log_append_time:
            assert after.max_timestamp == max(r.timestamp for r in records)
        retained += records
    return retained


@settings(max_examples=200, deadline=None)
@given(_logs(), st.booleans())
def test_compaction_keeps_each_keys_last_record_and_never_moves_an_offset(
    batches: list[bytes], keep_tombstones: bool
) -> None:
    everything = [r for batch in batches for r in iter_records(batch)]
    offset_map = OffsetMap(1 << 20)
    for batch in batches:
        keys = batch_keys(batch, read_header(batch))
        assert keys == [(r.key, r.offset) for r in iter_records(batch) if r.key is not None]
        for key, offset in keys:
            assert offset_map.put(key, offset)
    last: dict[bytes, Record] = {}
    for record in everything:
        if record.key is not None:
            last[record.key] = record
    assert len(offset_map) == len(last)

    out = _compact(batches, offset_map, keep_tombstones)
    retained = _check_shape(batches, out)
    expected = sorted(
        (r for r in last.values() if keep_tombstones or r.value is not None),
        key=lambda r: r.offset,
    )
    assert retained == expected
    assert len({r.key for r in retained}) == len(retained)  # one record per key
    if not keep_tombstones:
        assert all(r.value is not None for r in retained)

    # compacting again changes nothing: every batch comes back as the same object
    again = _compact([b for b in out if b is not None], offset_map, keep_tombstones)
    assert again == [b for b in out if b is not None]
    for once, twice in zip([b for b in out if b is not None], again, strict=True):
        assert twice is once


@settings(max_examples=200, deadline=None)
@given(_logs(), st.integers(0, 4 * (OffsetMap.ENTRY_OVERHEAD + 2)))
def test_compaction_with_a_full_offset_map_only_drops_superseded_records(
    batches: list[bytes], capacity: int
) -> None:
    offset_map = OffsetMap(capacity)
    refused: set[bytes] = set()
    for batch in batches:
        for key, offset in batch_keys(batch, read_header(batch)):
            if not offset_map.put(key, offset):
                refused.add(key)
    assert offset_map.bytes_used <= capacity
    assert not any(offset_map.get(key) >= 0 for key in refused)
    everything = [r for batch in batches for r in iter_records(batch)]
    last = {r.key: r.offset for r in everything if r.key is not None}

    retained = _check_shape(batches, _compact(batches, offset_map, keep_tombstones=True))
    kept_offsets = {r.offset for r in retained}
    for record in everything:
        if record.key is None:
            assert record.offset not in kept_offsets
        elif record.key in refused or record.offset == last[record.key]:
            assert record.offset in kept_offsets  # never dropped without a later record
        else:
            assert record.offset not in kept_offsets


# --------------------------------------------------------------------------- OffsetMap


def test_offset_map_put_get_len() -> None:
    offset_map = OffsetMap(1 << 16)
    assert len(offset_map) == 0
    assert offset_map.get(b"a") == -1
    assert offset_map.put(b"a", 3)
    assert offset_map.put(b"b", 4)
    assert offset_map.put(b"a", 7)
    assert offset_map.put(b"", 8)
    assert (offset_map.get(b"a"), offset_map.get(b"b"), offset_map.get(b"")) == (7, 4, 8)
    assert offset_map.get(b"c") == -1
    assert len(offset_map) == 3
    assert offset_map.bytes_used == 2 + 3 * OffsetMap.ENTRY_OVERHEAD


def test_offset_map_refuses_a_new_key_past_its_budget_but_updates_known_ones() -> None:
    per_key = OffsetMap.ENTRY_OVERHEAD + 1
    offset_map = OffsetMap(2 * per_key)
    assert offset_map.put(b"a", 1)
    assert offset_map.put(b"b", 2)  # exactly the budget
    assert offset_map.bytes_used == offset_map.capacity_bytes
    assert not offset_map.put(b"c", 3)
    assert offset_map.get(b"c") == -1
    assert len(offset_map) == 2
    assert offset_map.put(b"a", 10)  # a known key's offset moves on when full
    assert offset_map.get(b"a") == 10
    assert offset_map.bytes_used == 2 * per_key


def test_offset_map_counts_a_keys_length() -> None:
    offset_map = OffsetMap(OffsetMap.ENTRY_OVERHEAD + 10)
    assert not offset_map.put(b"k" * 11, 0)
    assert offset_map.bytes_used == 0
    assert offset_map.put(b"k" * 10, 0)
    assert not offset_map.put(b"", 1)
    assert not OffsetMap(0).put(b"", 0)


# --------------------------------------------------------------------------- planning


def _seg(
    base: int,
    size: int = 1000,
    *,
    first_ts: int = 0,
    largest_ts: int = 0,
    modified: int = 0,
) -> SegmentStat:
    return SegmentStat(base, size, first_ts, largest_ts, modified)


# offsets 0-99, 100-199, 200-299, and the active segment from 300
FOUR = [_seg(0), _seg(100), _seg(200), _seg(300)]


def _range(
    segments: Sequence[SegmentStat],
    *,
    log_start: int = 0,
    checkpoint: int | None = None,
    hw: int = 10**9,
    now: int = 10_000,
    lag: int = 0,
) -> tuple[int, int]:
    return cleanable_range(
        segments,
        log_start_offset=log_start,
        checkpoint=checkpoint,
        high_watermark=hw,
        now_ms=now,
        min_compaction_lag_ms=lag,
    )


def test_cleanable_range_never_includes_the_active_segment() -> None:
    assert _range(FOUR) == (0, 300)
    assert _range(FOUR, hw=350) == (0, 300)
    assert _range([_seg(0)]) == (0, 0)
    assert _range([_seg(500)], log_start=500) == (500, 500)
    assert _range([], log_start=42) == (42, 42)


@pytest.mark.parametrize(
    ("hw", "first_uncleanable"),
    [(300, 300), (299, 200), (250, 200), (201, 200), (200, 200), (199, 100), (100, 100),
     (1, 0), (0, 0)],
)  # fmt: skip
def test_cleanable_range_stops_at_the_segment_holding_the_high_watermark(
    hw: int, first_uncleanable: int
) -> None:
    assert _range(FOUR, hw=hw) == (0, first_uncleanable)


@pytest.mark.parametrize(
    ("log_start", "checkpoint", "first_dirty"),
    [
        (0, None, 0),
        (0, 0, 0),
        (0, 100, 100),
        (0, 200, 200),
        (0, 300, 300),  # up to the active segment's base
        (0, 301, 0),  # past it: not valid, the log start
        (0, 10**6, 0),
        (100, 50, 100),  # below the log start: not valid
        (100, 100, 100),
        (100, 200, 200),
        (150, None, 150),
        (150, 200, 200),
        (0, 150, 150),  # inside a segment: where a cleaning's offset map filled
        (100, 250, 250),
        (150, 160, 160),
    ],
)
def test_cleanable_range_uses_a_valid_checkpoint_else_the_log_start(
    log_start: int, checkpoint: int | None, first_dirty: int
) -> None:
    segments = FOUR if log_start < 100 else FOUR[1:]
    assert _range(segments, log_start=log_start, checkpoint=checkpoint) == (first_dirty, 300)


def test_cleanable_range_with_the_log_start_in_the_high_watermarks_segment_is_empty() -> None:
    segments = FOUR[1:]
    assert _range(segments, log_start=150, hw=160) == (150, 150)
    assert _range(segments, log_start=150, hw=250) == (150, 200)


def test_cleanable_range_stops_at_the_first_dirty_segment_too_young_to_clean() -> None:
    # now 10_000, lag 1_000: a segment whose largest timestamp is above 9_000 is too young
    segments = [
        _seg(0, largest_ts=5_000),
        _seg(100, largest_ts=9_001),
        _seg(200, largest_ts=1_000),
        _seg(300, largest_ts=9_999),
    ]
    assert _range(segments, lag=1_000) == (0, 100)
    assert _range(segments, lag=0) == (0, 300)  # no lag: age does not matter
    assert _range(segments, lag=999) == (0, 300)  # 9_001 is not above 9_001
    # a clean segment's age does not matter: only dirty ones are looked at
    assert _range(segments, checkpoint=200, lag=1_000) == (200, 300)
    assert _range(segments, checkpoint=100, lag=1_000) == (100, 100)
    # the high watermark bound comes first
    assert _range(segments, hw=50, lag=1_000) == (0, 0)
    young_first = [_seg(0, largest_ts=9_500), _seg(100, largest_ts=0), _seg(200)]
    assert _range(young_first, lag=1_000) == (0, 0)


def test_cleanable_range_with_a_too_young_segment_at_the_log_start() -> None:
    segments = [_seg(100, largest_ts=9_500), _seg(200, largest_ts=0), _seg(300)]
    assert _range(segments, log_start=150, lag=1_000) == (150, 150)


@st.composite
def _segment_lists(draw: st.DrawFn) -> list[SegmentStat]:
    n = draw(st.integers(1, 10))
    base = draw(st.integers(0, 2**40))
    segments: list[SegmentStat] = []
    for _ in range(n):
        segments.append(
            SegmentStat(
                base,
                draw(st.integers(0, 3000)),
                draw(st.integers(-1, 20_000)),
                draw(st.integers(0, 20_000)),
                draw(st.integers(0, 20_000)),
            )
        )
        base += draw(st.one_of(st.integers(1, 1000), st.integers(2**30, 2**32)))
    return segments


def _first_uncleanable_model(
    segments: Sequence[SegmentStat], first_dirty: int, log_start: int, hw: int, now: int, lag: int
) -> int:
    """The first uncleanable offset, the slow way: the highest segment boundary with no
    active, uncommitted or (dirty and) too young offset below it."""
    bases = [s.base_offset for s in segments]
    best = bases[0]
    for i in range(1, len(segments)):
        if bases[i] > min(bases[-1], hw):
            break
        below = range(i)
        if lag > 0 and any(
            bases[j + 1] > first_dirty and segments[j].largest_timestamp > now - lag for j in below
        ):
            break
        best = bases[i]
    return max(best, log_start)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_cleanable_range_is_whole_segments_below_every_bound(data: st.DataObject) -> None:
    segments = data.draw(_segment_lists())
    bases = [s.base_offset for s in segments]
    log_start = data.draw(st.integers(bases[0], bases[-1] + 500))
    hw = data.draw(st.integers(log_start, bases[-1] + 3000))
    checkpoint = data.draw(
        st.one_of(st.none(), st.sampled_from(bases), st.integers(0, bases[-1] + 3000))
    )
    now = data.draw(st.integers(0, 20_000))
    lag = data.draw(st.sampled_from([0, 1, 1000, 20_000]))
    first_dirty, first_uncleanable = _range(
        segments, log_start=log_start, checkpoint=checkpoint, hw=hw, now=now, lag=lag
    )
    if checkpoint is not None and log_start <= checkpoint <= bases[-1]:
        assert first_dirty == checkpoint
    else:
        assert first_dirty == log_start
    assert first_uncleanable in bases or first_uncleanable == log_start
    assert first_uncleanable >= log_start
    if first_uncleanable > log_start:
        assert first_uncleanable <= min(bases[-1], hw)
    assert first_uncleanable == _first_uncleanable_model(
        segments, first_dirty, log_start, hw, now, lag
    )


def test_dirty_ratio_is_the_dirty_share_of_the_cleanable_bytes() -> None:
    segments = [_seg(0, 100), _seg(100, 300), _seg(200, 600), _seg(300, 5000)]
    assert dirty_ratio(segments, 100, 300) == pytest.approx(0.9)
    assert dirty_ratio(segments, 0, 300) == 1.0
    assert dirty_ratio(segments, 200, 300) == pytest.approx(0.6)
    assert dirty_ratio(segments, 300, 300) == 0.0  # all clean
    assert dirty_ratio(segments, 100, 200) == pytest.approx(0.75)
    assert dirty_ratio(segments, 0, 0) == 0.0  # nothing cleanable
    assert dirty_ratio([_seg(0, 0), _seg(100, 0), _seg(200, 10)], 0, 200) == 0.0
    assert dirty_ratio([], 0, 0) == 0.0


def _should(
    segments: Sequence[SegmentStat],
    first_dirty: int,
    first_uncleanable: int,
    *,
    ratio: float = 0.5,
    now: int = 10_000,
    max_lag: int = 2**63 - 1,
) -> bool:
    return should_clean(
        segments,
        first_dirty,
        first_uncleanable,
        min_cleanable_ratio=ratio,
        now_ms=now,
        max_compaction_lag_ms=max_lag,
    )


def test_should_clean_above_the_dirty_ratio() -> None:
    segments = [_seg(0, 100), _seg(100, 300), _seg(200, 600), _seg(300, 5000)]
    assert _should(segments, 100, 300, ratio=0.5)  # 0.9
    assert _should(segments, 100, 300, ratio=0.89)
    assert not _should(segments, 100, 300, ratio=0.95)
    assert _should(segments, 0, 300, ratio=0.99)  # nothing clean yet: 1.0
    assert _should(segments, 0, 300, ratio=0.0)


def test_should_clean_needs_the_ratio_strictly_exceeded_like_kafka() -> None:
    # LogCleanerManager.grabFilthiestCompactedLog: cleanableRatio > minCleanableRatio
    segments = [_seg(0, 100), _seg(100, 50), _seg(200, 50), _seg(300)]
    assert dirty_ratio(segments, 100, 300) == 0.5
    assert not _should(segments, 100, 300, ratio=0.5)
    assert _should(segments, 100, 300, ratio=0.49)
    # min.cleanable.dirty.ratio=1: only max.compaction.lag.ms makes a log clean
    assert not _should(segments, 0, 300, ratio=1.0)
    old = [_seg(0, first_ts=1_000), _seg(100), _seg(200)]
    assert _should(old, 0, 200, ratio=1.0, now=10_000, max_lag=5_000)


def test_should_clean_a_dirty_record_older_than_the_max_compaction_lag() -> None:
    segments = [
        _seg(0, 100, first_ts=0),
        _seg(100, 10, first_ts=1_000),
        _seg(200, 10, first_ts=9_000),
        _seg(300, 5000, first_ts=9_900),
    ]
    assert dirty_ratio(segments, 100, 300) < 0.5
    assert _should(segments, 100, 300, now=10_000, max_lag=5_000)  # 9_000 old
    assert _should(segments, 100, 300, now=10_000, max_lag=8_999)
    assert not _should(segments, 100, 300, now=10_000, max_lag=9_000)  # not over it
    assert not _should(segments, 100, 300, now=10_000)  # no max lag
    # the first dirty segment's first batch tells
    assert not _should(segments, 200, 300, now=10_000, max_lag=5_000)
    assert _should(segments, 200, 300, now=10_000, max_lag=999)
    # an empty first dirty segment (-1) has no age
    empty_first = [_seg(0, 100), _seg(100, 10, first_ts=-1), _seg(200)]
    assert not _should(empty_first, 100, 200, now=10_000, max_lag=0)


def test_should_clean_nothing_dirty_is_never_due() -> None:
    segments = [_seg(0, 100, first_ts=0), _seg(100, 100, first_ts=0), _seg(200)]
    assert not _should(segments, 200, 200, ratio=0.0, max_lag=0)
    assert not _should(segments, 300, 200, ratio=0.0, max_lag=0)  # an empty range
    assert not _should(segments, 0, 0, ratio=0.0, max_lag=0)
    empty = [_seg(0, 100), _seg(100, 0, first_ts=0), _seg(200, 0, first_ts=0), _seg(300)]
    assert not _should(empty, 100, 300, ratio=0.0, max_lag=0)  # dirty, but no bytes
    assert not _should([], 0, 0, ratio=0.0, max_lag=0)


def test_delete_horizon_is_the_last_clean_segments_time_less_the_retention() -> None:
    segments = [
        _seg(0, modified=50_000),
        _seg(100, modified=60_000),
        _seg(200, modified=70_000),
        _seg(300, modified=80_000),
    ]
    assert delete_horizon_ms(segments, 0, 1_000) == 0  # nothing clean yet
    assert delete_horizon_ms(segments, 100, 1_000) == 49_000
    assert delete_horizon_ms(segments, 150, 1_000) == 59_000  # cleaned up to inside one
    assert delete_horizon_ms(segments, 200, 1_000) == 59_000
    assert delete_horizon_ms(segments, 300, 1_000) == 69_000  # all but the active one
    assert delete_horizon_ms(segments, 10**6, 0) == 70_000  # never the active segment
    assert delete_horizon_ms(segments, 200, 86_400_000) == 60_000 - 86_400_000
    assert delete_horizon_ms([], 0, 1_000) == 0
    assert delete_horizon_ms(segments[1:], 100, 1_000) == 0


def test_group_segments_by_size() -> None:
    segments = [_seg(0, 400), _seg(10, 400), _seg(20, 400), _seg(30, 100), _seg(40, 400)]
    assert group_segments(segments, 40, max_bytes=1000) == [(0, 2), (2, 4)]
    assert group_segments(segments, 40, max_bytes=800) == [(0, 2), (2, 4)]
    assert group_segments(segments, 40, max_bytes=799) == [(0, 1), (1, 2), (2, 4)]
    assert group_segments(segments, 40, max_bytes=10_000) == [(0, 4)]
    assert group_segments(segments, 30, max_bytes=10_000) == [(0, 3)]
    assert group_segments(segments, 10, max_bytes=10_000) == [(0, 1)]
    assert group_segments(segments, 0, max_bytes=10_000) == []


def test_group_segments_never_takes_the_active_segment() -> None:
    segments = [_seg(0, 10), _seg(10, 10), _seg(20, 10)]
    assert group_segments(segments, 20, max_bytes=10_000) == [(0, 2)]
    assert group_segments(segments, 10**9, max_bytes=10_000) == [(0, 2)]
    assert group_segments([_seg(0, 10)], 10**9, max_bytes=10_000) == []
    assert group_segments([], 10**9, max_bytes=10_000) == []


def test_group_segments_puts_an_oversized_segment_alone() -> None:
    segments = [_seg(0, 100), _seg(10, 5000), _seg(20, 100), _seg(30, 100), _seg(40)]
    assert group_segments(segments, 40, max_bytes=1000) == [(0, 1), (1, 2), (2, 4)]
    assert group_segments([_seg(0, 5000), _seg(10, 5000), _seg(20)], 20, max_bytes=1000) == [
        (0, 1),
        (1, 2),
    ]


def test_group_segments_keeps_a_runs_offsets_within_2_to_the_31() -> None:
    # the run's last offset is below the next segment's base
    fits = [_seg(0, 1), _seg(2**31 - 10, 1), _seg(2**31, 1), _seg(2**31 + 1, 1)]
    assert group_segments(fits, 2**31, max_bytes=10_000) == [(0, 2)]  # up to 2**31 - 1
    assert group_segments(fits, 2**31 + 1, max_bytes=10_000) == [(0, 2), (2, 3)]
    beyond = [_seg(0, 1), _seg(2**31 - 10, 1), _seg(2**31 + 1, 1), _seg(2**31 + 2, 1)]
    assert group_segments(beyond, 2**31 + 2, max_bytes=10_000) == [(0, 1), (1, 3)]
    # a single segment spanning more stays alone (nothing can split it)
    wide = [_seg(0, 1), _seg(2**32, 1), _seg(2**32 + 5, 1), _seg(2**32 + 6, 1)]
    assert group_segments(wide, 2**32 + 6, max_bytes=10_000) == [(0, 1), (1, 3)]
    far = [_seg(2**40, 1), _seg(2**40 + 2**31 - 1, 1), _seg(2**40 + 2**31, 1)]
    assert group_segments(far, 2**41, max_bytes=10_000) == [(0, 2)]
    far_over = [_seg(2**40, 1), _seg(2**40 + 2**31, 1), _seg(2**40 + 2**31 + 1, 1)]
    assert group_segments(far_over, 2**41, max_bytes=10_000) == [(0, 1), (1, 2)]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_group_segments_covers_the_segments_below_the_end_in_valid_runs(
    data: st.DataObject,
) -> None:
    segments = data.draw(_segment_lists())
    bases = [s.base_offset for s in segments]
    end_offset = data.draw(
        st.one_of(st.sampled_from(bases), st.just(bases[-1] + 10**6), st.just(0))
    )
    max_bytes = data.draw(st.integers(1, 4000))
    runs = group_segments(segments, end_offset, max_bytes=max_bytes)
    below = [i for i in range(len(segments) - 1) if bases[i + 1] <= end_offset]
    # contiguous, in order, non-empty, covering exactly the segments below the end
    assert [i for start, end in runs for i in range(start, end)] == below
    assert all(start < end for start, end in runs)
    for k, (start, end) in enumerate(runs):
        size = sum(s.size for s in segments[start:end])
        if end - start > 1:
            assert size <= max_bytes
            assert bases[end] - 1 - bases[start] <= INT32_MAX
        # a run ends only where the next segment would not fit
        if k + 1 < len(runs):
            too_big = size + segments[end].size > max_bytes
            too_far = bases[end + 1] - 1 - bases[start] > INT32_MAX
            assert too_big or too_far


def test_a_segment_the_last_cleaning_ended_inside_counts_as_dirty() -> None:
    # A map that filled inside segment 100 ended the cleaning at 150: that segment's
    # records from 150 are dirty, so its bytes are dirty bytes (Kafka's
    # calculateCleanableBytes: logSegments(firstDirtyOffset, ...) starts at the segment
    # holding it), and the log is due again.
    segments = [_seg(0, 100), _seg(100, 100), _seg(200)]
    assert dirty_ratio(segments, 150, 200) == 0.5
    assert _should(segments, 150, 200, ratio=0.3)


def test_an_empty_range_inside_a_segment_is_never_due() -> None:
    # The log start offset (150, retention or DeleteRecords) lies inside the segment
    # holding the high watermark: the first dirty and the first uncleanable offsets are
    # both 150, and nothing may be cleaned (Kafka: logSegments(from, to) with from == to
    # is empty), though segment 100 holds offsets past the first dirty one.
    segments = [_seg(0, 100), _seg(100, 100), _seg(200)]
    assert _range(segments, log_start=150, hw=160) == (150, 150)
    assert not _should(segments, 150, 150, ratio=0.0, max_lag=0)


def test_the_max_compaction_lag_ignores_empty_dirty_segments() -> None:
    # An empty dirty segment (no first batch, -1) does not hide an older one's first
    # batch (Kafka's maxCompactionDelay keeps only the timestamps of the segments that
    # have one).
    segments = [_seg(0, 100), _seg(100, 0, first_ts=-1), _seg(200, 10, first_ts=1_000), _seg(300)]
    assert dirty_ratio(segments, 100, 300) < 0.5
    assert _should(segments, 100, 300, now=10_000, max_lag=5_000)
    assert not _should(segments, 100, 300, now=10_000, max_lag=9_000)


@pytest.mark.parametrize("compression", READABLE)
def test_first_keyless_offset_is_the_batchs_base_offset_plus_the_records_index(
    compression: int,
) -> None:
    keyed = RecordSpec(b"v", key=b"k")
    batch = _batch(
        [keyed, keyed, RecordSpec(b"no key"), keyed], base_offset=10, compression=compression
    )
    assert first_keyless_offset(batch, read_header(batch)) == 12
    every = _batch([keyed, keyed], base_offset=10, compression=compression)
    assert first_keyless_offset(every, read_header(every)) is None
    unknown = _batch([RecordSpec(b"no key")], base_offset=10, compression=UNKNOWN_CODEC)
    assert first_keyless_offset(unknown, read_header(unknown)) is None


def test_the_max_compaction_lag_ignores_a_first_batch_timestamp_of_zero() -> None:
    # Kafka's maxCompactionDelay keeps only the first batches' timestamps above 0
    # (getFirstBatchTimestampForSegments(...).filter(_ > 0)): a segment whose first batch
    # says 0 (a producer that set it so) has no age, it does not make the log due at once.
    zero = [_seg(0, 100), _seg(100, 10, first_ts=0), _seg(200)]
    assert dirty_ratio(zero, 100, 200) < 0.5
    assert not _should(zero, 100, 200, now=10_000, max_lag=5_000)
    old = [_seg(0, 100), _seg(100, 10, first_ts=0), _seg(200, 10, first_ts=1), _seg(300)]
    assert _should(old, 100, 300, now=10_000, max_lag=5_000)
