"""zstd decompression (RFC 8878) in pure Python, for the batches ``storage.codecs`` reads.

What producers write: frames of raw, RLE and compressed blocks; literals raw, RLE or
Huffman-coded (one or four streams, the tree's weights direct or FSE-coded, or the
previous block's tree); sequences with predefined, RLE, FSE-coded or repeated tables and
the three repeat offsets. Not read: dictionaries (no Kafka client uses them). The frame's
content checksum, when given, is checked (xxh64 in pure Python, 0.16 s a MiB, a third
more than decoding it: the batch's CRC-32C covers the compressed bytes, not what they
decode to), as Kafka's zstd-jni checks it; its content size too.

The work is per literal (Huffman) and per sequence: about 12 MB/s on text, more where
matches are long (``bench_codecs.py``). The bit readers take a few bytes at a time, never
the whole stream as one integer (shifts of which cost its length).

What a frame may make is bounded as RFC 8878 bounds it: no block holds, or decodes to,
more than Block_Maximum_Size (the frame's window, at most 128 KB), the window is at most
128 MiB (zstd's own decoders' default limit, which Kafka's zstd-jni keeps), and a frame
that gives its content size makes no more. An RLE block's 21-bit size alone would
otherwise make 2 MB of 4 bytes, a compressed block's matches gigabytes. And what making
it costs is bounded by what it makes: the tables a stream builds, whatever little each
block makes, are charged against it (see the section on the work of building tables).

``compress`` writes what the log cleaner rewrites: a greedy parse's matches as sequences
coded with the predefined tables, the literals Huffman-coded (see the section at the
end).
"""

from __future__ import annotations

import heapq
import struct
from collections import Counter
from collections.abc import Callable
from operator import itemgetter
from typing import Final

from storage import lz77

__all__ = ["ZstdError", "ZstdTooLargeError", "compress", "copy_match", "decompress"]

MAGIC: Final = 0xFD2FB528
_U32: Final = struct.Struct("<I")


class ZstdError(ValueError):
    """Bytes that are not a valid zstd stream (or use a dictionary)."""


class ZstdTooLargeError(ZstdError):
    """A stream holding more than ``decompress``'s ``max_size``."""


# --- literal and match length codes (RFC 8878 3.1.1.3.2.1.1) --------------------------

_LL_BASE: Final = (
    *range(16),
    *(16, 18, 20, 22, 24, 28, 32, 40, 48, 64, 128, 256, 512, 1024, 2048, 4096),
    *(8192, 16384, 32768, 65536),
)
_LL_BITS: Final = (0,) * 16 + (1, 1, 1, 1, 2, 2, 3, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)
_ML_BASE: Final = (
    *range(3, 35),
    *(35, 37, 39, 41, 43, 47, 51, 59, 67, 83, 99, 131, 259, 515, 1027, 2051, 4099, 8195),
    *(16387, 32771, 65539),
)
_ML_BITS: Final = (0,) * 32 + (
    *(1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16),
)

# The predefined distributions (RFC 8878 3.1.1.3.2.2): normalized counts, accuracy log.
_LL_DEFAULT: Final = (
    (4, 3, *(2,) * 11, 1, 1, 1, *(2,) * 9, 3, 2, 1, 1, 1, 1, 1, -1, -1, -1, -1),
    6,
)
_ML_DEFAULT: Final = ((1, 4, 3, *(2,) * 6, *(1,) * 37, *(-1,) * 7), 6)
_OF_DEFAULT: Final = ((*(1,) * 6, 2, 2, 2, *(1,) * 15, *(-1,) * 5), 5)
_LL_MAX_LOG: Final = 9
_ML_MAX_LOG: Final = 9
_OF_MAX_LOG: Final = 8
_MAX_BLOCK: Final = 128 * 1024
#: the largest window read: zstd's own decoders' default limit (ZSTD_WINDOWLOG_LIMIT_DEFAULT,
#: 2**27), which zstd-jni, Kafka's zstd, keeps ("Frame requires too much memory")
_MAX_WINDOW: Final = 1 << 27
#: a Huffman tree's weights, the last symbol's deduced (RFC 8878 4.2.1): literals are bytes
_MAX_WEIGHTS: Final = 255


def copy_match(
    out: bytearray,
    offset: int,
    length: int,
    floor: int = 0,
    error: type[ValueError] = ZstdError,
    what: str = "a match",
) -> None:
    """Append ``length`` bytes from ``offset`` back in ``out``; overlapping what it
    writes (``length`` > ``offset``), the ``offset`` bytes repeat, as a byte-by-byte
    copy would make them (snappy's, lz4's and zstd's matches alike). An offset reaching
    before ``floor`` (the frame's start) or before anything was written is ``error``."""
    start = len(out) - offset
    if offset <= 0 or start < floor:
        raise error(f"{what} {offset} bytes back, {len(out) - floor} written")
    if length <= offset:
        out += out[start : start + length]
    else:
        pattern = bytes(out[start:])
        whole, rest = divmod(length, offset)
        out += pattern * whole + pattern[:rest]


# --- bit streams ------------------------------------------------------------------


class _Backward:
    """A backward bit stream (FSE and Huffman payloads): read from its last bit, after the
    padding marker (the last byte's highest set bit), towards its first. Bits past the
    start read as zeros; ``overflowed()`` tells."""

    __slots__ = ("bits", "data")

    def __init__(self, data: bytes) -> None:
        if not data or data[-1] == 0:
            raise ZstdError("a bit stream without its end marker")
        self.data = data
        self.bits = 8 * (len(data) - 1) + data[-1].bit_length() - 1

    def read(self, n: int) -> int:
        if n == 0:
            return 0
        self.bits -= n
        low = self.bits
        if low >= 0:
            start = low >> 3
            word = int.from_bytes(self.data[start : start + 8], "little")
            return (word >> (low & 7)) & ((1 << n) - 1)
        if low + n <= 0:
            return 0
        word = int.from_bytes(self.data[:8], "little")
        return (word & ((1 << (low + n)) - 1)) << -low

    def overflowed(self) -> bool:
        return self.bits < 0


def _read_forward(data: bytes, bit: int, n: int) -> int:
    start = bit >> 3
    word = int.from_bytes(data[start : start + 4], "little")
    return (word >> (bit & 7)) & ((1 << n) - 1)


