"""The record batch compression codecs the storage layer reads: gzip, snappy, lz4, zstd.

A broker passes compressed batches through untouched; it needs their records only to
check a compacted topic's keys, to compress them again in a topic's compression.type, to
compact, and to find an offset by timestamp, and reads no more of them than its caller
bounds (``decompress``'s ``max_size``). gzip
comes from the standard library (zlib; every member of the stream, as Java's
GZIPInputStream reads them). snappy and lz4 are decoded here, in pure Python
(no dependency for two small formats; the work is one slice copy per literal run or
match, not per byte), and zstd in ``storage.zstd`` (RFC 8878, its entropy coding decoded
per literal and per sequence, so a few times slower):

- snappy: a raw snappy stream (what librdkafka writes), or xerial snappy-java's framing
  (what Kafka's Java producer writes: the magic ``\\x82SNAPPY\\x00``, two version words,
  then length-prefixed raw chunks).
- lz4: the LZ4 frame format (Kafka's KafkaLZ4BlockOutputStream, librdkafka's LZ4F), its
  first frame, as Kafka's KafkaLZ4BlockInputStream reads it: the frame header's
  checksum is checked; compressed and stored blocks, independent (as Kafka refuses
  dependent ones), none holding or decoding to more than the frame's block maximum
  size; block checksums are checked, as Kafka checks them; the content checksum is read
  past, as Kafka reads past it.

``compress`` is what a compaction's rewritten batch is written with (it keeps its codec,
as in Kafka): the matches of a greedy parse (``storage.lz77``) as snappy copies (32 KB
xerial chunks), lz4 blocks (independent, 64 KB; stored where that is no larger) or zstd
sequences (``storage.zstd.compress``), 4-7 MB/s; gzip is zlib's. An attribute naming
no codec (5-7) is ``UnsupportedCodecError``.
"""

from __future__ import annotations

import struct
import zlib
from typing import Final

from storage import lz77, zstd

__all__ = [
    "MAX_SIZE",
    "CodecError",
    "Compression",
    "TooLargeError",
    "TruncatedError",
    "UnsupportedCodecError",
    "compress",
    "decompress",
    "lz4_frame",
    "readable",
    "snappy_xerial",
    "xxh32",
]


class Compression:
    """Compression codec numbers (a batch's attributes, bits 0-2)."""

    NONE: Final = 0
    GZIP: Final = 1
    SNAPPY: Final = 2
    LZ4: Final = 3
    ZSTD: Final = 4


NONE: Final = Compression.NONE
GZIP: Final = Compression.GZIP
SNAPPY: Final = Compression.SNAPPY
LZ4: Final = Compression.LZ4
ZSTD: Final = Compression.ZSTD
_READABLE: Final = (NONE, GZIP, SNAPPY, LZ4, ZSTD)

_MASK32: Final = 0xFFFFFFFF
_U32LE: Final = struct.Struct("<I")
_U32BE: Final = struct.Struct(">I")
_LZ4_MAGIC: Final = 0x184D2204
_LZ4_STORED: Final = 0x80000000
_LZ4_BLOCK: Final = 64 * 1024  # what Kafka's and librdkafka's producers use
#: a frame's Block Maximum Size, by its BD byte (the only four the format has)
_LZ4_BLOCK_MAX: Final = {0x40: 64 * 1024, 0x50: 256 * 1024, 0x60: 1 << 20, 0x70: 4 << 20}
_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = _XERIAL_MAGIC + _U32BE.pack(1) + _U32BE.pack(1)
_SNAPPY_CHUNK: Final = 32 * 1024  # snappy-java's default block


class CodecError(ValueError):
    """Bytes that are not a valid stream of their codec."""


class TooLargeError(CodecError):
    """A stream that decompresses to more than the caller reads (``max_size``)."""


class TruncatedError(CodecError):
    """A gzip stream that ends before its last member does, past its first header:
    ``made`` is what it made until then. Java's GZIPInputStream throws EOFException
    there, which Kafka's record iterator takes for records cut short ("premature EOF",
    INVALID_RECORD) if it reads them past what the stream made; Kafka's lz4, snappy and
    zstd readers throw plain IOExceptions for a truncated stream."""

    def __init__(self, message: str, made: bytes) -> None:
        super().__init__(message)
        self.made = made


