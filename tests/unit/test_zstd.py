"""The zstd decoder against frames librdkafka wrote (tests/unit/data/zstd, their records'
digests taken when they were checked against what was produced) and against frames made
here for the paths a producer rarely takes (raw and RLE blocks, RLE literals, a direct
Huffman tree, RLE sequence tables, repeat offsets, skippable frames); damaged frames
raise ZstdError and nothing else. The integration tests decode librdkafka's frames live,
of every size and level."""

from __future__ import annotations

import hashlib
import random
import struct
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import codecs, zstd
from storage.errors import CorruptRecordError
from storage.records import RecordSpec, build_batch, iter_batches, iter_records, recompress
from storage.testing import with_body
from storage.zstd import ZstdError

DATA = Path(__file__).parent / "data" / "zstd"

FIXTURES = {
    "single-records": (40, "004877d2d5f85f35388cbb93e0ef70254f326a898e38b224dd41c3679b1bd718"),
    "runs": (300, "44bb661d25ba28b9a5b583618b9fd245bc83ce9059ae8e767e59c59eb66fba8a"),
    "text": (800, "3d30c7223011069a21ed0d739cee2fc08132eb7531c5b9042abc3f68d5162a2d"),
    "treeless-literals": (
        598,
        "2f6c86f6f4663a023e32851f807724b97929217330f64521f0e08561ea46f325",
    ),
}


def _field(value: bytes | None) -> bytes:
    return b"-1:" if value is None else b"%d:%s" % (len(value), value)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_librdkafkas_frames_decode(name: str) -> None:
    count, digest = FIXTURES[name]
    data = (DATA / f"{name}.batches").read_bytes()
    records = []
    for header in iter_batches(data):
        records += list(iter_records(data[header.position : header.position + header.size]))
    assert len(records) == count
    text = b"".join(_field(r.key) + b"|" + _field(r.value) for r in records)
    assert hashlib.sha256(text).hexdigest() == digest


def _zstd_bodies() -> list[bytes]:
    bodies = []
    for name in FIXTURES:
        data = (DATA / f"{name}.batches").read_bytes()
        for header in iter_batches(data):
            if header.compression == codecs.ZSTD:
                bodies.append(data[header.position + 61 : header.position + header.size])
    return bodies


BODIES = _zstd_bodies()


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(BODIES), st.data())
def test_a_damaged_frame_raises_zstd_error_and_nothing_else(
    body: bytes, draw: st.DataObject
) -> None:
    frame = bytearray(body)
    if draw.draw(st.booleans()):
        del frame[draw.draw(st.integers(0, len(frame) - 1)) :]
    else:
        for _ in range(draw.draw(st.integers(1, 4))):
            frame[draw.draw(st.integers(0, len(frame) - 1))] ^= draw.draw(st.integers(1, 255))
    try:
        zstd.decompress(bytes(frame))
    except ZstdError:
        pass  # a damaged byte may also leave a valid frame: either is fine


# --- frames made here ----------------------------------------------------------------


def frame(*blocks: bytes, content_size: int | None = None) -> bytes:
    """A frame of these blocks (each already with its 3-byte header)."""
    if content_size is None:
        header = bytes((0x00, 0x00))  # no size; a window descriptor (1 KB)
    else:
        header = bytes((0xA0,)) + struct.pack("<I", content_size)
    return struct.pack("<I", zstd.MAGIC) + header + b"".join(blocks)


def block(kind: int, content: bytes, size: int | None = None, *, last: bool = True) -> bytes:
    size = len(content) if size is None else size
    return (size << 3 | kind << 1 | last).to_bytes(3, "little") + content


def test_raw_and_rle_blocks() -> None:
    data = frame(block(0, b"hello ", last=False), block(1, b"z", 5), content_size=11)
    assert zstd.decompress(data) == b"hello zzzzz"


def test_rle_literals_and_a_block_without_sequences() -> None:
    literals = bytes((1 | 7 << 3,)) + b"q"  # RLE, 7 of them, one-byte header
    assert zstd.decompress(frame(block(2, literals + b"\x00"))) == b"q" * 7


