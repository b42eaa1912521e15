"""The greedy match finder the snappy, lz4 and zstd encoders share: every match it gives
repeats what it says, in order and within its bounds, and it finds the repeats."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from storage import lz77
from storage.lz77 import MIN_MATCH, find_matches

# Repeats near and far, long runs (overlapping matches), noise, few distinct bytes.
_DATA = st.lists(
    st.one_of(
        st.binary(max_size=40),
        st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=5), st.integers(1, 300)),
        st.lists(st.sampled_from(b"ab"), max_size=60).map(bytes),
        st.sampled_from([b"key-0001", b"value-value-value", b"\x00" * 200]),
    ),
    max_size=30,
).map(b"".join)


def _check(
    data: bytes,
    matches: list[lz77.Match],
    start: int,
    *,
    floor: int,
    window: int,
    last_start: int,
    last_end: int,
) -> None:
    after = start
    for pos, offset, length in matches:
        assert pos >= after  # in order, not overlapping
        assert length >= MIN_MATCH
        assert 0 < offset <= window
        assert pos - offset >= floor
        assert pos <= last_start
        assert pos + length <= last_end
        source = pos - offset
        # What it repeats, byte by byte (a match overlapping itself repeats its start).
        assert all(data[pos + k] == data[source + k] for k in range(length))
        if pos + length < last_end:  # as long as it goes
            assert data[pos + length] != data[source + length]
        after = pos + length


@settings(max_examples=400)
@given(_DATA, st.data())
def test_every_match_repeats_what_it_says_within_its_bounds(
    data: bytes, draw: st.DataObject
) -> None:
    n = len(data)
    start = draw.draw(st.integers(0, n))
    end = draw.draw(st.integers(start, n))
    floor = draw.draw(st.integers(0, start))
    window = draw.draw(st.sampled_from([1, 7, 64, 0xFFFF]))
    last_start = end - draw.draw(st.sampled_from([0, 12]))
    last_end = end - draw.draw(st.sampled_from([0, 5]))
    table: dict[bytes, int] = {}
    if floor < start:  # an earlier block's positions, as zstd's parse carries them on
        find_matches(
            data,
            floor,
            start,
            table=table,
            floor=floor,
            window=window,
            last_start=start,
            last_end=start,
        )
    bounds = {"floor": floor, "window": window, "last_start": last_start, "last_end": last_end}
    matches = find_matches(data, start, end, table=table, **bounds)
    _check(data, matches, start, **bounds)


def test_repeats_are_found_near_far_and_overlapping() -> None:
    record = b'{"user": "alice", "visits": 12, "plan": "pro"}'
    data = record * 100
    matches = find_matches(
        data,
        0,
        len(data),
        table={},
        floor=0,
        window=0xFFFF,
        last_start=len(data),
        last_end=len(data),
    )
    # Within the first record, its own repeats ('", "'); the rest is one match reaching
    # one record back.
    assert matches[-1] == (len(record), len(record), len(data) - len(record))
    assert all(pos + length <= len(record) for pos, _, length in matches[:-1])
    run = b"z" * 1000
    assert find_matches(
        run, 0, 1000, table={}, floor=0, window=10, last_start=1000, last_end=995
    ) == [(1, 1, 994)]


def test_a_match_does_not_reach_past_its_window_or_floor() -> None:
    data = b"0123456789" + b"x" * 50 + b"0123456789"
    args: dict[str, Any] = {"table": {}, "last_start": len(data), "last_end": len(data)}
    assert find_matches(data, 0, len(data), floor=0, window=59, **args) == [(11, 1, 49)]
    args["table"] = {}
    assert (60, 60, 10) in find_matches(data, 0, len(data), floor=0, window=60, **args)
    args["table"] = {}
    assert (60, 60, 10) not in find_matches(data, 0, len(data), floor=1, window=60, **args)


def test_incompressible_bytes_are_skipped_ever_faster_and_a_repeat_after_them_is_found() -> None:
    noise = bytes((i * 131 + (i >> 8) * 17) & 0xFF for i in range(4096))
    data = noise + b"needle-in-haystack" * 3
    end = len(data)
    matches = find_matches(
        data, 0, end, table={}, floor=0, window=0xFFFF, last_start=end, last_end=end
    )
    assert matches[-1] == (4096 + 18, 18, 36)
