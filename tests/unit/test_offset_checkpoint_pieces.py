"""An offset checkpoint rewritten after a few offsets moved keeps its unchanged pieces.

A broker of 100,000 partitions rewrote (and formatted) every row of its high watermark
checkpoint every 5 s whenever one high watermark moved: about 0.2 s of the GIL on this
machine, every 5 s, for one partition's traffic. Now the rows' order is worked out once
while the partitions stay the same, and a piece of rows whose offsets did not change is
copied from the file it replaces. The file must read back exactly as if every row had been
formatted again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import checkpoints
from storage.checkpoints import OffsetRows, read_offset_checkpoint, write_offset_rows
from zkdata.znodes import TopicPartition

PARTITIONS = [TopicPartition(t, p) for t in ("b", "a", "c") for p in (2, 0, 1)]
ORDER = sorted(range(len(PARTITIONS)), key=PARTITIONS.__getitem__)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.integers(min_value=1, max_value=4),
    st.lists(
        st.lists(st.integers(min_value=0, max_value=10**12), min_size=9, max_size=9),
        min_size=1,
        max_size=6,
    ),
)
def test_rewrites_read_back_as_a_full_write_would(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    lines_per_piece: int,
    versions: list[list[int]],
) -> None:
    monkeypatch.setattr(checkpoints, "_LINES_PER_PIECE", lines_per_piece)
    directory = tmp_path_factory.mktemp("pieces")
    path, fresh = directory / "kept", directory / "fresh"
    previous: OffsetRows | None = None
    for offsets in versions:
        in_order = [offsets[i] for i in ORDER]
        previous = write_offset_rows(path, PARTITIONS, ORDER, in_order, previous)
        write_offset_rows(fresh, PARTITIONS, ORDER, in_order)
        assert path.read_bytes() == fresh.read_bytes()
        assert read_offset_checkpoint(path) == {
            (tp.topic, tp.partition): offset for tp, offset in zip(PARTITIONS, offsets, strict=True)
        }


def test_only_the_pieces_whose_offsets_moved_are_formatted_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoints, "_LINES_PER_PIECE", 3)
    path = tmp_path / "replication-offset-checkpoint"
    offsets = [0] * len(PARTITIONS)
    rows = write_offset_rows(path, PARTITIONS, ORDER, offsets)
    copied: list[int] = []
    pread = os.pread

    def counting(fd: int, length: int, at: int) -> Any:
        copied.append(at)
        return pread(fd, length, at)

    monkeypatch.setattr(os, "pread", counting)  # the module storage.checkpoints uses
    moved = list(offsets)
    moved[4] = 7  # the second piece (rows 3-5)
    rows = write_offset_rows(path, PARTITIONS, ORDER, moved, rows)
    assert copied == [rows.spans[0][0], rows.spans[2][0]]  # the first and last pieces
    assert path.read_text().splitlines()[2 + 4] == f"{PARTITIONS[ORDER[4]].topic} 1 7"


def test_a_file_changed_behind_its_back_is_formatted_in_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoints, "_LINES_PER_PIECE", 3)
    path = tmp_path / "replication-offset-checkpoint"
    rows = write_offset_rows(path, PARTITIONS, ORDER, [5] * len(PARTITIONS))
    path.write_text("0\n0\n")  # not what was written: nothing is copied from it
    write_offset_rows(path, PARTITIONS, ORDER, [5] * 8 + [6], rows)
    assert len(read_offset_checkpoint(path)) == len(PARTITIONS)


def test_a_file_grown_behind_its_back_is_formatted_in_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file longer than the one written (rewritten from outside with other offsets)
    holds whole pieces at the old spans, but not the rows they were: its size tells."""
    monkeypatch.setattr(checkpoints, "_LINES_PER_PIECE", 3)
    path = tmp_path / "replication-offset-checkpoint"
    rows = write_offset_rows(path, PARTITIONS, ORDER, [5] * len(PARTITIONS))
    write_offset_rows(path, PARTITIONS, ORDER, [123456] * len(PARTITIONS))  # from outside
    write_offset_rows(path, PARTITIONS, ORDER, [5] * 8 + [6], rows)
    expected = [5] * 8 + [6]
    assert read_offset_checkpoint(path) == {
        (tp.topic, tp.partition): expected[k] for k, tp in enumerate(PARTITIONS[i] for i in ORDER)
    }