def test_a_huffman_tree_of_direct_weights() -> None:
    # Weights of symbols 0..97 ("a" weight 1, the rest 0); "b" (98) is the deduced last:
    # both 1-bit codes, "a" = 0 and "b" = 1. The stream, read from its top bit after the
    # end marker, spells a b b a: 0b1_0110.
    weights = bytearray(49)
    weights[97 // 2] = 0x01 if 97 % 2 else 0x10
    tree = bytes((127 + 98,)) + bytes(weights)
    stream = b"\x16"
    compressed = len(tree) + len(stream)
    header = (2 | 0 << 2 | 4 << 4 | compressed << 14).to_bytes(3, "little")
    assert zstd.decompress(frame(block(2, header + tree + stream + b"\x00"))) == b"abba"


def test_rle_sequence_tables_repeat_offsets_and_an_overlapping_match() -> None:
    # After a raw block "abcdefgh", a block of 1 raw literal "!" and two sequences, every
    # table RLE: literals length code 0 (none), offset code 1, match length code 5 (8).
    # Offset values 2 + 0 and 2 + 1, each a repeat offset as no literal precedes it: the
    # first takes the third of 1, 4, 8 (8: "abcdefgh" again, the history now 8, 1, 4),
    # the second the first minus one (7: overlapping, "bcdefgh" then "b"). The stream
    # holds their two bits, the first sequence's on top: 0b1_0_1.
    literals = bytes((1 << 3,)) + b"!"
    sequences = bytes((2, 1 << 6 | 1 << 4 | 1 << 2, 0, 1, 5)) + b"\x05"
    data = frame(block(0, b"abcdefgh", last=False), block(2, literals + sequences))
    assert zstd.decompress(data) == b"abcdefgh" + b"abcdefgh" + b"bcdefghb" + b"!"


def test_skippable_frames_and_two_frames() -> None:
    skippable = struct.pack("<II", 0x184D2A5E, 3) + b"xyz"
    data = skippable + frame(block(0, b"one")) + frame(block(0, b"two"), content_size=3)
    assert zstd.decompress(data) == b"onetwo"


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"\x28\xb5\x2f\xfe\x00", "not a zstd frame"),
        (frame(block(0, b"abc"), content_size=4), "the frame says 4"),
        (frame(block(3, b"")), "reserved block type"),
        (struct.pack("<I", zstd.MAGIC) + bytes((0x01, 0x00, 0x07)) + block(0, b""), "dictionary"),
        (frame(block(0, b"abc"))[:-1], "raw block past"),
        (frame(block(2, bytes((1 | 7 << 3,)) + b"q" + b"\x00\x00")), "after a block's sequences"),
    ],
)
def test_bad_frames_are_named(data: bytes, says: str) -> None:
    with pytest.raises(ZstdError, match=says):
        zstd.decompress(data)


# FSE-coded Huffman weights (a header of 55, then 55 bytes: the weights' FSE table and
# their stream) whose stream runs out after 257 weights, so that with the deduced last
# the tree has 258 symbols; the zstd format allows at most 255 weights (256 symbols).
# A damaged librdkafka frame found it (review).
_TREE_OF_257_WEIGHTS = bytes.fromhex(
    "37"
    "11407c5cb101539da1bfbd1200c09545de492e92561b59a2342c42a4af7868"
    "86482f23d1dbc55c51fdffffffff4e7180d2c065f97172ed"
)


def frame_of_257_huffman_weights() -> bytes:
    """A frame (70 bytes) of one literal, coded with ``_TREE_OF_257_WEIGHTS``'s 1-bit
    code, symbol 257 (the stream's only bit: 0b1_1)."""
    stream = b"\x03"
    compressed = len(_TREE_OF_257_WEIGHTS) + len(stream)
    header = (2 | 0 << 2 | 1 << 4 | compressed << 14).to_bytes(3, "little")
    return frame(block(2, header + _TREE_OF_257_WEIGHTS + stream + b"\x00"))