# --- the work of building tables ---------------------------------------------------
#
# Literals (a Huffman lookup each) and sequences (each a match of 3 bytes at least) cost
# in proportion to what they make, which ``max_size`` bounds. The tables they are decoded
# with do not: every compressed block may declare three FSE tables and a Huffman tree,
# up to 3,647 cells built in Python, however little it makes. 16 bytes declaring 1,280
# cells for one 3-byte sequence took 1.7 ms, and 1 MB of such blocks 84 s to make 195 KB
# (the zstd tool: 0.4 s). So the cells are charged, as each table is about to be built,
# against what the stream has made so far: 65,536 whatever it makes, one more per byte.
#
# Legitimate streams stay far below: zstd sizes a table to what it codes and codes a
# block of few sequences with the predefined or the previous block's tables. The zstd
# tool at levels -5 to 22 on 700 inputs (block splitting included) and librdkafka's
# batches built at most 0.04 cells per byte made over a large stream, and 3,615 cells
# beyond that on their way (a frame's first blocks; librdkafka's batches in
# tests/unit/data/zstd, 5,694 in all at most). 65,536 cells, 18 blocks' largest tables,
# take some 0.05 s to build; past them the tables cost about what the bytes they paid for
# cost to decode.

#: table cells a stream may build whatever it makes, and per byte it has made
_TABLE_CELLS: Final = 1 << 16
_TABLE_CELLS_PER_BYTE: Final = 1


class _Work:
    """The table cells one ``decompress`` has built, against what it may build for what
    it has made so far (``out``): ZstdError past it."""

    __slots__ = ("cells", "out")

    def __init__(self, out: bytearray) -> None:
        self.out = out
        self.cells = 0

    def charge(self, cells: int) -> None:
        """``cells`` about to be built (a Huffman tree's weights counted as cells)."""
        built = self.cells = self.cells + cells
        made = len(self.out)
        if built > _TABLE_CELLS + _TABLE_CELLS_PER_BYTE * made:
            raise ZstdError(
                f"a stream declaring tables of {built} cells for the {made} bytes it made"
                f" (at most {_TABLE_CELLS} and {_TABLE_CELLS_PER_BYTE} a byte made)"
            )


# --- FSE tables -------------------------------------------------------------------


class _Fse:
    """A decoding table: each state's symbol, bits to read and next-state baseline."""

    __slots__ = ("accuracy_log", "base", "bits", "symbols")

    def __init__(self, counts: tuple[int, ...] | list[int], accuracy_log: int) -> None:
        # Built once per table a block declares (512 cells at most): the spread's order
        # and each count's bits and baseline come from tables kept per accuracy log,
        # leaving one pass over the cells here.
        size = 1 << accuracy_log
        spread: list[int] = []  # the symbols in the order the spread places them
        less_than_one: list[int] = []  # "less than 1": a cell each at the table's end
        next_desc = [1] * len(counts)
        for s, count in enumerate(counts):
            if count > 0:
                spread += [s] * count
                next_desc[s] = count
            elif count == -1:
                less_than_one.append(s)
        high = size - len(less_than_one)
        if len(spread) != high:
            raise ZstdError("an FSE table whose counts do not fill it")
        symbols = _spread(accuracy_log, high)(spread) if high > 1 else spread
        symbols = [*symbols, *reversed(less_than_one)]
        nb_of, base_of = _fse_steps(accuracy_log)
        bits = [0] * size
        base = [0] * size
        for state, s in enumerate(symbols):
            desc = next_desc[s]
            next_desc[s] = desc + 1
            bits[state] = nb_of[desc]
            base[state] = base_of[desc]
        self.accuracy_log = accuracy_log
        self.symbols = symbols
        self.bits = bits
        self.base = base

    @classmethod
    def rle(cls, symbol: int) -> _Fse:
        table = cls.__new__(cls)
        table.accuracy_log = 0
        table.symbols = [symbol]
        table.bits = [0]
        table.base = [0]
        return table


#: (accuracy log, cells of counts at least 1) -> the symbols by state, from the symbols
#: in spread order. At most 992 pairs (2 MB of pointers to ``_RANKS``'s ints), few in
#: practice: a legitimate table has few symbols of count "less than 1".
_SPREADS: dict[tuple[int, int], Callable[[list[int]], tuple[int, ...]]] = {}
#: accuracy log -> each state's bits and baseline by its symbol's next descriptor
_STEPS: dict[int, tuple[list[int], list[int]]] = {}
_RANKS: Final = tuple(range(1 << _LL_MAX_LOG))


def _spread(accuracy_log: int, high: int) -> Callable[[list[int]], tuple[int, ...]]:
    """FSE's spread of the cells below ``high`` (RFC 8878 4.1.1): from cell 0 on by a
    fixed step, skipping the cells from ``high`` up; as a getter picking each state's
    symbol out of the symbols listed in the order they are placed."""
    getter = _SPREADS.get((accuracy_log, high))
    if getter is None:
        size = 1 << accuracy_log
        step = (size >> 1) + (size >> 3) + 3
        mask = size - 1
        placed = [0] * high  # state -> its rank in the spread's order
        position = 0
        for rank in _RANKS[:high]:
            placed[position] = rank
            position = (position + step) & mask
            while position >= high:
                position = (position + step) & mask
        getter = _SPREADS[(accuracy_log, high)] = itemgetter(*placed)
    return getter


def _fse_steps(accuracy_log: int) -> tuple[list[int], list[int]]:
    steps = _STEPS.get(accuracy_log)
    if steps is None:
        size = 1 << accuracy_log
        nb_of = [0] * (2 * size)
        base_of = [0] * (2 * size)
        for desc in range(1, 2 * size):
            nb = accuracy_log - (desc.bit_length() - 1)
            nb_of[desc] = nb
            base_of[desc] = (desc << nb) - size
        steps = _STEPS[accuracy_log] = (nb_of, base_of)
    return steps


