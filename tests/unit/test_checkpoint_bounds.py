"""A checkpoint file's entry lines as Kafka 2.8's CheckpointFile reads them: every line
after the count is an entry (more than the count, as fewer, is an IOException), and an
epoch entry is exactly two fields (LeaderEpochCheckpointFile's formatter)."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.checkpoints import read_epoch_checkpoint, read_offset_checkpoint
from storage.errors import CheckpointError


def test_more_entry_lines_than_the_count_are_refused(tmp_path: Path) -> None:
    epochs = tmp_path / "leader-epoch-checkpoint"
    epochs.write_text("0\n1\n3 0\n5 10\n")
    with pytest.raises(CheckpointError, match="expected 1 entries, found 2"):
        read_epoch_checkpoint(epochs)
    offsets = tmp_path / "recovery-point-offset-checkpoint"
    offsets.write_text("0\n1\nt 0 5\nt 1 7\n")
    with pytest.raises(CheckpointError, match="expected 1 entries, found 2"):
        read_offset_checkpoint(offsets)
    offsets.write_text("0\n2\nt 0 5\nt 1 7\n")
    assert read_offset_checkpoint(offsets) == {("t", 0): 5, ("t", 1): 7}


def test_an_epoch_entry_of_three_fields_is_malformed(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n1\n3 0 7\n")
    with pytest.raises(CheckpointError, match="malformed"):
        read_epoch_checkpoint(path)
    path.write_text("0\n1\n3 0\n")
    assert read_epoch_checkpoint(path) == [(3, 0)]