def test_a_huffman_tree_of_more_than_255_weights_is_refused() -> None:
    # The weights' stream ran out (the loop's two exits) with one weight more appended
    # after the count was last checked: the tree had symbols 256 and 257, and decoding
    # one raised a plain ValueError from bytearray.append, which no caller takes for a
    # corrupt stream.
    data = frame_of_257_huffman_weights()
    with pytest.raises(ZstdError, match="Huffman weights"):
        zstd.decompress(data)
    with pytest.raises(codecs.CodecError):
        codecs.decompress(codecs.ZSTD, data)


def windowed(window_descriptor: int, *blocks: bytes) -> bytes:
    """A frame of these blocks with this window descriptor (no content size)."""
    return struct.pack("<I", zstd.MAGIC) + bytes((0x00, window_descriptor)) + b"".join(blocks)


def test_no_block_holds_or_makes_more_than_the_frames_block_maximum_size() -> None:
    # RFC 8878's Block_Maximum_Size: the window (1 KB in frame()), at most 128 KB. An RLE
    # block's 21-bit size made 2 MB of these 10 bytes.
    bomb = frame(block(1, b"A", (1 << 21) - 1))
    assert len(bomb) == 10
    with pytest.raises(ZstdError, match="a block of 2097151 bytes"):
        zstd.decompress(bomb)
    assert zstd.decompress(frame(block(1, b"A", 1024))) == b"A" * 1024
    for kind, content, size in ((1, b"A", 1025), (0, b"A" * 1025, None)):
        with pytest.raises(ZstdError, match="a block of 1025 bytes"):
            zstd.decompress(frame(block(kind, content, size)))
    # A window above 128 KB: the blocks still hold 128 KB at most.
    wide = 8 << 3  # 256 KB
    assert len(zstd.decompress(windowed(wide, block(1, b"A", 128 * 1024)))) == 128 * 1024
    with pytest.raises(ZstdError, match="a block of 131073 bytes"):
        zstd.decompress(windowed(wide, block(1, b"A", 128 * 1024 + 1)))
    # A single segment's window is its content size.
    with pytest.raises(ZstdError, match="a block of 100 bytes in a frame of 50-byte"):
        zstd.decompress(frame(block(1, b"A", 100), content_size=50))


def test_a_compressed_block_makes_no_more_than_the_block_maximum_size() -> None:
    # Its literals: 2,000 RLE literals (a 2-byte header) in a frame of 1 KB blocks.
    literals = bytes((1 | 1 << 2 | (2000 & 15) << 4, 2000 >> 4)) + b"q"
    with pytest.raises(ZstdError, match="2000 RLE literals"):
        zstd.decompress(frame(block(2, literals + b"\x00")))
    # Its matches: a block compress wrote for 64 KB, some dozens of bytes, in a frame
    # said to have a 1 KB window (no content size); refused before it is all made.
    written = zstd.compress(b"abcdefgh" * 8192)
    assert _block_kinds(written) == [2]
    assert len(written) < 1024
    with pytest.raises(ZstdError, match="decoding to over 1024 bytes"):
        zstd.decompress(windowed(0x00, written[9:]))
    assert zstd.decompress(windowed(6 << 3, written[9:])) == b"abcdefgh" * 8192  # 64 KB


def test_a_window_over_128_mib_is_refused() -> None:
    # zstd's own decoders' default limit (ZSTD_WINDOWLOG_LIMIT_DEFAULT), as Kafka's
    # zstd-jni reads: 2**27 is read, 2**28 is not.
    assert zstd.decompress(windowed(17 << 3, block(0, b"ok"))) == b"ok"
    with pytest.raises(ZstdError, match="a window of 268435456 bytes"):
        zstd.decompress(windowed(18 << 3, block(0, b"ok")))


# --- what building tables may cost ---------------------------------------------------