def _read_fse_table(
    data: bytes, pos: int, end: int, max_log: int, max_symbol: int, work: _Work
) -> tuple[_Fse, int]:
    """An FSE table description at ``data[pos:end]``: the table and where it ended."""
    bit = pos * 8
    accuracy_log = _read_forward(data, bit, 4) + 5
    bit += 4
    if accuracy_log > max_log:
        raise ZstdError(f"an FSE accuracy log of {accuracy_log} (at most {max_log})")
    work.charge(1 << accuracy_log)
    remaining = 1 << accuracy_log
    counts: list[int] = []
    while remaining > 0:
        if len(counts) > max_symbol:
            raise ZstdError("an FSE table with too many symbols")
        width = (remaining + 1).bit_length()
        value = _read_forward(data, bit, width)
        lower_mask = (1 << (width - 1)) - 1
        threshold = (1 << width) - 1 - (remaining + 1)
        if value & lower_mask < threshold:
            value &= lower_mask
            bit += width - 1
        else:
            if value > lower_mask:
                value -= threshold
            bit += width
        count = value - 1
        remaining -= -count if count < 0 else count
        counts.append(count)
        if count == 0:
            while True:
                repeat = _read_forward(data, bit, 2)
                bit += 2
                counts += [0] * repeat
                if repeat != 3:
                    break
                if len(counts) > max_symbol + 1:  # 2 bits a 3 zeros, to the stream's end
                    raise ZstdError("an FSE table with too many symbols")
    after = (bit + 7) >> 3
    if remaining != 0 or after > end or len(counts) > max_symbol + 1:
        raise ZstdError("a corrupt FSE table description")
    return _Fse(counts, accuracy_log), after


# --- Huffman literals -------------------------------------------------------------


class _Huffman:
    __slots__ = ("bits", "max_bits", "symbols")

    def __init__(self, weights: list[int], work: _Work) -> None:
        # Checked here too, whichever way the weights were read: symbols past 255 are no
        # bytes (their decoding raised a plain ValueError, not ZstdError).
        if len(weights) > _MAX_WEIGHTS:
            raise ZstdError(f"{len(weights)} Huffman weights (at most {_MAX_WEIGHTS})")
        total = sum(1 << (w - 1) for w in weights if w)
        if total == 0:
            raise ZstdError("a Huffman tree without weights")
        max_bits = total.bit_length()
        left = (1 << max_bits) - total
        if left & (left - 1):
            raise ZstdError("Huffman weights that do not complete a tree")
        weights = [*weights, left.bit_length()]
        if max_bits > 11:
            raise ZstdError(f"a Huffman code of {max_bits} bits (at most 11)")
        work.charge((1 << max_bits) + len(weights))
        # Codes by length, longest (smallest weight) first, each length's by symbol: one
        # pass over the weights, the cells filled a code at a time.
        by_weight: list[list[int]] = [[] for _ in range(max_bits + 1)]
        for s, w in enumerate(weights):
            if w:
                by_weight[w].append(s)
        symbols: list[int] = []
        bits: list[int] = []
        for weight in range(1, max_bits + 1):
            span = 1 << (weight - 1)
            nb = max_bits + 1 - weight
            for s in by_weight[weight]:
                symbols += [s] * span
            bits += [nb] * (span * len(by_weight[weight]))
        if len(symbols) != 1 << max_bits:
            raise ZstdError("a corrupt Huffman tree")
        self.max_bits = max_bits
        self.symbols = symbols
        self.bits = bits

    def decode(self, stream: bytes, count: int, out: bytearray) -> None:
        """``count`` literals of one backward stream onto ``out``."""
        if not stream or stream[-1] == 0:
            raise ZstdError("a Huffman stream without its end marker")
        position = 8 * (len(stream) - 1) + stream[-1].bit_length() - 1
        max_bits = self.max_bits
        mask = (1 << max_bits) - 1
        symbols = self.symbols
        bits = self.bits
        first = int.from_bytes(stream[:3], "little")
        for _ in range(count):
            low = position - max_bits
            if low >= 0:
                start = low >> 3
                peek = (int.from_bytes(stream[start : start + 3], "little") >> (low & 7)) & mask
            else:
                peek = ((first & ((1 << position) - 1)) << -low) & mask if position > 0 else 0
            out.append(symbols[peek])
            position -= bits[peek]
        if position != 0:
            raise ZstdError("a Huffman stream not consumed exactly")


