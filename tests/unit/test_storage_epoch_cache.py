"""The leader epoch cache (KIP-101) against a plain model, and its checkpoint file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochCache
from storage.errors import CheckpointError


class Model:
    """Kafka 2.8's LeaderEpochFileCache semantics, written as directly as possible."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, int]] = []

    def assign(self, epoch: int, start: int) -> None:
        if self.entries and self.entries[-1][0] == epoch and self.entries[-1][1] <= start:
            return
        self.entries = [e for e in self.entries if e[0] < epoch and e[1] < start]
        self.entries.append((epoch, start))

    def end_offset_for(self, requested: int, leo: int) -> tuple[int, int]:
        if requested == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self.entries[-1][0] == requested:
            return requested, leo
        higher = [e for e in self.entries if e[0] > requested]
        lower = [e for e in self.entries if e[0] <= requested]
        if not higher:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if not lower:
            return requested, higher[0][1]
        return lower[-1][0], higher[0][1]

    def truncate_from_end(self, end: int) -> None:
        self.entries = [e for e in self.entries if e[1] < end]

    def truncate_from_start(self, start: int) -> None:
        dropped = [e for e in self.entries if e[1] <= start]
        if dropped:
            kept = [e for e in self.entries if e[1] > start]
            self.entries = [(dropped[-1][0], start), *kept]


_ops = st.lists(
    st.one_of(
        st.tuples(st.just("assign"), st.integers(0, 12), st.integers(0, 60)),
        st.tuples(st.just("end"), st.integers(0, 70)),
        st.tuples(st.just("start"), st.integers(0, 70)),
    ),
    max_size=25,
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=_ops, queries=st.lists(st.integers(-1, 14), max_size=8))
def test_cache_matches_the_model(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[Any, ...]], queries: list[int]
) -> None:
    path = tmp_path_factory.mktemp("epochs") / "leader-epoch-checkpoint"
    cache = LeaderEpochCache(path)
    model = Model()
    for op in ops:
        if op[0] == "assign":
            cache.assign(op[1], op[2])
            model.assign(op[1], op[2])
        elif op[0] == "end":
            cache.truncate_from_end(op[1])
            model.truncate_from_end(op[1])
        else:
            cache.truncate_from_start(op[1])
            model.truncate_from_start(op[1])
        assert [tuple(e) for e in cache.entries()] == model.entries
        epochs = [e for e, _ in model.entries]
        starts = [s for _, s in model.entries]
        assert epochs == sorted(set(epochs))  # strictly increasing
        assert starts == sorted(starts)
    for requested in queries:
        assert cache.end_offset_for(requested, 100) == model.end_offset_for(requested, 100)
    cache.flush()  # assignments are written lazily; truncations at once
    reloaded = LeaderEpochCache(path) if path.exists() else LeaderEpochCache(None)
    assert reloaded.entries() == cache.entries()


def test_offsets_for_leader_epoch_semantics() -> None:
    cache = LeaderEpochCache(None)
    assert cache.end_offset_for(0, 10) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    cache.assign(2, 0)
    cache.assign(4, 30)
    cache.assign(7, 50)
    assert cache.end_offset_for(7, 80) == (7, 80)  # the latest: the log end offset
    assert cache.end_offset_for(4, 80) == (4, 50)
    assert cache.end_offset_for(5, 80) == (4, 50)  # largest epoch <= 5, next one's start
    assert cache.end_offset_for(1, 80) == (1, 0)  # below the earliest (Kafka 2.8)
    assert cache.end_offset_for(8, 80) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    assert cache.end_offset_for(UNDEFINED_EPOCH, 80) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    assert cache.epoch_for_offset(29) == 2
    assert cache.epoch_for_offset(30) == 4
    assert cache.latest_epoch == 7


def test_assign_only_moves_forward() -> None:
    cache = LeaderEpochCache(None)
    assert cache.assign(3, 10)
    assert not cache.assign(3, 15)  # same epoch, later start: nothing to record
    assert cache.assign(3, 5)  # same epoch, earlier start: replaces it
    cache.assign(5, 20)
    cache.assign(4, 25)  # a lower epoch after a higher one drops the higher one
    assert [tuple(e) for e in cache.entries()] == [(3, 5), (4, 25)]
    # An epoch assigned again past a higher one's start: its earlier entry goes too, as
    # Kafka 2.8's maybeTruncateNonMonotonicEntries (epoch >= new epoch) drops it; one
    # epoch keeps one entry.
    cache.assign(3, 30)
    assert [tuple(e) for e in cache.entries()] == [(3, 30)]
    with pytest.raises(ValueError, match="invalid"):
        cache.assign(-1, 0)