def _bits(*fields: tuple[int, int]) -> bytes:
    """Fields (value, width) packed from the lowest bit up, as a forward bit stream."""
    value = count = 0
    for field, width in fields:
        value |= field << count
        count += width
    return value.to_bytes((count + 7) // 8, "little")


# A compressed block of no literals and one 3-byte sequence (a repeat offset), its three
# tables FSE-coded, each a single symbol taking every cell: 512, 256 and 512 cells built
# for 3 bytes made. The stream: the three initial states (0), then its end marker.
_LL_OF_ONE_SYMBOL = _bits((9 - 5, 4), (1023, 10))
_THREE_TABLES = (
    bytes((0x00, 0x01, 0xA8))
    + _LL_OF_ONE_SYMBOL
    + _bits((8 - 5, 4), (511, 9))
    + _LL_OF_ONE_SYMBOL
    + (1 << 26).to_bytes(4, "little")
)
# A compressed block of 4 Huffman-coded literals and no sequences: the tree's weights
# direct (10, 9, ..., 1, 1; symbol 11's deduced, 11), a code of 11 bits: 2,048 cells for
# 4 bytes made, symbol 11's 1-bit code four times (0b1_1111).
_WEIGHTS = (10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 1, 0)
_HUFFMAN_TREE = (
    (2 | 4 << 4 | 8 << 14).to_bytes(3, "little")
    + bytes((127 + 11, *(_WEIGHTS[i] << 4 | _WEIGHTS[i + 1] for i in range(0, 12, 2))))
    + b"\x1f\x00"
)


def tables_frame(body: bytes, blocks: int, made_before: int = 0) -> bytes:
    """A frame (2 MB blocks) of a raw block "abcdefgh", ``made_before`` bytes of RLE
    blocks, then ``blocks`` compressed blocks of ``body``. The zstd tool decodes them."""
    rle = [block(1, b"z", 128 * 1024, last=False)] * (made_before // (128 * 1024))
    compressed = [block(2, body, last=i == blocks - 1) for i in range(blocks)]
    return windowed(0x58, block(0, b"abcdefgh", last=False), *rle, *compressed)


@pytest.mark.parametrize(
    ("body", "makes"), [(_THREE_TABLES, 3), (_HUFFMAN_TREE, 4)], ids=["fse", "huffman"]
)
def test_a_stream_builds_table_cells_for_what_it_makes(body: bytes, makes: int) -> None:
    """Every compressed block may declare new tables, built in Python whatever the block
    makes: 1 MB of blocks of three FSE tables took 84 s to make 195 KB (the zstd tool,
    0.4 s). A stream builds 65,536 cells, and one more per byte it has made; past that it
    is refused, quickly."""
    few = tables_frame(body, 10)
    assert len(zstd.decompress(few)) == 8 + 10 * makes
    bomb = tables_frame(body, 2000)
    with pytest.raises(ZstdError, match=r"declaring tables of 6\d{4} cells for the 1\d\d bytes"):
        zstd.decompress(bomb)
    with pytest.raises(codecs.CodecError):
        codecs.decompress(codecs.ZSTD, bomb)
    # What the stream made before pays for them: 512 KB, 512 KB more cells.
    paid = tables_frame(body, 200, made_before=512 * 1024)
    assert len(zstd.decompress(paid)) == 8 + 512 * 1024 + 200 * makes


def test_librdkafkas_frames_build_a_fraction_of_the_tables_allowed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The allowance's margin: each of librdkafka's batches builds fewer than 8,192 cells
    in all (at most 5,694: ``text``, two blocks of 128 KB), an eighth of the 65,536 a
    stream may build whatever it makes, not counting the one a byte made."""
    monkeypatch.setattr(zstd, "_TABLE_CELLS", 8192)
    monkeypatch.setattr(zstd, "_TABLE_CELLS_PER_BYTE", 0)
    for body in BODIES:
        zstd.decompress(body)


def test_an_fse_table_description_of_endless_zeros_is_refused_as_read() -> None:
    # A count of 0, then 2-bit flags of 3 more zeros each, every bit to the block's end
    # (128 KB): the zeros were listed, 1.5 million of them, before their number was
    # checked. Now refused once there are more than symbols.
    description = bytes((0x10, 0xFE)) + b"\xff" * (128 * 1024 - 10)
    body = bytes((0x00, 0x01, 0x80)) + description
    data = windowed(0x58, block(2, body))
    tracemalloc.start()
    try:
        with pytest.raises(ZstdError, match="too many symbols"):
            zstd.decompress(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < len(data) + (1 << 20)


# --- the content checksum -------------------------------------------------------------

# The zstd tool's frame (zstd --check -19) of _CHECKED_TEXT: one compressed block, then
# xxh64's low 32 bits of the content.
_CHECKED_TEXT = (
    b"Kafka batches, checked: the frame says what its content hashes to (xxh64, low 32 bits)."
)
_CHECKED_FRAME = bytes.fromhex(
    "28b52ffd046855020072851111907d90b2d0033770ad860b846c4dee930323e08fcb49f16ca70b73a0d6"
    "c0ed3b76102be85fdd57cb1c7ff457303bde0abba3ea3e77f01d35279983cc057690bd5aaee4532900af"
    "2e9446"
)


def test_xxh64_is_xxhashs() -> None:
    # The reference's values (python-xxhash's README among others).
    assert zstd.xxh64(b"") == 0xEF46DB3751D8E999
    assert zstd.xxh64(b"a") == 0xD24EC4F1A98C6E5B
    assert zstd.xxh64(b"abc") == 0x44BC2CF5AD770999
    assert zstd.xxh64(b"Nobody inspects the spammish repetition") == 0xFBCEA83C8A378BF1


def checked(content: bytes, checksum: int | None = None) -> bytes:
    """A frame of one raw block of ``content`` with a content checksum (its own: xxh64's
    low 32 bits, unless given)."""
    if checksum is None:
        checksum = zstd.xxh64(content) & 0xFFFFFFFF
    header = struct.pack("<I", zstd.MAGIC) + bytes((0x04, 0x58))  # the checksum flag
    return header + block(0, content) + struct.pack("<I", checksum)


def test_a_frame_whose_content_does_not_match_its_checksum_is_refused() -> None:
    """Kafka's zstd-jni throws "Restored data doesn't match checksum"; the checksum was
    skipped, and a frame with one bit of a raw literal flipped decoded, its records
    altered (a topic recompressing it stored them, under a new valid CRC)."""
    assert zstd.decompress(_CHECKED_FRAME) == _CHECKED_TEXT
    assert zstd.decompress(_CHECKED_FRAME * 2) == _CHECKED_TEXT * 2  # each frame's own
    damaged = bytearray(_CHECKED_FRAME)
    damaged[-1] ^= 0x10
    with pytest.raises(ZstdError, match="does not match its checksum"):
        zstd.decompress(bytes(damaged))
    content = random.Random(3).randbytes(300)  # every length's tail: 32-byte stripes, 8, 4, 1
    for size in (0, 1, 3, 4, 7, 8, 31, 32, 33, 63, 64, 300):
        assert zstd.decompress(checked(content[:size])) == content[:size]
    altered = bytearray(content)
    altered[100] ^= 0x01
    bad = checked(bytes(altered), zstd.xxh64(content) & 0xFFFFFFFF)
    with pytest.raises(ZstdError, match="does not match its checksum"):
        zstd.decompress(bad)
    with pytest.raises(codecs.CodecError):
        codecs.decompress(codecs.ZSTD, bad)
    with pytest.raises(ZstdError, match="truncated"):
        zstd.decompress(checked(content)[:-2])
    # A topic recompressing such a batch refuses it (it stored the altered records).
    batch = build_batch([RecordSpec(content, key=b"k")])
    body = bytearray(batch[61:])
    body[body.index(content) + 100] ^= 0x01
    stream = checked(bytes(body), zstd.xxh64(batch[61:]) & 0xFFFFFFFF)
    with pytest.raises(CorruptRecordError, match="checksum"):
        recompress(with_body(batch, stream, compression=codecs.ZSTD), codecs.GZIP)


def _block_kinds(frame: bytes) -> list[int]:
    """The kinds of a frame's blocks (0 raw, 1 RLE, 2 compressed) as ``compress`` writes
    it (a 4-byte content size, no checksum)."""
    kinds = []
    pos = 9
    while True:
        header = int.from_bytes(frame[pos : pos + 3], "little")
        kinds.append((header >> 1) & 3)
        pos += 3 + (header >> 3)
        if header & 1:
            assert pos == len(frame)
            return kinds


@pytest.mark.parametrize("size", [0, 1, 1000, 128 * 1024, 128 * 1024 + 1, 300_000])
def test_what_compress_writes_decodes(size: int) -> None:
    repeats = bytes(i % 251 for i in range(size))
    noise = random.Random(size).randbytes(size)
    for data in (repeats, noise, repeats[: size // 2] + noise[size // 2 :]):
        assert zstd.decompress(zstd.compress(data)) == data
        assert codecs.decompress(codecs.ZSTD, codecs.compress(codecs.ZSTD, data)) == data
    if size > 1000:  # compressed blocks where bytes repeat, raw blocks for noise
        assert _block_kinds(zstd.compress(repeats))[0] == 2
        assert set(_block_kinds(zstd.compress(noise))) == {0}


def test_matches_reach_back_into_earlier_blocks_and_every_length_and_offset_code() -> None:
    # Literal and match lengths and offsets of every size: their codes from the tables
    # (under 64 / 128) and from the highest bit, each with its extra bits.
    rng = random.Random(5)
    pieces = [rng.randbytes(400_000)]
    for _ in range(600):
        far = rng.randrange(len(pieces[0]) - 70_000)
        pieces.append(rng.randbytes(rng.choice([0, 1, 5, 17, 63, 64, 65, 300, 5000])))
        pieces.append(pieces[0][far : far + rng.choice([4, 5, 35, 130, 131, 1000, 70_000])])
    data = b"".join(pieces)
    frame = zstd.compress(data)
    assert zstd.decompress(frame) == data
    assert len(frame) < len(data) * 0.8  # the repeats of the first block were found
    assert _block_kinds(frame)[:3] == [0, 0, 0]  # 400,000 bytes of noise, raw


def _literals_of_blocks(frame: bytes) -> list[tuple[int, int, int | None]]:
    """Each compressed block's literals: (type: 0 raw, 1 RLE, 2 Huffman; size format;
    for Huffman, the tree's header byte: 128 and up, weights direct; below, FSE-coded)."""
    found = []
    pos = 9
    while True:
        header = int.from_bytes(frame[pos : pos + 3], "little")
        if (header >> 1) & 3 == 2:
            kind, size_format = frame[pos + 3] & 3, (frame[pos + 3] >> 2) & 3
            tree = frame[pos + 3 + (3, 3, 4, 5)[size_format]] if kind == 2 else None
            found.append((kind, size_format, tree))
        pos += 3 + (header >> 3)
        if header & 1:
            return found


def _text(rng: random.Random, size: int, alphabet: bytes) -> bytes:
    words = [bytes(rng.choices(alphabet, k=rng.randint(2, 9))) for _ in range(5000)]
    return b" ".join(rng.choice(words) for _ in range(size // 4))[:size]


@pytest.mark.parametrize(
    ("size", "streams"), [(700, "one stream"), (5000, "four streams"), (100_000, "four streams")]
)
def test_literals_are_huffman_coded_with_weights_direct_or_fse_coded(
    size: int, streams: str
) -> None:
    rng = random.Random(size)
    ascii_text = _text(rng, size, b"abcdefghijklmnopqrstuvwxyz0123456789")
    binary = _text(rng, size, bytes(range(20, 60)) + bytes(range(200, 240)))
    for data, direct in ((ascii_text, True), (binary, False)):
        frame = zstd.compress(data)
        assert zstd.decompress(frame) == data
        blocks = _literals_of_blocks(frame)
        assert blocks
        for kind, size_format, tree in blocks:
            assert kind == 2  # Huffman-coded
            assert (size_format == 0) == (streams == "one stream")
            assert tree is not None
            assert (tree >= 128) == direct  # bytes over 128: the weights FSE-coded
        assert len(frame) < len(data) * 0.9


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.binary(min_size=1, max_size=300),
            st.lists(st.sampled_from(b"ab \x81\xff"), min_size=1, max_size=2000).map(bytes),
            st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=9), st.integers(1, 200)),
        ),
        max_size=20,
    ).map(b"".join)
)
def test_what_compress_writes_decodes_whatever_the_bytes(data: bytes) -> None:
    assert zstd.decompress(zstd.compress(data)) == data