def _read_huffman_tree(data: bytes, pos: int, end: int, work: _Work) -> tuple[_Huffman, int]:
    header = data[pos]
    pos += 1
    if header >= 128:  # the weights direct, 4 bits each
        count = header - 127
        size = (count + 1) // 2
        if pos + size > end:
            raise ZstdError("Huffman weights past the block's end")
        weights = []
        for i in range(count):
            byte = data[pos + i // 2]
            weights.append(byte >> 4 if i % 2 == 0 else byte & 15)
        return _Huffman(weights, work), pos + size
    stop = pos + header
    if stop > end:
        raise ZstdError("Huffman weights past the block's end")
    table, start = _read_fse_table(data, pos, stop, 6, 255, work)
    stream = _Backward(data[start:stop])
    one = stream.read(table.accuracy_log)
    two = stream.read(table.accuracy_log)
    weights = []
    symbols, nbits, base = table.symbols, table.bits, table.base
    while True:  # two interleaved states, until the stream is used up
        weights.append(symbols[one])
        one = base[one] + stream.read(nbits[one])
        if stream.overflowed():
            weights.append(symbols[two])
            break
        weights.append(symbols[two])
        two = base[two] + stream.read(nbits[two])
        if stream.overflowed():
            weights.append(symbols[one])
            break
        if len(weights) > _MAX_WEIGHTS:  # the exits above append one more: _Huffman checks
            raise ZstdError(f"{len(weights)} Huffman weights (at most {_MAX_WEIGHTS})")
    return _Huffman(weights, work), stop


# --- the content checksum ---------------------------------------------------------
#
# xxHash64 (the reference algorithm: 4 accumulators over 32-byte stripes, then the tail),
# of which a frame with the checksum flag holds the low 32 bits after its last block.
# librdkafka and Kafka's Java producer write none; the zstd tool and Go's
# klauspost/compress (sarama, franz-go) do by default.

_P64_1: Final = 0x9E3779B185EBCA87
_P64_2: Final = 0xC2B2AE3D27D4EB4F
_P64_3: Final = 0x165667B19E3779F9
_P64_4: Final = 0x85EBCA77C2B2AE63
_P64_5: Final = 0x27D4EB2F165667C5
_MASK64: Final = (1 << 64) - 1


def _xxh64_round(acc: int, lane: int) -> int:
    acc = (acc + lane * _P64_2) & _MASK64
    return (((acc << 31) | (acc >> 33)) & _MASK64) * _P64_1 & _MASK64


def xxh64(data: bytes | bytearray | memoryview, seed: int = 0) -> int:
    """xxHash64 of ``data``, whose low 32 bits a frame's content checksum holds (RFC 8878
    3.1.1)."""
    n = len(data)
    pos = 0
    mask = _MASK64
    if n >= 32:
        stripes = n >> 5
        lanes = struct.unpack_from(f"<{stripes * 4}Q", data)
        p1, p2 = _P64_1, _P64_2
        accumulators = []
        # Each accumulator takes every fourth lane; its rounds inline, unmasked after the
        # multiplication (the next round's sum is masked): this is the checksum's cost.
        for k, start in enumerate((seed + p1 + p2, seed + p2, seed, seed - p1)):
            acc = start & mask
            for lane in lanes[k::4]:
                a = (acc + lane * p2) & mask
                acc = (a << 31 & mask | a >> 33) * p1
            accumulators.append(acc & mask)
        pos = stripes << 5
        v1, v2, v3, v4 = accumulators
        h = (
            ((v1 << 1 | v1 >> 63) & mask)
            + ((v2 << 7 | v2 >> 57) & mask)
            + ((v3 << 12 | v3 >> 52) & mask)
            + ((v4 << 18 | v4 >> 46) & mask)
        ) & mask
        for v in (v1, v2, v3, v4):
            h = ((h ^ _xxh64_round(0, v)) * _P64_1 + _P64_4) & mask
    else:
        h = (seed + _P64_5) & mask
    h = (h + n) & mask
    while pos + 8 <= n:
        h ^= _xxh64_round(0, int.from_bytes(data[pos : pos + 8], "little"))
        h = (((h << 27 | h >> 37) & mask) * _P64_1 + _P64_4) & mask
        pos += 8
    if pos + 4 <= n:
        h ^= int.from_bytes(data[pos : pos + 4], "little") * _P64_1 & mask
        h = (((h << 23 | h >> 41) & mask) * _P64_2 + _P64_3) & mask
        pos += 4
    while pos < n:
        h ^= data[pos] * _P64_5 & mask
        h = ((h << 11 | h >> 53) & mask) * _P64_1 & mask
        pos += 1
    h ^= h >> 33
    h = h * _P64_2 & mask
    h ^= h >> 29
    h = h * _P64_3 & mask
    h ^= h >> 32
    return h


# --- blocks -----------------------------------------------------------------------


class _FrameState:
    """What a frame's compressed blocks hand on to the next: the Huffman tree, the
    sequence tables and the repeat offsets."""

    __slots__ = ("huffman", "ll", "ml", "of", "offsets", "work")

    def __init__(self, work: _Work) -> None:
        self.work = work
        self.huffman: _Huffman | None = None
        self.ll: _Fse | None = None
        self.ml: _Fse | None = None
        self.of: _Fse | None = None
        self.offsets = [1, 4, 8]


_DEFAULT_TABLES: dict[str, _Fse] = {}


def _default(name: str) -> _Fse:
    table = _DEFAULT_TABLES.get(name)
    if table is None:
        counts, log = {"ll": _LL_DEFAULT, "ml": _ML_DEFAULT, "of": _OF_DEFAULT}[name]
        table = _DEFAULT_TABLES[name] = _Fse(counts, log)
    return table


def _literals(
    data: bytes, pos: int, end: int, state: _FrameState, block_max: int
) -> tuple[bytes, int]:
    kind = data[pos] & 3
    size_format = (data[pos] >> 2) & 3
    if kind < 2:  # raw or RLE
        if size_format in (0, 2):
            size, pos = data[pos] >> 3, pos + 1
        elif size_format == 1:
            size, pos = (data[pos] | data[pos + 1] << 8) >> 4, pos + 2
        else:
            size, pos = (data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16) >> 4, pos + 3
        if kind == 0:
            if pos + size > end:
                raise ZstdError("raw literals past the block's end")
            return data[pos : pos + size], pos + size
        if pos >= end:
            raise ZstdError("RLE literals past the block's end")
        if size > block_max:
            raise ZstdError(f"{size} RLE literals in a block of {block_max} bytes at most")
        return bytes((data[pos],)) * size, pos + 1
    header_size = (3, 3, 4, 5)[size_format]
    value = int.from_bytes(data[pos : pos + header_size], "little")
    width = (10, 10, 14, 18)[size_format]
    regenerated = (value >> 4) & ((1 << width) - 1)
    compressed = (value >> (4 + width)) & ((1 << width) - 1)
    pos += header_size
    stop = pos + compressed
    if stop > end:
        raise ZstdError("Huffman literals past the block's end")
    if regenerated > block_max:
        raise ZstdError(f"{regenerated} literals in a block of {block_max} bytes at most")
    if kind == 2:
        state.huffman, pos = _read_huffman_tree(data, pos, stop, state.work)
    elif state.huffman is None:
        raise ZstdError("treeless literals with no earlier tree")
    huffman = state.huffman
    out = bytearray()
    if size_format == 0:
        huffman.decode(data[pos:stop], regenerated, out)
    else:
        if pos + 6 > stop:
            raise ZstdError("a jump table past the literals' end")
        sizes = struct.unpack_from("<3H", data, pos)
        pos += 6
        each = (regenerated + 3) // 4
        for i, size in enumerate((*sizes, stop - pos - sum(sizes))):
            if size < 0 or pos + size > stop:
                raise ZstdError("a Huffman stream past the literals' end")
            huffman.decode(data[pos : pos + size], each if i < 3 else regenerated - 3 * each, out)
            pos += size
    if len(out) != regenerated:
        raise ZstdError("literals of the wrong length")
    return bytes(out), stop


def _table(
    data: bytes,
    pos: int,
    end: int,
    mode: int,
    name: str,
    max_log: int,
    max_symbol: int,
    previous: _Fse | None,
    work: _Work,
) -> tuple[_Fse, int]:
    if mode == 0:
        return _default(name), pos
    if mode == 1:
        if pos >= end:
            raise ZstdError("an RLE sequence table past the block's end")
        if data[pos] > max_symbol:
            raise ZstdError("an RLE sequence code out of range")
        return _Fse.rle(data[pos]), pos + 1
    if mode == 2:
        return _read_fse_table(data, pos, end, max_log, max_symbol, work)
    if previous is None:
        raise ZstdError("a repeated sequence table with no earlier one")
    return previous, pos


def _compressed_block(
    data: bytes,
    pos: int,
    end: int,
    out: bytearray,
    frame_start: int,
    state: _FrameState,
    block_max: int,
) -> None:
    """One compressed block onto ``out``; what it decodes to may not exceed
    ``block_max`` (RFC 8878's Block_Maximum_Size), checked as it goes: its matches
    could otherwise make gigabytes of a 128 KB block."""
    limit = len(out) + block_max
    literals, pos = _literals(data, pos, end, state, block_max)
    if pos >= end:
        raise ZstdError("a block without its sequences section")
    first = data[pos]
    if first == 0:
        out += literals
        if pos + 1 != end:
            raise ZstdError("bytes after a block's sequences")
        return
    if first < 128:
        count, pos = first, pos + 1
    elif first < 255:
        count, pos = ((first - 128) << 8) + data[pos + 1], pos + 2
    else:
        count, pos = data[pos + 1] + (data[pos + 2] << 8) + 0x7F00, pos + 3
    modes = data[pos]
    pos += 1
    if modes & 3:
        raise ZstdError("reserved bits set in the sequence modes")
    work = state.work
    ll, pos = _table(data, pos, end, modes >> 6, "ll", _LL_MAX_LOG, 35, state.ll, work)
    of, pos = _table(data, pos, end, (modes >> 4) & 3, "of", _OF_MAX_LOG, 31, state.of, work)
    ml, pos = _table(data, pos, end, (modes >> 2) & 3, "ml", _ML_MAX_LOG, 52, state.ml, work)
    state.ll, state.of, state.ml = ll, of, ml
    stream = _Backward(data[pos:end])
    read = stream.read
    ll_state = read(ll.accuracy_log)
    of_state = read(of.accuracy_log)
    ml_state = read(ml.accuracy_log)
    ll_symbols, ll_bits, ll_base = ll.symbols, ll.bits, ll.base
    of_symbols, of_bits, of_base = of.symbols, of.bits, of.base
    ml_symbols, ml_bits, ml_base = ml.symbols, ml.bits, ml.base
    # This loop runs once per sequence: what it reads often is in locals.
    ml_base_of, ml_extra_of = _ML_BASE, _ML_BITS
    ll_base_of, ll_extra_of = _LL_BASE, _LL_BITS
    stream_data = stream.data
    bitpos = stream.bits
    rep0, rep1, rep2 = state.offsets
    literal_count = len(literals)
    used = 0
    last = count - 1
    for i in range(count):
        of_code = of_symbols[of_state]
        ml_code = ml_symbols[ml_state]
        ll_code = ll_symbols[ll_state]
        if of_code > 31:
            raise ZstdError("an offset code out of range")
        ml_extra = ml_extra_of[ml_code]
        ll_extra = ll_extra_of[ll_code]
        need = of_code + ml_extra + ll_extra
        if i != last:
            ll_nb = ll_bits[ll_state]
            ml_nb = ml_bits[ml_state]
            of_nb = of_bits[of_state]
            need += ll_nb + ml_nb + of_nb
        low = bitpos - need
        if low >= 0 and need <= 56:
            # One read of the sequence's bits (nearly always): the fields from the top.
            start = low >> 3
            word = int.from_bytes(stream_data[start : start + 8], "little") >> (low & 7)
            bitpos = low
            need -= of_code
            offset_value = (1 << of_code) + ((word >> need) & ((1 << of_code) - 1))
            need -= ml_extra
            match = ml_base_of[ml_code] + ((word >> need) & ((1 << ml_extra) - 1))
            need -= ll_extra
            length = ll_base_of[ll_code] + ((word >> need) & ((1 << ll_extra) - 1))
            if i != last:
                need -= ll_nb
                ll_state = ll_base[ll_state] + ((word >> need) & ((1 << ll_nb) - 1))
                need -= ml_nb
                ml_state = ml_base[ml_state] + ((word >> need) & ((1 << ml_nb) - 1))
                of_state = of_base[of_state] + (word & ((1 << of_nb) - 1))
        else:
            stream.bits = bitpos
            offset_value = (1 << of_code) + read(of_code)
            match = ml_base_of[ml_code] + read(ml_extra)
            length = ll_base_of[ll_code] + read(ll_extra)
            if i != last:
                ll_state = ll_base[ll_state] + read(ll_bits[ll_state])
                ml_state = ml_base[ml_state] + read(ml_bits[ml_state])
                of_state = of_base[of_state] + read(of_bits[of_state])
            bitpos = stream.bits
        if offset_value > 3:
            offset = offset_value - 3
            rep0, rep1, rep2 = offset, rep0, rep1
        else:
            index = offset_value - 1 + (length == 0)
            if index == 0:
                offset = rep0
            elif index == 1:
                offset = rep1
                rep0, rep1 = rep1, rep0
            else:
                offset = rep2 if index == 2 else rep0 - 1
                rep0, rep1, rep2 = offset, rep0, rep1
        if length:
            if used + length > literal_count:
                raise ZstdError("a sequence past the block's literals")
            out += literals[used : used + length]
            used += length
        written = len(out)
        if written + match > limit:  # before the copy: nothing is made past it
            raise ZstdError(f"a block decoding to over {block_max} bytes, its maximum")
        start = written - offset
        if match <= offset and offset > 0 and start >= frame_start:
            out += out[start : start + match]
        else:  # overlapping, or an offset out of range (which it raises)
            copy_match(out, offset, match, frame_start)
    state.offsets = [rep0, rep1, rep2]
    if bitpos != 0:
        raise ZstdError("a sequence stream not consumed exactly")
    out += literals[used:]
    if len(out) > limit:
        raise ZstdError(f"a block decoding to over {block_max} bytes, its maximum")


def _frame(data: bytes, pos: int, out: bytearray, max_size: int, work: _Work) -> int:
    """One frame's content onto ``out``, which may not grow past ``max_size``; returns
    where it ended."""
    descriptor = data[pos]
    pos += 1
    if descriptor & 0x08:
        raise ZstdError("a reserved bit set in the frame header")
    single_segment = descriptor & 0x20
    window = 0
    if not single_segment:  # the window descriptor (RFC 8878 3.1.1.1.2)
        exponent, mantissa = data[pos] >> 3, data[pos] & 7
        window = (1 << (10 + exponent)) + (1 << (7 + exponent)) * mantissa
        pos += 1
    dict_size = (0, 1, 2, 4)[descriptor & 3]
    if dict_size and int.from_bytes(data[pos : pos + dict_size], "little"):
        raise ZstdError("a frame needing a dictionary")
    pos += dict_size
    fcs_flag = descriptor >> 6
    fcs_size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    content_size = None
    if fcs_size:
        content_size = int.from_bytes(data[pos : pos + fcs_size], "little")
        if fcs_size == 2:
            content_size += 256
        pos += fcs_size
    if single_segment:  # then the content size is given, and is the window
        window = content_size or 0
    if window > _MAX_WINDOW:
        raise ZstdError(f"a window of {window} bytes, over the {_MAX_WINDOW} zstd reads")
    # RFC 8878's Block_Maximum_Size: no block holds or decodes to more.
    block_max = min(window, _MAX_BLOCK)
    start = len(out)
    if content_size is not None and start + content_size > max_size:
        raise ZstdTooLargeError(f"a frame of {content_size} bytes, over the {max_size} read")
    state = _FrameState(work)
    while True:
        if pos + 3 > len(data):
            raise ZstdError("a truncated block header")
        header = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
        pos += 3
        last = header & 1
        kind = (header >> 1) & 3
        size = header >> 3
        if size > block_max:  # an RLE block's size is what it decodes to
            raise ZstdError(f"a block of {size} bytes in a frame of {block_max}-byte blocks")
        if kind == 0:
            if pos + size > len(data):
                raise ZstdError("a raw block past the frame's end")
            out += data[pos : pos + size]
            pos += size
        elif kind == 1:
            if pos >= len(data):
                raise ZstdError("an RLE block past the frame's end")
            out += bytes((data[pos],)) * size
            pos += 1
        elif kind == 2:
            if pos + size > len(data):
                raise ZstdError("a compressed block past the frame's end")
            _compressed_block(data, pos, pos + size, out, start, state, block_max)
            pos += size
        else:
            raise ZstdError("a reserved block type")
        if content_size is not None and len(out) - start > content_size:
            raise ZstdError(f"over the {content_size} bytes the frame says it holds")
        if len(out) > max_size:
            raise ZstdTooLargeError(f"over the {max_size} bytes read")
        if last:
            break
    if content_size is not None and len(out) - start != content_size:
        raise ZstdError(f"{len(out) - start} bytes decoded, the frame says {content_size}")
    if descriptor & 0x04:  # the content checksum: xxh64's low 32 bits
        if pos + 4 > len(data):
            raise ZstdError("a truncated frame")
        (checksum,) = _U32.unpack_from(data, pos)
        pos += 4
        with memoryview(out)[start:] as content:  # released: ``out`` grows on
            digest = xxh64(content)
        if digest & 0xFFFFFFFF != checksum:
            # zstd-jni, Kafka's: "Restored data doesn't match checksum"
            raise ZstdError("the frame's content does not match its checksum")
    return pos


def decompress(data: bytes, max_size: int = 1 << 62) -> bytes:
    """The content of the zstd frames in ``data`` (skippable frames skipped);
    ZstdTooLargeError once it is more than ``max_size`` bytes (checked as each block is
    made: 128 KB past it at most)."""
    out = bytearray()
    work = _Work(out)
    pos = 0
    try:
        while pos < len(data):
            (magic,) = _U32.unpack_from(data, pos)
            if magic & 0xFFFFFFF0 == 0x184D2A50:
                (size,) = _U32.unpack_from(data, pos + 4)
                pos += 8 + size
                continue
            if magic != MAGIC:
                raise ZstdError(f"not a zstd frame (magic {magic:#x})")
            pos = _frame(data, pos + 4, out, max_size, work)
    except (IndexError, struct.error) as e:
        raise ZstdError(f"truncated ({e})") from None
    return bytes(out)


# --- compression ------------------------------------------------------------------
#
# Frames of compressed blocks: the greedy parse's matches (``storage.lz77``) as sequences
# coded with the predefined FSE tables (repeat offsets not used), their literals
# Huffman-coded (a code of at most 11 bits, its weights direct or FSE-coded) where that is
# smaller than raw. A block the sequences do not make smaller is written raw.

#: a length code's baseline and extra bits for lengths under 64 (literal) / 128 (match
#: - 3); above, the code follows the length's highest bit (RFC 8878 3.1.1.3.2.1.1).
_LL_CODE: Final = tuple(
    max(code for code, base in enumerate(_LL_BASE) if base <= n) for n in range(64)
)
_ML_CODE: Final = tuple(
    max(code for code, base in enumerate(_ML_BASE) if base <= n + 3) for n in range(128)
)


class _FseEncoder:
    """A predefined table turned around: for a symbol and the state the decoder goes to
    next, the state that decodes the symbol there and the bits that lead to it."""

    __slots__ = ("accuracy_log", "first", "step")

    def __init__(self, table: _Fse) -> None:
        self.accuracy_log = table.accuracy_log
        size = 1 << table.accuracy_log
        count = max(table.symbols) + 1
        #: step[symbol][next state] = (state, its bits count, the bits)
        self.step: list[list[tuple[int, int, int]]] = [[(0, 0, 0)] * size for _ in range(count)]
        self.first = [-1] * count  # a state decoding the symbol, to begin with
        for state, symbol in enumerate(table.symbols):
            nb = table.bits[state]
            base = table.base[state]
            row = self.step[symbol]
            for value in range(1 << nb):
                row[base + value] = (state, nb, value)
            if self.first[symbol] < 0:
                self.first[symbol] = state


_ENCODERS: dict[str, _FseEncoder] = {}


def _encoder(name: str) -> _FseEncoder:
    encoder = _ENCODERS.get(name)
    if encoder is None:
        encoder = _ENCODERS[name] = _FseEncoder(_default(name))
    return encoder


def _sequences_section(codes: list[tuple[int, int, int, int, int]]) -> bytearray:
    """The sequences' header (count, predefined tables) and bit stream; each sequence as
    its literal length, match length and offset codes, then their extra bits (the literal
    length's lowest) and how many there are."""
    out = bytearray()
    count = len(codes)
    if count < 128:
        out.append(count)
    elif count < 0x7F00:
        out += bytes(((count >> 8) + 128, count & 0xFF))
    else:
        out.append(255)
        out += (count - 0x7F00).to_bytes(2, "little")
    out.append(0)  # every table predefined
    ll, ml, of = _encoder("ll"), _encoder("ml"), _encoder("of")
    ll_step, ml_step, of_step = ll.step, ml.step, of.step
    # A backward bit stream, written forwards (the decoder reads the last bits first):
    # the last sequence first, each one's state transitions (offset, match length,
    # literal length) below its extra bits. ``bits`` holds what is not yet in ``out``.
    ll_code, ml_code, of_code, extra, bits_count = codes[-1]
    ll_state, ml_state, of_state = ll.first[ll_code], ml.first[ml_code], of.first[of_code]
    bits = extra
    count = bits_count
    for i in range(len(codes) - 2, -1, -1):
        ll_code, ml_code, of_code, extra, extra_count = codes[i]
        of_state, group_count, group = of_step[of_code][of_state]
        ml_state, nb, value = ml_step[ml_code][ml_state]
        group |= value << group_count
        group_count += nb
        ll_state, nb, value = ll_step[ll_code][ll_state]
        group |= (value | extra << nb) << group_count
        bits |= group << count
        count += group_count + nb + extra_count
        if count >= 64:
            whole = count >> 3
            out += (bits & ((1 << (whole << 3)) - 1)).to_bytes(whole, "little")
            bits >>= whole << 3
            count -= whole << 3
    bits |= (ml_state | of_state << ml.accuracy_log) << count
    count += ml.accuracy_log + of.accuracy_log
    bits |= (ll_state | 1 << ll.accuracy_log) << count  # and the end marker
    count += ll.accuracy_log + 1
    out += bits.to_bytes((count + 7) >> 3, "little")
    return out


_HUFFMAN_MAX_BITS: Final = 11
_HUFFMAN_MAX_SYMBOL: Final = 128  # the most the weights' direct form describes


def _huffman_lengths(counts: dict[int, int]) -> dict[int, int]:
    """Each symbol's code length in a Huffman code of its count, at most 11 bits (counts
    flattened, halved, until the code is that short)."""
    while True:
        heap: list[tuple[int, int, tuple[int, ...]]] = [
            (count, i, (symbol,)) for i, (symbol, count) in enumerate(sorted(counts.items()))
        ]
        heapq.heapify(heap)
        lengths = dict.fromkeys(counts, 0)
        serial = len(heap)
        while len(heap) > 1:
            count_a, _, a = heapq.heappop(heap)
            count_b, _, b = heapq.heappop(heap)
            for symbol in a + b:
                lengths[symbol] += 1
            heapq.heappush(heap, (count_a + count_b, serial, a + b))
            serial += 1
        if max(lengths.values()) <= _HUFFMAN_MAX_BITS:
            return lengths
        counts = {symbol: (count + 1) // 2 for symbol, count in counts.items()}


def _huffman_literals(literals: bytes) -> bytearray | None:
    """A literals section of Huffman-coded literals (the weights direct where the
    highest byte is 128 at most, else FSE-coded; one stream up to 1023 literals, four
    above), or None where raw literals are no larger or the code cannot be described
    (fewer than two distinct bytes, or weights whose description takes 128 bytes)."""
    size = len(literals)
    if size < 64:
        return None
    counts = dict(Counter(literals))
    last = max(counts)
    if len(counts) < 2:
        return None
    lengths = _huffman_lengths(counts)
    max_bits = max(lengths.values())
    # Codes as the decoder assigns them: by weight (longest first), each weight's by symbol.
    code = [0] * 256
    length = [0] * 256
    position = 0
    for nb in range(max_bits, 0, -1):
        for symbol in sorted(s for s, n in lengths.items() if n == nb):
            code[symbol] = position >> (max_bits - nb)
            length[symbol] = nb
            position += 1 << (max_bits - nb)
    weights = [max_bits + 1 - length[s] if length[s] else 0 for s in range(last)]
    tree: bytearray | None
    if last <= _HUFFMAN_MAX_SYMBOL:  # the weights direct, 4 bits each
        tree = bytearray((127 + last,))
        for i in range(0, last, 2):
            tree.append(weights[i] << 4 | (weights[i + 1] if i + 1 < last else 0))
    else:
        tree = _fse_weights(weights)
    if tree is None:
        return None
    if size <= 1023:
        streams = [_huffman_stream(literals, code, length)]
    else:
        each = (size + 3) // 4
        streams = [
            _huffman_stream(literals[i * each : (i + 1) * each], code, length) for i in range(4)
        ]
    # Four streams: a jump table of the first three's sizes.
    jump = b"".join(len(stream).to_bytes(2, "little") for stream in streams[:3] if size > 1023)
    compressed = len(tree) + len(jump) + sum(len(stream) for stream in streams)
    if size <= 1023:
        size_format, width = 0, 10  # raw literals are smaller should it not fit 10 bits
    elif compressed <= 16383 and size <= 16383:
        size_format, width = 2, 14
    else:
        size_format, width = 3, 18
    header_size = (3, 3, 4, 5)[size_format]
    if header_size + compressed >= size + 3:
        return None
    header = 2 | size_format << 2 | size << 4 | compressed << (4 + width)
    out = bytearray(header.to_bytes(header_size, "little"))
    out += tree
    out += jump
    for stream in streams:
        out += stream
    return out


_WEIGHTS_LOG: Final = 6  # the FSE table's accuracy for Huffman weights (at most 6)


def _fse_weights(weights: list[int]) -> bytearray | None:
    """Huffman weights FSE-coded (RFC 8878 4.2.1.2): their table's description, then a
    backward stream of two interleaved states; None if that takes 128 bytes or more."""
    n = len(weights)
    size = 1 << _WEIGHTS_LOG
    counts = Counter(weights)
    # Normalized counts: each weight present at least 1, the most common takes the rest.
    normalized = [0] * (max(counts) + 1)
    for weight, count in counts.items():
        normalized[weight] = max(1, count * size // n)
    top = max(counts, key=lambda w: counts[w])
    normalized[top] += size - sum(normalized)
    if normalized[top] < 1:
        return None
    table = _Fse(normalized, _WEIGHTS_LOG)
    encoder = _FseEncoder(table)
    # The decoder's states: "one" decodes weights 0, 2, 4..., "two" 1, 3, 5...; after a
    # weight its state moves to the one decoding the weight two later, reading bits. The
    # last two weights' states are where it starts from the end; the one decoding the
    # second to last must read bits to move on (the read past the stream's start is how
    # the decoder knows it is done).
    states = [0] * n
    states[n - 1] = encoder.first[weights[n - 1]]
    states[n - 2] = next(
        (
            state
            for state, symbol in enumerate(table.symbols)
            if symbol == weights[n - 2] and table.bits[state] > 0
        ),
        -1,
    )
    if states[n - 2] < 0:
        return None
    step = encoder.step
    out = bytearray()
    bits = 0
    count = 0
    for k in range(n - 3, -1, -1):
        states[k], nb, value = step[weights[k]][states[k + 2]]
        bits |= value << count
        count += nb
    bits |= (states[1] | states[0] << _WEIGHTS_LOG) << count
    count += 2 * _WEIGHTS_LOG
    bits |= 1 << count  # the end marker
    count += 1
    stream = bits.to_bytes((count + 7) >> 3, "little")
    description = _fse_description(normalized, _WEIGHTS_LOG)
    if len(description) + len(stream) >= 128:
        return None
    out.append(len(description) + len(stream))
    out += description
    out += stream
    return out


def _fse_description(counts: list[int], accuracy_log: int) -> bytes:
    """An FSE table's description (RFC 8878 4.1.1), as ``_read_fse_table`` reads it: the
    accuracy log, then each symbol's count plus one in as few bits as what is left allows,
    a zero followed by 2-bit counts of more zeros."""
    bits = accuracy_log - 5
    count_bits = 4
    remaining = 1 << accuracy_log
    symbol = 0
    while remaining > 0:
        value = counts[symbol] + 1
        width = (remaining + 1).bit_length()
        lower_mask = (1 << (width - 1)) - 1
        threshold = (1 << width) - 1 - (remaining + 1)
        if value < threshold:
            bits |= value << count_bits
            count_bits += width - 1
        else:
            bits |= (value if value <= lower_mask else value + threshold) << count_bits
            count_bits += width
        remaining -= abs(counts[symbol])
        symbol += 1
        if value == 1:  # a zero: how many more follow
            zeros = 0
            while symbol + zeros < len(counts) and counts[symbol + zeros] == 0:
                zeros += 1
            symbol += zeros
            while True:
                bits |= min(zeros, 3) << count_bits
                count_bits += 2
                if zeros < 3:
                    break
                zeros -= 3
    return bits.to_bytes((count_bits + 7) >> 3, "little")


def _huffman_stream(literals: bytes, code: list[int], length: list[int]) -> bytes:
    """One backward stream of Huffman codes: the first literal read first, so written last."""
    out = bytearray()
    bits = 0
    count = 0
    for symbol in reversed(literals):
        bits |= code[symbol] << count
        count += length[symbol]
        if count >= 64:
            out += (bits & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little")
            bits >>= 64
            count -= 64
    bits |= 1 << count  # the end marker
    count += 1
    out += bits.to_bytes((count + 7) >> 3, "little")
    return bytes(out)


def _compressed_block_body(
    data: bytes, start: int, end: int, matches: list[lz77.Match]
) -> bytearray:
    """The body of a compressed block holding ``data[start:end]``: the literals, then the
    matches as sequences (an offset as itself plus 3: repeat offsets are not used)."""
    literals = bytearray()
    codes: list[tuple[int, int, int, int, int]] = []
    anchor = start
    ll_base, ll_bits, ml_base, ml_bits = _LL_BASE, _LL_BITS, _ML_BASE, _ML_BITS
    for pos, offset, length in matches:
        literals += data[anchor:pos]
        literal_length = pos - anchor
        ll_code = (
            _LL_CODE[literal_length] if literal_length < 64 else literal_length.bit_length() + 18
        )
        match_base = length - 3
        ml_code = _ML_CODE[match_base] if match_base < 128 else match_base.bit_length() + 35
        offset_value = offset + 3
        of_code = offset_value.bit_length() - 1
        ll_nb = ll_bits[ll_code]
        ml_nb = ml_bits[ml_code]
        extra = (
            literal_length - ll_base[ll_code]
            | (length - ml_base[ml_code]) << ll_nb
            | (offset_value - (1 << of_code)) << (ll_nb + ml_nb)
        )
        codes.append((ll_code, ml_code, of_code, extra, ll_nb + ml_nb + of_code))
        anchor = pos + length
    literals += data[anchor:end]
    out = bytearray()
    coded = _huffman_literals(bytes(literals))
    if coded is not None:
        out += coded
    else:
        size = len(literals)  # raw literals' header: the size in 5, 12 or 20 bits
        if size < 32:
            out.append(size << 3)
        elif size < 4096:
            out += (size << 4 | 0b0100).to_bytes(2, "little")
        else:
            out += (size << 4 | 0b1100).to_bytes(3, "little")
        out += literals
    if codes:
        out += _sequences_section(codes)
    else:
        out.append(0)
    return out


def compress(data: bytes) -> bytes:
    """``data`` as one zstd frame (single segment, its size given; no checksum) of blocks
    of at most 128 KB: compressed (matches reach back anywhere in the frame), or raw
    where that is no larger."""
    out = bytearray(_U32.pack(MAGIC))
    out.append(0xA0)  # a 4-byte content size, single segment
    out += _U32.pack(len(data))
    table: dict[bytes, int] = {}
    window = (1 << 29) - 4  # the largest offset the predefined offset codes reach
    for start in range(0, max(len(data), 1), _MAX_BLOCK):
        end = min(start + _MAX_BLOCK, len(data))
        last = end == len(data)
        matches = lz77.find_matches(
            data, start, end, table=table, floor=0, window=window, last_start=end, last_end=end
        )
        body = _compressed_block_body(data, start, end, matches) if matches else None
        if body is not None and len(body) < end - start:
            out += (len(body) << 3 | 2 << 1 | last).to_bytes(3, "little")
            out += body
        else:
            out += ((end - start) << 3 | last).to_bytes(3, "little")
            out += data[start:end]
    return bytes(out)