class UnsupportedCodecError(NotImplementedError):
    """An attribute naming no codec (5-7)."""


#: ``decompress``'s bound when its caller gives none: what a topic of the default
#: max.message.bytes reads (``records.max_decompressed_bytes``, docs/storage.md).
MAX_SIZE: Final = 16 * (1024 * 1024 + 12)


def readable(codec: int) -> bool:
    """Whether ``decompress`` reads this codec."""
    return codec in _READABLE


def decompress(codec: int, data: bytes | bytearray | memoryview, max_size: int = MAX_SIZE) -> bytes:
    """The bytes a batch's records body compressed with ``codec`` holds; CodecError if it
    is not a valid stream, TooLargeError (a CodecError) if they are more than
    ``max_size``, UnsupportedCodecError for an unknown codec.

    The whole body is made in memory (Kafka streams it, a record at a time), so what a
    few bytes may make is bounded: each decoder stops once it has made ``max_size``
    bytes, or a block or a slice of its stream past that (at most a few MB)."""
    if codec == NONE:
        if len(data) > max_size:
            raise TooLargeError(f"none: {len(data)} bytes, over the {max_size} read")
        return bytes(data)
    if codec == GZIP:
        try:
            return _gunzip(data, max_size)
        except zlib.error as e:
            raise CodecError(f"gzip: {e}") from None
    try:
        if codec == SNAPPY:
            return _snappy_decompress(bytes(data), max_size)
        if codec == LZ4:
            return _lz4_frame_decompress(bytes(data), max_size)
        if codec == ZSTD:
            return zstd.decompress(bytes(data), max_size)
    except CodecError:
        raise
    except zstd.ZstdTooLargeError as e:
        raise TooLargeError(f"zstd: {e}") from None
    except zstd.ZstdError as e:
        raise CodecError(f"zstd: {e}") from None
    except (IndexError, struct.error) as e:
        raise CodecError(f"{_NAMES[codec]}: truncated ({e})") from None
    except ValueError as e:
        # A backstop: a corrupt stream past a decoder's checks may end in one of Python's
        # (bytearray.append(256)); callers take CodecError for a batch that does not decode.
        raise CodecError(f"{_NAMES[codec]}: {e}") from None
    raise UnsupportedCodecError(f"decoding compression codec {codec} is not supported")