def test_truncate_from_start_at_an_epochs_start_keeps_that_epoch_alone() -> None:
    """Kafka 2.8's truncateFromStart removes the entries starting at or below the new
    start (<=) and puts the last one back at it: a start exactly at an epoch's first
    offset leaves that epoch, not also the one before it at the same offset."""
    cache = LeaderEpochCache(None)
    cache.assign(1, 0)
    cache.assign(2, 5)
    cache.assign(3, 9)
    cache.truncate_from_start(5)
    assert [tuple(e) for e in cache.entries()] == [(2, 5), (3, 9)]
    cache.truncate_from_start(7)
    assert [tuple(e) for e in cache.entries()] == [(2, 7), (3, 9)]


def test_idle_logs_with_the_same_first_epoch_share_its_entry(tmp_path: Path) -> None:
    # After a cold start, 100,000s of empty logs each hold (epoch, 0): 112 bytes apiece.
    epoch = int("7")
    led = [LeaderEpochCache(None) for _ in range(3)]
    for cache in led:
        cache.assign(int(str(epoch)), int("0"))
    assert len({id(cache._entries) for cache in led}) == 1
    assert [cache.entries() for cache in led] == [[(7, 0)]] * 3
    # So do those read back from their checkpoints, and those truncated down to one.
    paths = [tmp_path / f"p{i}" / "leader-epoch-checkpoint" for i in range(2)]
    for path in paths:
        path.parent.mkdir()
        path.write_text("0\n1\n7 0\n")
    read = [LeaderEpochCache(path) for path in paths]
    truncated = LeaderEpochCache(None)
    truncated.assign(7, 0)
    truncated.assign(8, 40)
    truncated.truncate_from_end(30)
    assert {id(c._entries) for c in (*read, truncated)} == {id(led[0]._entries)}
    # Entries past offset 0 stay each log's own, and equal entries compare equal.
    busy = [LeaderEpochCache(None) for _ in range(2)]
    for cache in busy:
        cache.assign(7, int("120"))
    assert busy[0]._entries is not busy[1]._entries
    assert busy[0].entries() == busy[1].entries() == [(7, 120)]


