"""A greedy LZ77 match finder: the repeats snappy, lz4 and zstd encode (``storage.codecs``,
``storage.zstd``).

What the log cleaner rewrites keeps its batch's codec, as Kafka's cleaner does; this
finds the matches those streams are made of. It is a fast parse, as lz4's and snappy's
own are: each position's first four bytes looked up in a table of where they last
occurred, the match extended by comparing slices (a doubling, then halving, length: a
few comparisons, not one per byte), positions inside a match skipped, and after a run of
misses the scan steps faster (snappy's heuristic: incompressible bytes cost little).
"""

from __future__ import annotations

from typing import Final

__all__ = ["MIN_MATCH", "Match", "find_matches"]

MIN_MATCH: Final = 4
_CHUNK: Final = 32  # bytes compared at once at first

#: (position, offset back, length) of a match: ``data[pos:pos + length]`` repeats what
#: starts ``offset`` bytes before (overlapping it when ``length`` > ``offset``).
Match = tuple[int, int, int]


def find_matches(
    data: bytes,
    start: int,
    end: int,
    *,
    table: dict[bytes, int],
    floor: int,
    window: int,
    last_start: int,
    last_end: int,
) -> list[Match]:
    """The matches of a greedy parse of ``data[start:end]``, in order, not overlapping.

    A match begins at ``last_start`` at the latest and ends at ``last_end`` at the latest
    (lz4 keeps a block's last bytes literal); it repeats bytes at ``floor`` or after, at
    most ``window`` back. ``table`` maps four bytes to where they last began; pass the
    same one to continue a parse into the next block (zstd's matches reach back across
    blocks of a frame), a new one otherwise."""
    matches: list[Match] = []
    get = table.get
    pos = start
    anchor = start  # where the pending literals begin
    misses = 0
    stop = min(last_start, end - MIN_MATCH, last_end - MIN_MATCH) + 1
    while pos < stop:
        key = data[pos : pos + MIN_MATCH]
        candidate = get(key, -1)
        table[key] = pos
        offset = pos - candidate
        if candidate < floor or offset > window:
            misses += 1
            pos += 1 + (misses >> 5)
            continue
        misses = 0
        # The length: the first differing byte among the next 32 (the lowest set bit of
        # their XOR, little-endian), else longer comparisons.
        most = last_end - pos
        n = most - MIN_MATCH if most < _CHUNK + MIN_MATCH else _CHUNK
        a = candidate + MIN_MATCH
        b = pos + MIN_MATCH
        diff = int.from_bytes(data[a : a + n], "little") ^ int.from_bytes(data[b : b + n], "little")
        if diff:
            length = MIN_MATCH + (((diff & -diff).bit_length() - 1) >> 3)
        else:
            length = _extend(data, candidate, pos, MIN_MATCH + n, most)
        # Take back bytes the literals before it repeat too.
        while pos > anchor and candidate > floor and data[candidate - 1] == data[pos - 1]:
            pos -= 1
            candidate -= 1
            length += 1
        matches.append((pos, offset, length))
        pos += length
        anchor = pos
        if pos - 2 >= start:  # the match's end, for a repeat right after it
            table[data[pos - 2 : pos + 2]] = pos - 2
    return matches


def _extend(data: bytes, candidate: int, pos: int, length: int, most: int) -> int:
    """How many bytes from ``pos`` repeat those from ``candidate``, knowing ``length``
    do (at most ``most``): slices compared in doubling lengths, then halving ones."""
    step = 2 * _CHUNK
    while True:
        step = min(step, most - length)
        if step <= 0:
            return length
        a = candidate + length
        b = pos + length
        if data[a : a + step] != data[b : b + step]:
            break
        length += step
        step *= 2
    span = step  # the first difference is in data[pos + length : pos + length + span]
    while span > 1:
        half = span >> 1
        a = candidate + length
        b = pos + length
        if data[a : a + half] == data[b : b + half]:
            length += half
            span -= half
        else:
            span = half
    return length
