"""Where a follower's fetcher cuts its log, answer by answer, as Kafka 2.8's
AbstractFetcherThread does: after OffsetsForLeaderEpoch (getOffsetTruncationState, KIP-101
and KIP-279) and after an OFFSET_OUT_OF_RANGE answer (fetchOffsetAndTruncate, from the
leader's ListOffsets). A scripted leader and a follower log that records each cut."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from broker.fetcher import FetchState, ReplicaFetcherThread
from storage.errors import KafkaStorageError
from wire.api import ApiKey
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
F, L = 2, 1  # the follower, its leader


class Logs:
    """The follower's logs: each partition's (latest epoch, log end, high watermark) and
    epoch history (epoch -> where it ends in the log); every cut made, in order."""

    def __init__(
        self,
        positions: Mapping[TopicPartition, tuple[int | None, int, int]],
        epochs: Mapping[TopicPartition, Mapping[int, int]] | None = None,
    ) -> None:
        self.positions = dict(positions)
        self.epochs = {tp: dict(e) for tp, e in (epochs or {}).items()}
        self.cuts: list[tuple[str, TopicPartition, int]] = []
        self.checkpointed: list[set[TopicPartition]] = []
        self.while_cutting: list[Any] = []  # called before each cut (a LeaderAndIsr, say)
        self.failing: set[TopicPartition] = set()  # their directory failed

    def follower_position(self, tp: TopicPartition) -> tuple[int | None, int, int]:
        return self.positions[tp]

    def follower_log_start(self, tp: TopicPartition) -> int:
        return 0

    def follower_end_offset_for_epoch(self, tp: TopicPartition, epoch: int) -> tuple[int, int]:
        older = [e for e in self.epochs.get(tp, {}) if e <= epoch]
        if not older:
            return -1, -1
        return max(older), self.epochs[tp][max(older)]

    def truncate(
        self, tp: TopicPartition, leader_id: int, leader_epoch: int, offset: int, why: str
    ) -> int | None:
        for hook in self.while_cutting:
            hook()
        if tp in self.failing:
            raise KafkaStorageError(f"the directory of {tp} failed")
        self.cuts.append(("truncate", tp, offset))
        epoch, leo, hw = self.positions[tp]
        leo = min(leo, offset)
        self.positions[tp] = (epoch, leo, min(hw, leo))
        return leo

    def start_at(
        self, tp: TopicPartition, leader_id: int, leader_epoch: int, offset: int, why: str
    ) -> int | None:
        self.cuts.append(("start_at", tp, offset))
        self.positions[tp] = (None, offset, offset)
        return offset

    def checkpoint_truncated(self, tps: Collection[TopicPartition]) -> None:
        self.checkpointed.append(set(tps))


class Leader:
    """Answers OffsetsForLeaderEpoch from ``epoch_ends`` (partition -> (epoch, end offset))
    and ListOffsets from ``log_ranges`` (partition -> (log start, log end)); keeps each
    request's body."""

    def __init__(
        self,
        epoch_ends: Mapping[TopicPartition, tuple[int, int]] | None = None,
        log_ranges: Mapping[TopicPartition, tuple[int, int]] | None = None,
    ) -> None:
        self.epoch_ends = dict(epoch_ends or {})
        self.log_ranges = dict(log_ranges or {})
        self.requests: list[tuple[int, Mapping[str, Any]]] = []
        self.extra: list[TopicPartition] = []  # answered about though not asked
        self.no_latest: set[TopicPartition] = set()  # ListOffsets LATEST refused

    def request(self, api_key: int, _version: int, body: Mapping[str, Any]) -> Any:
        self.requests.append((api_key, body))
        if api_key == ApiKey.OFFSET_FOR_LEADER_EPOCH:
            return {
                "topics": [
                    {
                        "topic": t["topic"],
                        "partitions": [
                            self._epoch_end(TopicPartition(t["topic"], p["partition"]))
                            for p in t["partitions"]
                        ],
                    }
                    for t in body["topics"]
                ]
                + [{"topic": tp.topic, "partitions": [self._epoch_end(tp)]} for tp in self.extra]
            }
        assert api_key == ApiKey.LIST_OFFSETS
        return {
            "topics": [
                {
                    "name": t["name"],
                    "partitions": [self._offset(t["name"], p) for p in t["partitions"]],
                }
                for t in body["topics"]
            ]
        }

    def _epoch_end(self, tp: TopicPartition) -> dict[str, int]:
        if tp not in self.epoch_ends:  # it does not know it leads yet
            error = {"error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER, "leader_epoch": -1}
            return {"partition": tp.partition, **error, "end_offset": -1}
        epoch, end = self.epoch_ends[tp]
        answer = {"partition": tp.partition, "error_code": 0, "leader_epoch": epoch}
        return {**answer, "end_offset": end}

    def _offset(self, topic: str, asked: Mapping[str, Any]) -> dict[str, int]:
        tp = TopicPartition(topic, asked["partition_index"])
        if tp not in self.log_ranges or (
            tp in self.no_latest and asked["timestamp"] == -1
        ):  # not (yet) its leader
            error = {"error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER, "timestamp": -1}
            return {"partition_index": tp.partition, **error, "offset": -1}
        start, end = self.log_ranges[tp]
        offset = end if asked["timestamp"] == -1 else start
        return {"partition_index": tp.partition, "error_code": 0, "timestamp": -1, "offset": offset}

    def asked(self, api_key: int) -> list[Mapping[str, Any]]:
        return [body for key, body in self.requests if key == api_key]

    def close(self) -> None:
        pass


def fetcher_of(logs: Logs, leader: Leader) -> ReplicaFetcherThread:
    return ReplicaFetcherThread(
        F, L, ("127.0.0.1", 1), lambda *_: None, logs, connect=lambda *_: leader
    )


def test_offsets_for_leader_epoch_names_our_latest_epoch_and_the_current_leader_epoch() -> None:
    """Kafka 2.8's ReplicaFetcherThread.fetchEpochEndOffsets: the epoch asked about is the
    log's latest, and the partition's current leader epoch goes along (KIP-320), so a
    broker that no longer leads at that epoch answers FENCED_LEADER_EPOCH instead of where
    its own log diverged."""
    logs = Logs({A0: (4, 10, 10)}, {A0: {4: 10}})
    leader = Leader(epoch_ends={A0: (4, 10)})
    fetcher = fetcher_of(logs, leader)
    fetcher.add_all([(A0, FetchState(10, 7))])
    fetcher._truncate_new_partitions()
    (body,) = leader.asked(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    assert body["replica_id"] == F
    (asked,) = [p for t in body["topics"] for p in t["partitions"]]
    assert (asked["partition"], asked["current_leader_epoch"], asked["leader_epoch"]) == (0, 7, 4)


def test_a_leader_without_the_epoch_asked_about_leaves_the_log_cut_at_its_high_watermark() -> None:
    """getOffsetTruncationState: an undefined end offset in the answer (the leader has no
    epoch this old) truncates to the initial fetch offset, the follower's high watermark;
    not to its log end, which would keep records the leader may never have had."""
    logs = Logs({A0: (4, 10, 6)}, {A0: {4: 10}})
    fetcher = fetcher_of(logs, Leader(epoch_ends={A0: (-1, -1)}))
    fetcher.add_all([(A0, FetchState(10, 5))])
    fetcher._truncate_new_partitions()
    assert logs.cuts == [("truncate", A0, 6)]
    assert (fetcher.partitions[A0].truncating, fetcher.partitions[A0].fetch_offset) == (False, 6)


def test_an_answered_epoch_older_than_our_history_cuts_at_the_leaders_end_or_ours() -> None:
    """getOffsetTruncationState's case None (the follower kept no epochs that old):
    truncate to min(the leader's end offset, our log end): not to our high watermark, and
    never above our log end."""
    logs = Logs({A0: (5, 10, 2), A1: (5, 10, 2)}, {A0: {5: 10}, A1: {5: 10}})
    fetcher = fetcher_of(logs, Leader(epoch_ends={A0: (3, 7), A1: (3, 12)}))
    fetcher.add_all([(A0, FetchState(10, 6)), (A1, FetchState(10, 6))])
    fetcher._truncate_new_partitions()
    assert sorted(logs.cuts) == [("truncate", A0, 7), ("truncate", A1, 10)]
    assert [fetcher.partitions[tp].fetch_offset for tp in (A0, A1)] == [7, 10]
    assert not any(s.truncating for s in fetcher.partitions.values())
    assert logs.checkpointed == [{A0}]  # a1 lost nothing


def test_an_epoch_both_have_is_cut_where_the_first_of_the_two_ends() -> None:
    """Epoch 1 ends at 5 here (our epoch 3, which the leader never had, follows it) and
    at 8 in the leader's log: asked about 3, the leader answers (1, 8); the logs agree up
    to 5 only, and our records of epoch 3 go (min(followerEndOffset, leader's end))."""
    logs = Logs({A0: (3, 10, 4)}, {A0: {1: 5, 3: 10}})
    leader = Leader(epoch_ends={A0: (1, 8)})
    fetcher = fetcher_of(logs, leader)
    fetcher.add_all([(A0, FetchState(10, 4))])
    fetcher._truncate_new_partitions()
    assert logs.cuts == [("truncate", A0, 5)]
    assert (fetcher.partitions[A0].truncating, fetcher.partitions[A0].fetch_offset) == (False, 5)
    assert len(leader.asked(ApiKey.OFFSET_FOR_LEADER_EPOCH)) == 1


def test_a_partition_followed_anew_while_its_leader_answered_is_asked_about_again() -> None:
    """A LeaderAndIsr for a newer leader epoch arrives while the old epoch's truncation is
    under way: the answer was for the old state; the new one still has to be truncated
    (Kafka's fetcher drops a truncation result for a partition state it no longer holds)."""
    logs = Logs({A0: (4, 10, 10)}, {A0: {4: 10}})
    leader = Leader(epoch_ends={A0: (4, 8)})
    fetcher = fetcher_of(logs, leader)
    fetcher.add_all([(A0, FetchState(10, 5))])
    newer = FetchState(10, 6)
    logs.while_cutting.append(lambda: fetcher.add_all([(A0, newer)]))
    fetcher._truncate_new_partitions()
    logs.while_cutting.clear()
    assert fetcher.partitions[A0] is newer
    assert (newer.truncating, newer.fetch_offset) == (True, 10)
    assert fetcher._build_fetch() is None  # not fetched before it is truncated
    fetcher._truncate_new_partitions()
    assert [p["current_leader_epoch"] for p in asked_partitions(leader)] == [5, 6]
    assert (newer.truncating, newer.fetch_offset) == (False, 8)


def asked_partitions(leader: Leader) -> list[Mapping[str, Any]]:
    return [
        p
        for body in leader.asked(ApiKey.OFFSET_FOR_LEADER_EPOCH)
        for t in body["topics"]
        for p in t["partitions"]
    ]


def test_a_partition_truncated_during_a_session_is_listed_in_the_next_incremental_fetch() -> None:
    """A partition added to a fetcher with a session is left out of the fetches while it
    is truncated; once it is, the next incremental fetch adds it to the session (it is
    not fetched only at the next full fetch, which an idle session never makes)."""
    logs = Logs({A0: (4, 10, 10), A1: (4, 10, 10)}, {A0: {4: 10}, A1: {4: 10}})
    fetcher = fetcher_of(logs, Leader(epoch_ends={A1: (4, 8)}))
    # A0 as a fetch listed it in the session: its position and our log start (0).
    fetcher.add_all([(A0, FetchState(10, 5, truncating=False, log_start=0))])
    fetcher.session_id, fetcher.session_epoch = 7, 1
    fetcher._sent = {A0: (10, 5)}
    fetcher.add_all([(A1, FetchState(10, 5))])
    fetch = fetcher._build_fetch()
    assert fetch is not None
    assert not fetch.full
    assert fetch.listed == {}
    fetcher._truncate_new_partitions()
    fetch = fetcher._build_fetch()
    assert fetch is not None
    assert not fetch.full
    assert fetch.listed == {A1: (8, 5)}


def out_of_range(logs: Logs, leader: Leader, *tps: TopicPartition) -> ReplicaFetcherThread:
    """A fetcher whose fetches of ``tps`` (from their log ends) were answered
    OFFSET_OUT_OF_RANGE, then its next truncation round."""
    fetcher = fetcher_of(logs, leader)
    fetcher.add_all([(tp, FetchState(logs.positions[tp][1], 5, truncating=False)) for tp in tps])
    fetch = fetcher._build_fetch()
    assert fetch is not None
    for tp in tps:
        fetcher._partition_answered(
            fetch, tp, {"error_code": ErrorCode.OFFSET_OUT_OF_RANGE, "high_watermark": -1}
        )
    fetcher._truncate_new_partitions()
    return fetcher


def test_out_of_range_within_the_leaders_log_fetches_on_from_our_log_end() -> None:
    """fetchOffsetAndTruncate: a leader's log that neither ends below ours nor starts
    above it (the answer came from a leader that has moved on since, say) leaves our log
    as it is, fetched again from its end: max(leader's start, our end). Its start exactly
    at our end, or its end exactly there, included."""
    logs = Logs({A0: (4, 10, 10), A1: (4, 10, 10), B0: (4, 10, 10)})
    leader = Leader(log_ranges={A0: (0, 20), A1: (10, 15), B0: (3, 10)})
    fetcher = out_of_range(logs, leader, A0, A1, B0)
    assert logs.cuts == []
    assert logs.checkpointed == []
    assert [fetcher.partitions[tp].fetch_offset for tp in (A0, A1, B0)] == [10, 10, 10]
    assert not any(s.truncating for s in fetcher.partitions.values())
    assert leader.asked(ApiKey.OFFSET_FOR_LEADER_EPOCH) == []


def test_out_of_range_asks_the_leaders_offsets_as_its_follower_at_its_leader_epoch() -> None:
    """ListOffsets as the follower (replica id: the leader's latest offset is its log end,
    not its high watermark) with the current leader epoch (fencing, KIP-320)."""
    logs = Logs({A0: (4, 10, 10)})
    leader = Leader(log_ranges={A0: (0, 8)})
    fetcher = out_of_range(logs, leader, A0)
    bodies = leader.asked(ApiKey.LIST_OFFSETS)
    assert [b["replica_id"] for b in bodies] == [F, F]
    asked = [p for b in bodies for t in b["topics"] for p in t["partitions"]]
    assert [p["current_leader_epoch"] for p in asked] == [5, 5]
    assert logs.cuts == [("truncate", A0, 8)]
    assert logs.checkpointed == [{A0}]
    assert fetcher.partitions[A0].fetch_offset == 8


def test_a_partition_set_aside_is_fetched_again_when_its_backoff_ends() -> None:
    """The fetcher's idle wait lasts until the first set-aside partition's backoff ends
    (replica.fetch.backoff.ms), not a full second regardless."""
    fetcher = ReplicaFetcherThread(F, L, ("127.0.0.1", 1), lambda *_: None, None, backoff_ms=100)
    state = FetchState(0, 5, truncating=False)
    fetcher.add_all([(A0, state)])
    fetcher._delay(A0, state)
    assert fetcher._build_fetch() is None
    assert fetcher._idle_wait() <= 0.1


def test_out_of_range_unanswered_by_the_leader_waits_out_the_backoff() -> None:
    """A leader that does not answer ListOffsets for the partition yet (it has not heard
    it leads): the partition is set aside for the backoff, not asked about again every
    round, and then asked again (Kafka's handlePartitionsWithErrors: delayPartitions)."""
    logs = Logs({A0: (4, 10, 10)})
    leader = Leader()
    fetcher = out_of_range(logs, leader, A0)
    assert len(leader.asked(ApiKey.LIST_OFFSETS)) == 2
    assert fetcher.partitions[A0].truncating
    fetcher._truncate_new_partitions()
    assert len(leader.asked(ApiKey.LIST_OFFSETS)) == 2
    assert fetcher._build_fetch() is None
    fetcher.partitions[A0].delayed_until = 0.0
    leader.log_ranges[A0] = (0, 8)
    fetcher._truncate_new_partitions()
    assert len(leader.asked(ApiKey.LIST_OFFSETS)) == 4
    assert logs.cuts == [("truncate", A0, 8)]
    assert (fetcher.partitions[A0].truncating, fetcher.partitions[A0].fetch_offset) == (False, 8)


def test_a_partition_whose_log_failed_while_truncated_is_dropped_and_the_rest_go_on() -> None:
    """Kafka's markPartitionFailed: a partition whose directory failed as it was cut is no
    longer fetched nor truncated by this fetcher; the next rounds go on for the others
    (they raised for the partition gone, and every partition from that leader stopped)."""
    logs = Logs({A0: (4, 10, 10), A1: (4, 10, 10)}, {A0: {4: 10}, A1: {4: 10}})
    logs.failing = {A0}
    leader = Leader(epoch_ends={A0: (4, 8)})  # a1: not yet known there, asked again below
    fetcher = fetcher_of(logs, leader)
    fetcher.add_all([(A0, FetchState(10, 5)), (A1, FetchState(10, 5))])
    fetcher._truncate_new_partitions()
    assert fetcher.fetched() == {A1}
    fetcher.partitions[A1].delayed_until = 0.0
    leader.epoch_ends[A1] = (4, 8)
    fetcher._truncate_new_partitions()
    assert sorted(p["partition"] for p in asked_partitions(leader)) == [0, 1, 1]
    assert logs.cuts == [("truncate", A1, 8)]
    assert fetcher.fetched() == {A1}
    assert not fetcher.partitions[A1].truncating


def test_an_answer_about_a_partition_not_asked_about_is_ignored() -> None:
    """Only the partitions asked about are truncated from the answer; one the leader adds
    (another fetcher's, say) changes nothing and fails nothing."""
    logs = Logs({A0: (4, 10, 10), B0: (4, 10, 10)}, {A0: {4: 10}, B0: {4: 10}})
    leader = Leader(epoch_ends={A0: (4, 8), B0: (4, 3)})
    leader.extra = [B0]
    fetcher = fetcher_of(logs, leader)
    fetcher.add_all([(A0, FetchState(10, 5))])
    fetcher._truncate_new_partitions()
    assert logs.cuts == [("truncate", A0, 8)]
    assert fetcher.fetched() == {A0}


def test_out_of_range_with_one_of_the_leaders_offsets_unanswered_waits_out_the_backoff() -> None:
    """The leader answers where its log starts but not where it ends (it stopped leading
    between the two requests): nothing is cut, and the partition is asked about again after
    the backoff, the round going on for the others."""
    logs = Logs({A0: (4, 10, 10), A1: (4, 10, 10)})
    leader = Leader(log_ranges={A0: (0, 8), A1: (0, 8)})
    leader.no_latest = {A0}
    fetcher = out_of_range(logs, leader, A0, A1)
    assert logs.cuts == [("truncate", A1, 8)]
    assert fetcher.partitions[A0].truncating
    assert fetcher.partitions[A0].delayed_until > 0


def test_a_partition_whose_log_failed_cut_at_its_high_watermark_or_reset_is_dropped() -> None:
    """markPartitionFailed also where no leader epoch is asked about: a log without epochs
    cut at its high watermark, and a log cut after OFFSET_OUT_OF_RANGE; each is no longer
    fetched, and the other partitions are truncated and fetched on."""
    logs = Logs({A0: (None, 10, 6), A1: (None, 10, 6)})
    logs.failing = {A0}
    fetcher = fetcher_of(logs, Leader())
    fetcher.add_all([(A0, FetchState(10, 5)), (A1, FetchState(10, 5))])
    fetcher._truncate_new_partitions()
    assert fetcher.fetched() == {A1}
    assert (fetcher.partitions[A1].truncating, fetcher.partitions[A1].fetch_offset) == (False, 6)

    logs = Logs({A0: (4, 10, 10), A1: (4, 10, 10)})
    logs.failing = {A0}
    fetcher = out_of_range(logs, Leader(log_ranges={A0: (0, 8), A1: (0, 8)}), A0, A1)
    assert fetcher.fetched() == {A1}
    assert (fetcher.partitions[A1].truncating, fetcher.partitions[A1].fetch_offset) == (False, 8)