def test_checkpoint_file_is_kafkas_text_format(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochCache(path)
    cache.assign(0, 0)
    cache.assign(3, 120)
    cache.flush()
    assert path.read_text() == "0\n2\n0 0\n3 120\n"
    cache.truncate_from_start(50)
    assert path.read_text() == "0\n2\n0 50\n3 120\n"
    cache.clear()
    assert path.read_text() == "0\n0\n"


@pytest.mark.parametrize(
    "text",
    [
        "1\n0\n",
        "0\n2\n1 0\n",
        "0\n1\n1 x\n",
        "0\n2\n5 0\n3 10\n",
        "0\n",
        # Kafka reads an epoch as an Int and an offset as a Long (parseInt, parseLong) and
        # its cache takes none below 0: an epoch past 32 bits became the latest, one the
        # follower's OffsetsForLeaderEpoch could not encode, and a negative one was served
        "0\n2\n0 0\n3000000000 3\n",
        "0\n2\n-7 -5\n2 3\n",
        "0\n1\n1 -1\n",
        "0\n1\n1 9223372036854775808\n",
        # int() reads these; Java's parseInt and parseLong do not (tests/unit/
        # test_checkpoint_numbers.py: "+1" and other scripts' digits they do read)
        "0\n1\n1_0 0\n",
        "0\n1\n1 \U0001d7cf\n",
        "0\n 1\n1 0\n",
    ],
)
def test_malformed_checkpoints_are_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(text)
    with pytest.raises(CheckpointError, match="leader-epoch-checkpoint"):
        LeaderEpochCache(path)


def test_checkpoint_numbers_are_read_as_kafka_reads_them(tmp_path: Path) -> None:
    """Leading zeros, a '+', other scripts' digits, and the largest Int epoch and Long
    offset, are numbers to Kafka (Integer.parseInt, Long.parseLong)."""
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(
        "0\n+3\n007 0010\n+8 \u0661\u0662\n2147483647 9223372036854775807\n",
        encoding="utf-8",
    )
    assert LeaderEpochCache(path).entries() == [(7, 10), (8, 12), (2**31 - 1, 2**63 - 1)]


def test_an_epoch_past_32_bits_is_not_assigned() -> None:
    cache = LeaderEpochCache(None)
    with pytest.raises(ValueError, match="invalid epoch entry"):
        cache.assign(2**31, 0)
    assert cache.entries() == []


def test_an_assignment_is_written_by_flush_and_a_truncation_at_once(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochCache(path)
    cache.assign(1, 0)
    cache.assign(2, 10)
    assert not path.exists()  # no fsync per new leader: written when the log flushes
    cache.flush()
    assert LeaderEpochCache(path).entries() == cache.entries()
    cache.assign(3, 20)
    cache.truncate_from_end(15)  # a truncation is written at once (with what came before)
    assert LeaderEpochCache(path).entries() == cache.entries() == [(1, 0), (2, 10)]


def test_a_staged_checkpoint_replaces_the_file_only_when_committed(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochCache(path)
    cache.assign(1, 0)
    cache.flush()
    cache.assign(2, 10)
    staged = cache.stage(end_offset=15)
    assert staged is not None
    assert LeaderEpochCache(path).entries() == [(1, 0)]  # a crash now keeps the old one
    assert (tmp_path / "leader-epoch-checkpoint.tmp").read_text() == "0\n2\n1 0\n2 10\n"
    cache.commit(staged)
    assert LeaderEpochCache(path).entries() == [(1, 0), (2, 10)]
    assert not (tmp_path / "leader-epoch-checkpoint.tmp").exists()
    assert cache.stage(end_offset=15) is None  # nothing new to write


def test_a_commit_after_the_entries_changed_leaves_the_newer_file(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochCache(path)
    cache.assign(1, 0)
    cache.assign(2, 10)
    staged = cache.stage(end_offset=20)
    assert staged is not None
    cache.truncate_from_end(5)  # written at once, through the same temporary file
    cache.commit(staged)
    assert LeaderEpochCache(path).entries() == [(1, 0)]
    cache.assign(3, 5)
    staged = cache.stage(end_offset=20)
    assert staged is not None
    cache.assign(4, 8)  # after the stage: left for the next flush
    cache.commit(staged)
    assert LeaderEpochCache(path).entries() == [(1, 0)]
    cache.flush()
    assert LeaderEpochCache(path).entries() == [(1, 0), (3, 5), (4, 8)]


def test_a_shutdown_leaves_out_the_epochs_no_batch_carries(tmp_path: Path) -> None:
    # A new leader's epoch starts at its log end; until a batch is written in it, the
    # next load would drop it again (Kafka's truncateFromEnd), so it is not written.
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochCache(path)
    cache.assign(4, 0)  # an empty log led in epoch 4
    staged = cache.stage(end_offset=0)
    assert staged is not None
    assert staged.written is None
    cache.commit(staged)
    cache.flush()  # as PartitionLog.close does: nothing is due
    assert not path.exists()
    assert not (tmp_path / "leader-epoch-checkpoint.tmp").exists()
    cache.assign(5, 0)
    cache.flush()  # a flush in the run writes every entry, as before
    assert LeaderEpochCache(path).entries() == [(5, 0)]
    cache.assign(6, 30)  # batches in epoch 5, then a new epoch at the end: only 5 is due
    staged = cache.stage(end_offset=30)
    assert staged is not None
    assert staged.written is None
    cache.assign(6, 30)
    cache.commit(staged)
    assert LeaderEpochCache(path).entries() == [(5, 0)]
    cache.assign(7, 40)
    staged = cache.stage(end_offset=45)  # batches in epochs 6 and 7 since
    assert staged is not None
    cache.commit(staged)
    assert LeaderEpochCache(path).entries() == [(5, 0), (6, 30), (7, 40)]