def compress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """``data`` as a stream of ``codec`` (see the module's docstring)."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        compressor = zlib.compressobj(wbits=31)
        return compressor.compress(data) + compressor.flush()
    if codec == SNAPPY:
        return snappy_xerial(bytes(data))
    if codec == LZ4:
        return lz4_frame(bytes(data))
    if codec == ZSTD:
        return zstd.compress(bytes(data))
    raise UnsupportedCodecError(f"encoding compression codec {codec} is not supported")


_NAMES: Final = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}


# --- gzip -------------------------------------------------------------------------

_GZIP_MEMBER: Final = b"\x1f\x8b\x08"  # a member's magic and method (deflate)
#: a member header's flags (RFC 1952) that GZIPInputStream.readHeader reads
_FHCRC: Final = 0x02
_FEXTRA: Final = 0x04
_FNAME: Final = 0x08
_FCOMMENT: Final = 0x10


def _gzip_header_end(src: bytes, pos: int) -> int | None:
    """Where the member header at ``pos`` ends, as Java's GZIPInputStream.readHeader
    reads one (magic, method 8, the optional fields its flags name, its CRC-16 if
    flagged); None if the bytes there are none or end before it does."""
    end = pos + 10
    if len(src) < end or src[pos : pos + 3] != _GZIP_MEMBER:
        return None
    flags = src[pos + 3]
    if flags & _FEXTRA:
        end += 2 + int.from_bytes(src[end : end + 2], "little")
    for field in (_FNAME, _FCOMMENT):
        if flags & field and end <= len(src):
            end = src.find(0, end) + 1  # zero-terminated (0: there is no zero)
            if end == 0:
                return None
    if flags & _FHCRC:
        end += 2
        if src[end - 2 : end] != (zlib.crc32(src[pos : end - 2]) & 0xFFFF).to_bytes(2, "little"):
            return None
    return end if end <= len(src) else None


def _gunzip(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    """Every member of a gzip stream (RFC 1952 lets one hold several), as Java's
    GZIPInputStream, which Kafka reads gzip batches with, reads them: zlib's one-shot
    decompress stopped after the first. Bytes after a member that do not start with a
    whole member header are ignored, as GZIPInputStream ignores them (not only where
    Java 8-22's readTrailer looks for another member: past 26 bytes left in its 8 KB
    buffer, a member following one that ends near its buffer's end was lost to Java);
    zlib checks each member's CRC-32 and size.
    A stream ending before its first header does is CodecError, as Kafka's
    CompressionType.wrapForInput fails it; one ending later TruncatedError.

    Each member is handed slices of the stream that double from 64 bytes, so what zlib
    copies back past a member's end (``unused_data``) is at most about the member's own
    size: handed the rest of the stream, a body of many small members cost the square of
    its size (2 MB of empty members, 13 s)."""
    src = bytes(data)
    if _gzip_header_end(src, 0) is None:
        raise CodecError("gzip: no member header (or a truncated one)")
    view = memoryview(src)
    out: list[bytes] = []
    left = max_size
    pos = 0
    while True:
        member = zlib.decompressobj(wbits=31)  # gzip only, as GZIPInputStream
        piece = 64
        while not member.eof:
            if pos >= len(view):
                raise TruncatedError("gzip: a truncated member", b"".join(out))
            given = view[pos : pos + piece]
            out.append(member.decompress(given, left + 1))  # zlib stops one byte past
            left -= len(out[-1])
            if left < 0:
                raise TooLargeError(f"gzip: over the {max_size} bytes read")
            # All it was given but what follows the member's end (zlib, not past
            # max_length, left none of it in unconsumed_tail).
            pos += len(given) - len(member.unused_data)
            piece *= 2
        # Another member only if a whole member header follows: GZIPInputStream's
        # readTrailer ignores the rest where its readHeader throws (a partial or bad
        # header); the records, counted, tell if any were in it.
        if _gzip_header_end(src, pos) is None:
            return b"".join(out)


# --- snappy -----------------------------------------------------------------------


def _snappy_decompress(src: bytes, max_size: int) -> bytes:
    if not src.startswith(_XERIAL_MAGIC):
        return _snappy_raw(src, 0, len(src), max_size)
    if len(src) < len(_XERIAL_HEADER):
        raise CodecError("snappy: a truncated xerial header")
    out = bytearray()
    pos = len(_XERIAL_HEADER)
    while pos < len(src):
        (length,) = _U32BE.unpack_from(src, pos)
        pos += 4
        if pos + length > len(src):
            raise CodecError(f"snappy: a chunk of {length} bytes past the stream's end")
        out += _snappy_raw(src, pos, pos + length, max_size - len(out))
        pos += length
    return bytes(out)


def _snappy_raw(src: bytes, pos: int, end: int, max_size: int) -> bytes:
    """One raw snappy stream, ``src[pos:end]``: a varint of the uncompressed length,
    then literals and copies; it may make no more than that length, nor that more than
    ``max_size``."""
    expected = 0
    shift = 0
    while True:
        b = src[pos]
        pos += 1
        expected |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 28:
            raise CodecError("snappy: a length varint over 5 bytes")
    if expected > max_size:
        raise TooLargeError(f"snappy: a stream of {expected} bytes, over the {max_size} read")
    out = bytearray()
    while pos < end:
        # What it made is checked every 64 KB of the stream (a copy makes at most 64
        # bytes of 2 or 3: 1.4 MB at most in between), not at every copy.
        if len(out) > expected:
            raise CodecError(f"snappy: over the {expected} bytes the stream says it holds")
        stop = min(pos + 65536, end)
        while pos < stop:
            tag = src[pos]
            pos += 1
            kind = tag & 3
            if kind == 0:  # a literal run
                length = tag >> 2
                if length >= 60:
                    extra = length - 59
                    length = int.from_bytes(src[pos : pos + extra], "little")
                    pos += extra
                literal_end = pos + length + 1
                if literal_end > end:
                    raise CodecError("snappy: a literal past the stream's end")
                out += src[pos:literal_end]
                pos = literal_end
                continue
            if kind == 1:
                length = ((tag >> 2) & 7) + 4
                offset = ((tag >> 5) << 8) | src[pos]
                pos += 1
            elif kind == 2:
                length = (tag >> 2) + 1
                offset = src[pos] | (src[pos + 1] << 8)
                pos += 2
            else:
                length = (tag >> 2) + 1
                (offset,) = _U32LE.unpack_from(src, pos)
                pos += 4
            if pos > end:
                raise CodecError("snappy: a copy past the stream's end")
            zstd.copy_match(out, offset, length, 0, CodecError, "snappy: a copy")
    if len(out) != expected:
        raise CodecError(f"snappy: {len(out)} bytes decoded, the stream says {expected}")
    return bytes(out)


def _snappy_raw_stream(data: bytes) -> bytes:
    """``data`` as one raw snappy stream: literal runs and copies (the greedy parse)."""
    out = bytearray()
    n = len(data)
    while True:  # the uncompressed length, a varint
        if n < 0x80:
            out.append(n)
            break
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    anchor = 0
    end = len(data)
    matches = lz77.find_matches(
        data, 0, end, table={}, floor=0, window=0xFFFF, last_start=end, last_end=end
    )
    for pos, offset, length in matches:
        _snappy_literals(out, data, anchor, pos)
        anchor = pos + length
        left = length
        while left:
            piece = min(left, 64)
            if 0 < left - piece < 4:  # no copy shorter than 4 left behind
                piece = left - 4
            if piece < 12 and offset < 2048:  # a copy with a 1-byte offset
                out.append(1 | ((piece - 4) << 2) | ((offset >> 8) << 5))
                out.append(offset & 0xFF)
            else:  # a copy with a 2-byte offset
                out.append(2 | ((piece - 1) << 2))
                out += offset.to_bytes(2, "little")
            left -= piece
    _snappy_literals(out, data, anchor, end)
    return bytes(out)


def _snappy_literals(out: bytearray, data: bytes, start: int, end: int) -> None:
    """``data[start:end]`` as literal runs of at most 64 KB each."""
    for run_start in range(start, end, 65536):
        run_end = min(run_start + 65536, end)
        length = run_end - run_start - 1
        if length < 60:
            out.append(length << 2)
        elif length < 256:
            out += bytes((60 << 2, length))
        else:
            out.append(61 << 2)
            out += length.to_bytes(2, "little")
        out += data[run_start:run_end]


def snappy_xerial(data: bytes) -> bytes:
    """``data`` in snappy-java's framing (as Kafka's Java producer writes it): 32 KB
    chunks, each a raw snappy stream compressed on its own."""
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, max(len(data), 1), _SNAPPY_CHUNK):
        chunk = _snappy_raw_stream(data[start : start + _SNAPPY_CHUNK])
        out += _U32BE.pack(len(chunk))
        out += chunk
    return bytes(out)


# --- lz4 --------------------------------------------------------------------------


def _lz4_frame_decompress(src: bytes, max_size: int) -> bytes:
    """The body's first LZ4 frame, as Kafka's KafkaLZ4BlockInputStream reads it: its
    stream ends at that frame's end mark, and bytes after it are not read (records past
    it are cut short, the record count checked); a body that does not start with a frame
    (a skippable one, or none) is refused, as is a frame of dependent blocks or with
    FLG's reserved bits set (FLG.validate), which librdkafka and the Java producer never
    write, and whose batch Java consumers could not read."""
    if len(src) < 4:
        raise CodecError("lz4: a truncated frame header")
    (magic,) = _U32LE.unpack_from(src, 0)
    if magic != _LZ4_MAGIC:
        raise CodecError(f"lz4: not a frame (magic {magic:#x})")
    flags = src[4]
    if flags >> 6 != 1:
        raise CodecError(f"lz4: frame version {flags >> 6}")
    if flags & 0x03:
        raise CodecError(f"lz4: reserved FLG bits set ({flags:#x}; a dictionary id among them)")
    if not flags & 0x20:
        raise CodecError("lz4: a frame of dependent blocks, which Kafka does not read")
    # No block holds, or decodes to, more than the frame's Block Maximum Size, as
    # Kafka's KafkaLZ4BlockInputStream refuses: a match's length goes on in bytes
    # of 255, so a block would otherwise make 255 times its size.
    block_max = _LZ4_BLOCK_MAX.get(src[5])
    if block_max is None:
        raise CodecError(f"lz4: a block maximum size byte of {src[5]:#x}")
    block_checksums = flags & 0x10
    header_end = 6 + (8 if flags & 0x08 else 0)
    content_checksum = flags & 0x04
    descriptor = src[4:header_end]
    if header_end >= len(src):
        raise CodecError("lz4: a truncated frame header")
    if src[header_end] != (xxh32(descriptor) >> 8) & 0xFF:
        raise CodecError("lz4: the frame header's checksum does not match")
    out = bytearray()
    pos = header_end + 1
    while True:
        (size,) = _U32LE.unpack_from(src, pos)
        pos += 4
        if size == 0:  # the end mark
            break
        stored = size & _LZ4_STORED
        size &= ~_LZ4_STORED & _MASK32
        end = pos + size
        if size > block_max:
            raise CodecError(f"lz4: a block of {size} bytes in a frame of {block_max}")
        if end > len(src):
            raise CodecError(f"lz4: a block of {size} bytes past the stream's end")
        if block_checksums:
            # xxHash32 of the block as stored, as KafkaLZ4BlockInputStream.readBlock
            # checks it: a block altered where it still decodes is refused.
            if end + 4 > len(src):
                raise CodecError("lz4: a truncated block checksum")
            if _U32LE.unpack_from(src, end)[0] != xxh32(src[pos:end]):
                raise CodecError("lz4: block checksum mismatch")
        if stored:
            out += src[pos:end]
        else:
            _lz4_block(src, pos, end, out, len(out) + block_max)
        if len(out) > max_size:
            raise TooLargeError(f"lz4: over the {max_size} bytes read")
        pos = end + (4 if block_checksums else 0)
    # Read past unverified, as KafkaLZ4BlockInputStream does ("TODO: verify this
    # content checksum"): a batch Kafka takes is taken.
    if pos + (4 if content_checksum else 0) > len(src):
        raise CodecError("lz4: a truncated frame")
    return bytes(out)


def _lz4_block(src: bytes, pos: int, end: int, out: bytearray, limit: int) -> None:
    """Decode one compressed block, ``src[pos:end]``, onto ``out`` (which holds the
    frame's earlier blocks; an independent block's matches may not reach into them, as
    Kafka decodes each block into a buffer of its own), which may not grow past
    ``limit``."""
    floor = len(out)
    while True:
        token = src[pos]
        pos += 1
        length = token >> 4
        if length == 15:
            length, pos = _lz4_length(src, pos, length)
        if length:
            literal_end = pos + length
            if literal_end > end:
                raise CodecError("lz4: a literal past the block's end")
            out += src[pos:literal_end]
            pos = literal_end
        if pos == end:  # the last sequence has literals only
            if len(out) > limit:
                raise CodecError("lz4: a block decoding to more than the frame's block size")
            return
        offset = src[pos] | (src[pos + 1] << 8)
        pos += 2
        length = token & 15
        if length == 15:
            length, pos = _lz4_length(src, pos, length)
            # Checked before the copy where a match's length goes on in bytes, the only
            # way a block makes far more than its size (shorter matches make at most 6
            # times it, checked at its end).
            if len(out) + length > limit:
                raise CodecError("lz4: a block decoding to more than the frame's block size")
        length += 4
        if pos >= end:
            raise CodecError("lz4: a block ends with a match")
        zstd.copy_match(out, offset, length, floor, CodecError, "lz4: a match")


def _lz4_length(src: bytes, pos: int, length: int) -> tuple[int, int]:
    """A length of 15 or more goes on in bytes, each added, until one is not 255."""
    while True:
        b = src[pos]
        pos += 1
        length += b
        if b != 255:
            return length, pos


def lz4_frame(data: bytes) -> bytes:
    """``data`` as an LZ4 frame of independent 64 KB blocks (no checksums but the
    header's), each compressed (the greedy parse) or stored if that is no smaller."""
    descriptor = bytes((0x60, 0x40))  # version 1, independent blocks; 64 KB blocks
    out = bytearray(_U32LE.pack(_LZ4_MAGIC))
    out += descriptor
    out.append((xxh32(descriptor) >> 8) & 0xFF)
    for start in range(0, len(data), _LZ4_BLOCK):
        end = min(start + _LZ4_BLOCK, len(data))
        block = _lz4_compressed_block(data, start, end)
        if len(block) < end - start:
            out += _U32LE.pack(len(block))
            out += block
        else:
            out += _U32LE.pack((end - start) | _LZ4_STORED)
            out += data[start:end]
    out += _U32LE.pack(0)
    return bytes(out)


def _lz4_compressed_block(data: bytes, start: int, end: int) -> bytearray:
    """``data[start:end]`` as one lz4 block: the last match begins 12 bytes before its end
    at the latest, and its last 5 bytes are literals (the format's end conditions)."""
    out = bytearray()
    anchor = start
    matches = lz77.find_matches(
        data,
        start,
        end,
        table={},
        floor=start,
        window=0xFFFF,
        last_start=end - 12,
        last_end=end - 5,
    )
    for pos, offset, length in matches:
        literals = pos - anchor
        extra = length - lz77.MIN_MATCH
        out.append((min(literals, 15) << 4) | min(extra, 15))
        if literals >= 15:
            _lz4_write_length(out, literals - 15)
        out += data[anchor:pos]
        out += offset.to_bytes(2, "little")
        if extra >= 15:
            _lz4_write_length(out, extra - 15)
        anchor = pos + length
    literals = end - anchor
    out.append(min(literals, 15) << 4)
    if literals >= 15:
        _lz4_write_length(out, literals - 15)
    out += data[anchor:end]
    return out


def _lz4_write_length(out: bytearray, n: int) -> None:
    """A length's part past 15: bytes of 255 while it lasts, then the rest."""
    whole, rest = divmod(n, 255)
    out += b"\xff" * whole
    out.append(rest)


# --- xxHash32 (the lz4 frame header's and blocks' checksums) ----------------------

_P1: Final = 2654435761
_P2: Final = 2246822519
_P3: Final = 3266489917
_P4: Final = 668265263
_P5: Final = 374761393


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK32


def _xxh32_lane(words: tuple[int, ...], v: int) -> int:
    """One of xxHash32's four accumulators over its words (every fourth of the input's),
    the rotation and multiplication inline: the loop is what checking a block costs."""
    for word in words:
        x = (v + word * _P2) & _MASK32
        v = (((x << 13) | (x >> 19)) * _P1) & _MASK32  # bits past 32 of the rotation drop
    return v


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 of ``data`` (the reference algorithm)."""
    n = len(data)
    pos = 0
    if n >= 16:
        pos = n - n % 16
        words = struct.unpack(f"<{pos // 4}I", data[:pos])
        v1 = _xxh32_lane(words[0::4], (seed + _P1 + _P2) & _MASK32)
        v2 = _xxh32_lane(words[1::4], (seed + _P2) & _MASK32)
        v3 = _xxh32_lane(words[2::4], seed & _MASK32)
        v4 = _xxh32_lane(words[3::4], (seed - _P1) & _MASK32)
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _MASK32
    else:
        h = (seed + _P5) & _MASK32
    h = (h + n) & _MASK32
    while pos + 4 <= n:
        (word,) = _U32LE.unpack_from(data, pos)
        h = (_rotl((h + word * _P3) & _MASK32, 17) * _P4) & _MASK32
        pos += 4
    while pos < n:
        h = (_rotl((h + data[pos] * _P5) & _MASK32, 11) * _P1) & _MASK32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _MASK32
    h ^= h >> 13
    h = (h * _P3) & _MASK32
    h ^= h >> 16
    return h
