"""What the controller reads from and writes to ZooKeeper, and nothing else.

`ControllerStore` is the port the state machines use; `ZkControllerStore` is its one
implementation on ZooKeeper. Every write goes through `ZkClient.multi_fenced_batched`, so
each is conditional on the `/controller_epoch` zkVersion this controller was elected with:
the one epoch-checked path. Each is also bound to the ZooKeeper session the term was won
in (`session`, set by the controller on its election): refused once that session ended.
Reads are batched in multiReads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from typing import Protocol, cast

from kazoo.exceptions import NotEmptyError

from zkdata import paths
from zkdata.client import (
    ZOOKEEPER_UNAVAILABLE,
    BadVersionError,
    ControllerMovedError,
    Create,
    Delete,
    NodeExistsError,
    NoNodeError,
    OpResult,
    SetData,
    WriteOp,
    ZkClient,
    ZnodeStat,
    is_error,
    is_own_failure,
)
from zkdata.int_text import INT32_MAX
from zkdata.tree import subtrees_leaves_first
from zkdata.znodes import (
    LeaderAndIsr,
    MalformedZnode,
    PartitionState,
    TopicAssignment,
    TopicPartition,
    decode_partition_state,
    decode_reassignment_entries,
    decode_topic,
    decode_topic_config,
    encode_partition_state,
    encode_reassignment,
    encode_topic,
    next_zk_version,
)

log = logging.getLogger(__name__)

# Read-and-rewrite rounds of /admin/reassign_partitions while an admin keeps rewriting it,
# and of a topic's znode while admins keep adding partitions to it.
MAX_REASSIGNMENT_ZNODE_ROUNDS = 10
MAX_TOPIC_ZNODE_ROUNDS = 10
# Rounds of a deletion of znodes together while admins delete some of them meanwhile.
MAX_DELETE_ROUNDS = 10
# Partitions of deleted topics whose znodes are deleted in the same rounds: each delete
# is a multi of its own, and all of 100,000 partitions' in flight at once took the
# controller's process to 686 MB (from 250 MB), measured.
DELETE_TOPICS_PARTITIONS = 10_000

_DATA = itemgetter(0)
_STAT = itemgetter(1)
_VERSION = attrgetter("version")
_LEADER_EPOCH = attrgetter("leader_epoch")
_MZXID = attrgetter("mzxid")

# Partition states read and decoded at a time (each slice in pipelined multiReads).
READ_SLICE = 10_000
# Distinct partition states remembered while reading (a bound: data comes from znodes).
_DECODED_STATES_MAX = 10_000


@dataclass
class UpdateResult:
    """Outcome of conditional partition-state writes.

    finished: written, with the new zkVersion; retry: the zkVersion moved (BadVersion),
    re-read and decide again; failed: any other error.
    """

    finished: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    retry: list[TopicPartition] = field(default_factory=list)
    failed: dict[TopicPartition, Exception] = field(default_factory=dict)

    def add(self, tp: TopicPartition, written: LeaderAndIsr, outcome: int | Exception) -> None:
        """File one write of ``written``: its new zkVersion, or the error it got."""
        if isinstance(outcome, BadVersionError):
            self.retry.append(tp)
        elif isinstance(outcome, Exception):
            self.failed[tp] = outcome
        else:
            # The constructor, not _replace (2x slower): a broker loss files 10,000s.
            self.finished[tp] = LeaderAndIsr(
                written.leader, written.leader_epoch, written.isr, outcome
            )


# update_partition_states' on_written: a slice of the states written, by partition. Also
# their on_unanswered: the states sent whose answer a lost connection took, each with the
# zkVersion it has if it landed.
WrittenCallback = Callable[[dict[TopicPartition, LeaderAndIsr]], None]


def refuse_epochs_past_int32(
    states: Mapping[TopicPartition, LeaderAndIsr], result: UpdateResult
) -> Mapping[TopicPartition, LeaderAndIsr]:
    """The states a store may write. One whose leader epoch a decision took past int32's
    largest (its state held 2147483647) is filed failed, naming its znode, and left as
    it is: neither a reader of the znode nor a request could take the epoch, and one such
    request would take every partition batched with it along. Kafka 2.8's Int wraps to
    a negative epoch."""
    if not states or max(map(_LEADER_EPOCH, states.values())) <= INT32_MAX:
        return states  # C speed: a broker loss writes 10,000s
    ok: dict[TopicPartition, LeaderAndIsr] = {}
    for tp, lai in states.items():
        if lai.leader_epoch > INT32_MAX:
            result.failed[tp] = MalformedZnode(
                paths.partition_state(tp.topic, tp.partition),
                f"leader_epoch {lai.leader_epoch - 1} cannot be incremented",
            )
        else:
            ok[tp] = lai
    return ok


def check_fence(epoch_zk_version: int, current_zk_version: int, writes: Collection[object]) -> None:
    """What an in-memory store does for the first op of ZooKeeper's fenced multi: writes
    made with another /controller_epoch zkVersion raise ControllerMovedError, before any
    of them lands (and no ops means no multi, so no check either)."""
    if writes and epoch_zk_version != current_zk_version:
        raise ControllerMovedError(
            f"/controller_epoch is at zkVersion {current_zk_version}, not {epoch_zk_version}"
        )


def delete_failure(result: object) -> Exception | None:
    """What a delete alone in a fenced multi failed with: None if it deleted the znode
    or found it gone already (NoNode)."""
    if is_error(result) and not isinstance(result, NoNodeError):
        return cast(Exception, result)
    return None


def stray_topic_znodes(topic: str, under: Iterable[str]) -> list[str]:
    """Those of ``under`` (znodes under a topic's znode, config and deletion request)
    that a controller never writes: anything but the partitions znode, a partition's
    and its state (a child someone put there, a partition named "01" or "x")."""
    own = paths.topic_partitions(topic) + "/"
    strays = []
    for path in under:
        if path == paths.topic_partitions(topic):
            continue
        if path.startswith(own):
            rest = path[len(own) :].split("/")
            p = paths.parse_partition_id(rest[0])
            if p is not None and (len(rest) == 1 or rest[1:] == ["state"]):
                continue
        strays.append(path)
    return strays


# The most stray znodes a warning names (a chain of them can be 1,000s deep).
MAX_STRAYS_SAID = 20


def said_of(strays: Sequence[str]) -> str:
    """The stray znodes as a warning names them: the first MAX_STRAYS_SAID, each cut at
    200 characters, and how many more."""
    said = ", ".join(
        repr(path if len(path) <= 200 else path[:200] + "...") for path in strays[:MAX_STRAYS_SAID]
    )
    more = len(strays) - MAX_STRAYS_SAID
    return said if more <= 0 else f"{said} and {more} more"


class ControllerStore(Protocol):
    def read_partition_states(
        self, tps: Sequence[TopicPartition]
    ) -> dict[TopicPartition, PartitionState | None]: ...

    def create_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        epoch_zk_version: int,
        on_created: WrittenCallback | None = None,
        on_unanswered: WrittenCallback | None = None,
    ) -> dict[TopicPartition, Exception | None]:
        """Each state created (fenced); by partition, None where it was created or the
        error it got (NodeExistsError: a state was there). ``on_created``: called with
        each slice of the states created (at zkVersion 0) as the store answers it, as
        update_partition_states' ``on_written``: every created state is in exactly one
        call, and a fence that fails after some slices were reported still raises.
        ``on_unanswered``: as update_partition_states'."""
        ...

    def update_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        epoch_zk_version: int,
        on_written: WrittenCallback | None = None,
        on_unanswered: WrittenCallback | None = None,
    ) -> UpdateResult:
        """Each state conditional on its zkVersion. ``on_written``: called with each slice
        of the states written (with their new zkVersions) as the store answers it, while
        the rest may still be in flight; every written state is in exactly one call and in
        the result's ``finished``. A leader epoch past int32 is not written: failed
        (``refuse_epochs_past_int32``). A fence that fails after some slices were reported
        still raises ControllerMovedError: those states were written. A lost connection
        (ZOOKEEPER_UNAVAILABLE) raises too, after ``on_unanswered`` is called once with
        every state whose answer never came (each with the zkVersion it has if it
        landed, which it may have); none of them was given to ``on_written``."""
        ...

    def topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]: ...

    def write_topic_assignments(
        self, assignments: Sequence[TopicAssignment], epoch_zk_version: int
    ) -> set[str]:
        """Each topic's znode rewritten with its assignment (fenced), keeping partitions
        the znode has and the assignment lacks (``keeping_added_partitions``). The topics
        whose znode is gone are skipped and returned: being removed, their TopicChange
        follows."""
        ...

    def delete_topic(self, topic: str, partitions: Iterable[int], epoch_zk_version: int) -> None:
        """A deleted topic's znodes removed (fenced), its partitions' states first; the
        topic's own znode and its deletion request together."""
        ...

    def delete_topics(self, topics: Mapping[str, Iterable[int]], epoch_zk_version: int) -> None:
        """``delete_topic`` of each topic (with its partitions), all of them at once."""
        ...


def keeping_added_partitions(
    ours: TopicAssignment, current: TopicAssignment | None
) -> TopicAssignment:
    """The controller's assignment of a topic plus the partitions its znode (``current``)
    has and the controller does not know yet: an admin added them after the controller
    last read the znode, and the controller hears of them from the znode's watch, after
    this write. Kafka rewrites the znode unconditionally, and they are lost. ``ours``
    itself when there are none."""
    if current is None:
        return ours
    added = {p: r for p, r in current.partitions.items() if p not in ours.partitions}
    if not added:
        return ours
    return TopicAssignment(
        ours.topic,
        {**ours.partitions, **added},
        ours.topic_id,
        ours.adding_replicas,
        ours.removing_replicas,
    )


def _written_before(
    part: Sequence[TopicPartition],
    got: list[tuple[bytes, ZnodeStat] | None],
    zxid: int,
    into: dict[TopicPartition, int],
) -> None:
    """Into `into`, each partition of `part` whose znode was last written before `zxid`,
    with its mzxid. Usually none is: the comparison loops in C unless a znode is missing."""
    if None in got:
        for tp, item in zip(part, got, strict=True):
            if item is not None and item[1].mzxid < zxid:
                into[tp] = item[1].mzxid
        return
    present = cast(list[tuple[bytes, ZnodeStat]], got)
    mzxids = list(map(_MZXID, map(_STAT, present)))
    if min(mzxids, default=zxid) >= zxid:
        return
    into.update((tp, m) for tp, m in zip(part, mzxids, strict=True) if m < zxid)


def _report_unanswered(
    on_unanswered: WrittenCallback,
    sent: Iterable[tuple[TopicPartition, LeaderAndIsr]],
    answered: Collection[TopicPartition],
) -> None:
    """A lost connection ended a batch of partition-state writes: the states of
    ``sent`` not ``answered`` (ZooKeeper may have applied them, unreported), each with
    the zkVersion the write gives, to ``on_unanswered``. Worked out only on this path:
    a batch whose answers all come pays nothing for it."""
    unanswered = {tp: lai for tp, lai in sent if tp not in answered}
    if unanswered:
        on_unanswered(unanswered)


class ZkControllerStore:
    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk
        #: the session generation of the term writing through this store (its token's):
        #: its writes are refused (SessionExpiredError) once that session ended. None:
        #: any session (a store used without a term: tools, tests).
        self.session: int | None = None
        #: notification znodes whose deletion failed, already logged (delete_notifications)
        self._undeletable_logged: set[str] = set()

    # --- partition states ---------------------------------------------------------------

    def read_partition_states(
        self, tps: Sequence[TopicPartition]
    ) -> dict[TopicPartition, PartitionState | None]:
        return self.read_partition_states_written_before(tps, 0)[0]

    def read_partition_states_written_before(
        self, tps: Sequence[TopicPartition], zxid: int
    ) -> tuple[dict[TopicPartition, PartitionState | None], dict[TopicPartition, int]]:
        """The partitions' states, and for those whose state was last written before
        `zxid`, when it was (the znode's mzxid): a failover tells by it which brokers
        registered since a state listing them was written."""
        out: dict[TopicPartition, PartitionState | None] = {}
        written_before: dict[TopicPartition, int] = {}
        # Most partitions of a cluster share a handful of states (leader, epochs, ISR):
        # equal znode data and version decode once, to one shared immutable state.
        decoded: dict[tuple[bytes, int], PartitionState] = {}
        # A slice at a time: a failover of 100,000 partitions never holds every znode's
        # raw data and stat at once (their decoded states are a fraction of that). The
        # next slice's reads are sent before this one is worked through, so ZooKeeper
        # and this thread work at the same time (two slices in memory at most).
        slices = [tps[start : start + READ_SLICE] for start in range(0, len(tps), READ_SLICE)]
        in_flight = [self._send_reads(part) for part in slices[:1]]
        for i, part in enumerate(slices):
            if i + 1 < len(slices):
                in_flight.append(self._send_reads(slices[i + 1]))
            state_paths, results = in_flight.pop(0)
            got = results()
            out.update(zip(part, self._decode_slice(state_paths, got, decoded), strict=True))
            if zxid:
                _written_before(part, got, zxid, written_before)
        return out, written_before

    def _decode_slice(
        self,
        state_paths: list[str],
        got: list[tuple[bytes, ZnodeStat] | None],
        decoded: dict[tuple[bytes, int], PartitionState],
    ) -> list[PartitionState | None]:
        """The states read from these paths. Each distinct (data, version) is decoded once,
        and the slice is matched to them by operations that loop in C; a missing znode, a
        malformed one or too many distinct states take the loop per partition."""
        if None not in got:
            present = cast(list[tuple[bytes, ZnodeStat]], got)
            keys = list(zip(map(_DATA, present), map(_VERSION, map(_STAT, present)), strict=True))
            new = set(keys).difference(decoded)
            if len(decoded) + len(new) <= _DECODED_STATES_MAX:
                index = dict(zip(keys, range(len(keys)), strict=True)) if new else {}
                for key in new:
                    i = index[key]
                    try:
                        decoded[key] = decode_partition_state(state_paths[i], *key)
                    except MalformedZnode:
                        break  # reported below, once for each partition, with its path
                else:
                    return list(map(decoded.__getitem__, keys))
        states: list[PartitionState | None] = []
        for path, item in zip(state_paths, got, strict=True):
            if item is None:
                states.append(None)
                continue
            key = (item[0], item[1].version)
            state = decoded.get(key)
            if state is None:
                state = self.decode_state(path, item)
                if state is not None and len(decoded) < _DECODED_STATES_MAX:
                    decoded[key] = state
            states.append(state)
        return states

    def _send_reads(
        self, part: Sequence[TopicPartition]
    ) -> tuple[list[str], Callable[[], list[tuple[bytes, ZnodeStat] | None]]]:
        state_paths = paths.partition_states(part)
        return state_paths, self.zk.get_many_sent(state_paths)

    @staticmethod
    def decode_state(path: str, got: tuple[bytes, ZnodeStat] | None) -> PartitionState | None:
        if got is None:
            return None
        try:
            return decode_partition_state(path, got[0], got[1].version)
        except MalformedZnode as e:
            log.error("%s; skipping the partition", e)
            return None

    def create_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        epoch_zk_version: int,
        on_created: WrittenCallback | None = None,
        on_unanswered: WrittenCallback | None = None,
    ) -> dict[TopicPartition, Exception | None]:
        tps = list(states)
        # Parents first (each fenced too); they may exist from an earlier, interrupted try.
        topics = sorted({tp.topic for tp in tps})
        self._create_ignoring_existing(
            epoch_zk_version, [paths.topic_partitions(t) for t in topics]
        )
        self._create_ignoring_existing(
            epoch_zk_version, [paths.partition(tp.topic, tp.partition) for tp in tps]
        )
        items = [
            [
                Create(
                    paths.partition_state(tp.topic, tp.partition),
                    encode_partition_state(states[tp], controller_epoch),
                )
            ]
            for tp in tps
        ]
        out: dict[TopicPartition, Exception | None] = {}

        def answered(indices: list[int], results: list[list[OpResult]]) -> None:
            created: dict[TopicPartition, LeaderAndIsr] = {}
            for i, (outcome,) in zip(indices, results, strict=True):
                tp = tps[i]
                if is_error(outcome):
                    out[tp] = outcome
                else:
                    out[tp] = None
                    created[tp] = states[tp]
            if on_created is not None and created:
                on_created(created)

        try:
            self.zk.multi_fenced_batched(
                epoch_zk_version, items, on_answered=answered, session=self.session
            )
        except ZOOKEEPER_UNAVAILABLE:
            if on_unanswered is not None:
                _report_unanswered(
                    on_unanswered, ((tp, states[tp]._replace(zk_version=0)) for tp in tps), out
                )
            raise
        return {tp: out[tp] for tp in tps}

    def _create_ignoring_existing(self, epoch_zk_version: int, path_list: list[str]) -> None:
        existing = self.zk.get_many(path_list)
        missing = [p for p, got in zip(path_list, existing, strict=True) if got is None]
        if not missing:
            return
        results = self.zk.multi_fenced_batched(
            epoch_zk_version, [[Create(p)] for p in missing], session=self.session
        )
        for p, r in zip(missing, results, strict=True):
            if isinstance(r[0], NoNodeError):
                # Its parent vanished (the topic znode was deleted meanwhile): the states
                # under it fail to be created, each a failed state change of its partition,
                # as Kafka's createTopicPartitionStatesRaw leaves it.
                log.warning("could not create %s: its parent is gone", p)
            elif is_error(r[0]) and not isinstance(r[0], NodeExistsError):
                raise r[0]

    def update_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        epoch_zk_version: int,
        on_written: WrittenCallback | None = None,
        on_unanswered: WrittenCallback | None = None,
    ) -> UpdateResult:
        result = UpdateResult()
        to_write = refuse_epochs_past_int32(states, result)
        # Two lists, not a list of pairs: 5 MB less for 100,000 states (a deletion's).
        tps, lais = list(to_write), list(to_write.values())
        # A generator: each packed multi goes out as soon as its states are encoded.
        items = (
            [
                SetData(
                    paths.partition_state(tp.topic, tp.partition),
                    encode_partition_state(lai, controller_epoch),
                    lai.zk_version,
                )
            ]
            for tp, lai in zip(tps, lais, strict=True)
        )
        finished = result.finished

        def answered(indices: list[int], results: list[list[OpResult]]) -> None:
            written: dict[TopicPartition, LeaderAndIsr] = {}
            for i, (outcome,) in zip(indices, results, strict=True):
                tp, lai = tps[i], lais[i]
                if isinstance(outcome, Exception):
                    result.add(tp, lai, outcome)
                else:  # UpdateResult.add inlined: a broker loss files 10,000s
                    written[tp] = LeaderAndIsr(
                        lai.leader, lai.leader_epoch, lai.isr, outcome.version
                    )
            finished.update(written)
            if on_written is not None and written:
                on_written(written)

        try:
            self.zk.multi_fenced_batched(
                epoch_zk_version, items, on_answered=answered, session=self.session
            )
        except ZOOKEEPER_UNAVAILABLE:
            if on_unanswered is not None:
                answered_tps = finished.keys() | result.failed.keys() | set(result.retry)
                _report_unanswered(
                    on_unanswered,
                    (
                        (
                            tp,
                            LeaderAndIsr(
                                lai.leader,
                                lai.leader_epoch,
                                lai.isr,
                                next_zk_version(lai.zk_version),
                            ),
                        )
                        for tp, lai in zip(tps, lais, strict=True)
                    ),
                    answered_tps,
                )
            raise
        return result

    # --- topics -------------------------------------------------------------------------

    def topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        names = sorted(set(topics))
        config_paths = [paths.topic_config(t) for t in names]
        out: dict[str, dict[str, str]] = {}
        for topic, path, got in zip(
            names, config_paths, self.zk.get_many(config_paths), strict=True
        ):
            if got is None:
                out[topic] = {}
                continue
            try:
                out[topic] = decode_topic_config(topic, got[0], path)
            except MalformedZnode as e:
                log.error("%s; using the broker defaults for topic %s", e, topic)
                out[topic] = {}
        return out

    def write_topic_assignments(
        self, assignments: Sequence[TopicAssignment], epoch_zk_version: int
    ) -> set[str]:
        """Conditional on each znode's version as read just before: an admin's
        add-partitions writes the topic znode too, and one that lands between the read
        and the write is read again and kept (see ``keeping_added_partitions``). A znode
        gone (at the read, or NoNode at the write) is a topic being removed: skipped and
        returned, as Kafka 2.8's setTopicIds ignores its results (raising ended the term)."""
        gone: set[str] = set()
        pending = list(assignments)
        for _ in range(MAX_TOPIC_ZNODE_ROUNDS):
            topic_paths = [paths.topic(a.topic) for a in pending]
            items: list[list[WriteOp]] = []
            present: list[TopicAssignment] = []
            for a, path, got in zip(
                pending, topic_paths, self.zk.get_many(topic_paths), strict=True
            ):
                if got is None:
                    gone.add(a.topic)
                    continue
                present.append(a)
                try:
                    current: TopicAssignment | None = decode_topic(a.topic, got[0], path)
                except MalformedZnode as e:
                    log.error("%s; rewriting it from the controller's assignment", e)
                    current = None
                merged = keeping_added_partitions(a, current)
                if merged is not a:
                    log.info(
                        "topic %s: keeping partitions %s, added since the controller read it",
                        a.topic,
                        sorted(set(merged.partitions) - set(a.partitions)),
                    )
                items.append([SetData(path, encode_topic(merged), got[1].version)])
            again: list[TopicAssignment] = []
            for a, r in zip(
                present,
                self.zk.multi_fenced_batched(epoch_zk_version, items, session=self.session),
                strict=True,
            ):
                if isinstance(r[0], BadVersionError):
                    again.append(a)  # written meanwhile: read it again
                elif isinstance(r[0], NoNodeError):
                    gone.add(a.topic)
                elif is_error(r[0]):
                    raise RuntimeError(
                        f"could not write the assignment of topic {a.topic}: {r[0]!r}"
                    )
            if not again:
                if gone:
                    log.info(
                        "topics %s: znode gone before the controller wrote it, being removed",
                        sorted(gone),
                    )
                return gone
            pending = again
        raise RuntimeError(
            f"could not write the assignments of topics {sorted(a.topic for a in pending)}:"
            " their znodes kept changing under the controller"
        )

    def restore_topic_assignment(
        self, assignment: TopicAssignment, version: int, epoch_zk_version: int
    ) -> bool:
        """Rewrite a topic's znode with ``assignment`` exactly (partitions it holds beyond
        it are taken out), fenced and conditional on the znode's ``version`` as read.
        False if it was written again meanwhile (its watch brings that change) or is gone."""
        path = paths.topic(assignment.topic)
        op = SetData(path, encode_topic(assignment), version)
        result = self.zk.multi_fenced(epoch_zk_version, [op], session=self.session)[0]
        if isinstance(result, BadVersionError | NoNodeError):
            log.info("could not restore %s: %r", path, result)
            return False
        if is_error(result):
            raise result
        return True

    def delete_topic(self, topic: str, partitions: Iterable[int], epoch_zk_version: int) -> None:
        """Remove a deleted topic's znodes, leaves first: states, partitions, and whatever
        else is under the topic, its config or its deletion request (a child someone put
        there: Kafka 2.8 deletes the topic znode with deleteRecursive and ignores the
        config's and request's delete results; NotEmpty ended every term that met it
        here); then the topic, its config and the request itself, together (one fenced
        multi), so that no deletion cut short leaves a request naming no topic (see
        architecture.md, item 29). Every delete is fenced; a child created meanwhile (the
        multi fails NotEmpty) is read and deleted in the next round."""
        self.delete_topics({topic: partitions}, epoch_zk_version)

    def delete_topics(self, topics: Mapping[str, Iterable[int]], epoch_zk_version: int) -> None:
        """``delete_topic`` of each topic, their reads and deletes pipelined together;
        each topic's own znode, config and request still go in one multi of their own.
        One topic after another, each waited for its own round trips (its subtree read,
        its deletes, its roots' multi): 100 topics of 1,000 partitions took 20 s, 0.2 s
        each, measured (`benchmarks/bench_topic_deletion.py`)."""
        batch: dict[str, list[int]] = {}
        partitions = 0
        for topic, ps in topics.items():
            batch[topic] = sorted(set(ps))
            partitions += len(batch[topic])
            if partitions >= DELETE_TOPICS_PARTITIONS:
                self._delete_topics(batch, epoch_zk_version)
                batch, partitions = {}, 0
        if batch:
            self._delete_topics(batch, epoch_zk_version)

    def _delete_topics(self, pending: dict[str, list[int]], epoch_zk_version: int) -> None:
        """``delete_topics`` of a batch (``pending``: emptied as topics are done)."""
        reported: set[str] = set()
        for _ in range(MAX_DELETE_ROUNDS):
            roots = {
                t: [paths.topic(t), paths.topic_config(t), paths.delete_topic(t)] for t in pending
            }
            topic_of_root = {r: t for t, rs in roots.items() for r in rs}
            under: dict[str, list[str]] = {t: [] for t in pending}
            for path in subtrees_leaves_first(self.zk, list(topic_of_root)):
                if path not in topic_of_root:  # leaves first, each topic's in that order
                    under[topic_of_root[_root_of(path)]].append(path)
            ops: list[WriteOp] = []
            for topic, below in under.items():
                strays = [path for path in stray_topic_znodes(topic, below) if path not in reported]
                if strays:
                    reported.update(strays)
                    log.warning(
                        "topic %s: znodes under its znodes that the controller did not write,"
                        " deleted with them: %s",
                        topic,
                        said_of(strays),
                    )
                # What the read found only: a partition the controller knows of whose
                # znodes it did not find is gone (only the controller makes them), and its
                # delete would fail its pack (NoNode), as after a failover mid-deletion.
                ops.extend(Delete(path) for path in below)
            failures = self._send_deletes(ops, epoch_zk_version)
            other = [(path, f) for path, f in failures if not isinstance(f, NotEmptyError)]
            if other:
                raise RuntimeError(f"could not delete {other[0][0]}: {other[0][1]!r}")
            # A child created meanwhile under one of a topic's znodes: read them again.
            held = {topic_of_root[_root_of(path)] for path, _ in failures}
            done = self._delete_together(
                {t: rs for t, rs in roots.items() if t not in held}, epoch_zk_version
            )
            for topic in done:
                del pending[topic]
            if not pending:
                return
        raise RuntimeError(
            f"could not delete the znodes of topics {sorted(pending)}: they kept changing"
        )

    def _delete_together(
        self, path_lists: Mapping[str, Sequence[str]], epoch_zk_version: int
    ) -> set[str]:
        """For each key, delete those of its znodes that exist in one fenced multi: all of
        them, or none if it fails. The keys whose znodes are gone; not one whose multi
        failed because one was deleted (by an admin) or was given a child meanwhile: read
        again."""
        keys = list(path_lists)
        flat = [path for k in keys for path in path_lists[k]]
        existing: dict[str, list[str]] = {k: [] for k in keys}
        at = 0
        got = self.zk.get_many(flat)
        for k in keys:
            for path in path_lists[k]:
                if got[at] is not None:
                    existing[k].append(path)
                at += 1
        done = {k for k, found in existing.items() if not found}
        asked = [k for k, found in existing.items() if found]
        if not asked:
            return done
        results = self.zk.multi_fenced_batched(
            epoch_zk_version,
            [[Delete(p) for p in existing[k]] for k in asked],
            session=self.session,
        )
        for k, item in zip(asked, results, strict=True):
            failed = [
                (path, r) for path, r in zip(existing[k], item, strict=True) if is_own_failure(r)
            ]
            other = [
                (path, r) for path, r in failed if not isinstance(r, NoNodeError | NotEmptyError)
            ]
            if other:
                raise RuntimeError(f"could not delete {other[0][0]}: {other[0][1]!r}")
            if not failed:
                done.add(k)
        return done

    def _send_deletes(
        self, ops: list[WriteOp], epoch_zk_version: int
    ) -> list[tuple[str, Exception]]:
        """The deletes, in order, packed many to a fenced multi and pipelined; the paths
        that failed, with their errors. A missing znode is not an error here. Order holds
        because ZooKeeper applies one session's requests in order, and when a multi fails
        (a znode deleted meanwhile, a child put under one) its deletes are retried each
        alone, after every multi, in order: a parent packed after its rolled-back leaves
        failed too (NotEmpty) and is retried after them. Kafka sends each delete in a
        request of its own; 200,000 of them (the partitions of 100 topics of 1,000) cost
        the controller's ZooKeeper connection one request each."""
        results = self.zk.multi_fenced_batched(
            epoch_zk_version, [[op] for op in ops], session=self.session
        )
        failures: list[tuple[str, Exception]] = []
        for op, r in zip(ops, results, strict=True):
            failure = delete_failure(r[0])
            if failure is not None:
                failures.append((getattr(op, "path", str(op)), failure))
        return failures

    def _delete_in_order(
        self, ops: list[WriteOp], epoch_zk_version: int, *, skip_failed: bool = False
    ) -> None:
        for path, failure in self._send_deletes(ops, epoch_zk_version):
            if not skip_failed:
                raise RuntimeError(f"could not delete {path}: {failure!r}")
            if path not in self._undeletable_logged:
                if len(self._undeletable_logged) >= 1024:  # bounded; logged again, rarely
                    self._undeletable_logged.clear()
                self._undeletable_logged.add(path)
                log.warning("could not delete %s: %r; leaving it", path, failure)

    def delete_recursive(self, path: str, epoch_zk_version: int) -> None:
        """Delete ``path`` and whatever is under it (fenced), leaves first: Kafka 2.8's
        deleteRecursive, which it deletes /admin/preferred_replica_election and
        /admin/reassign_partitions with. A child put under the znode must not keep the
        request there, to be acted on, and fail to be deleted, at every failover."""
        self._delete_in_order(
            [Delete(p) for p in subtrees_leaves_first(self.zk, [path])], epoch_zk_version
        )

    def delete_notifications(self, path_list: Sequence[str], epoch_zk_version: int) -> None:
        """Delete notification znodes (ISR changes, log dir events, topic deletion
        requests), fenced. A delete that fails (a child an operator or a tool put under
        the znode: NotEmpty) is logged once per path and left: Kafka 2.8's
        deleteIsrChangeNotifications, deleteLogDirEventNotifications and
        deleteTopicDeletions ignore the deletes' results, only the /controller_epoch
        check failing raises (ControllerMovedError here too). Raising would end every
        failover that meets the znode, and no broker would stay controller."""
        if path_list:
            self._delete_in_order(
                [Delete(p) for p in path_list], epoch_zk_version, skip_failed=True
            )

    def remove_from_reassignment_znode(
        self,
        done: Mapping[TopicPartition, Sequence[int]],
        epoch_zk_version: int,
        *,
        drop_unreadable: bool = False,
        read_czxid: int | None = None,
    ) -> bool:
        """Take the partitions of `done` out of /admin/reassign_partitions, each only if the
        znode still asks for the target given, and delete the znode once nothing is left.
        Whatever else it holds stays: an admin may have added or rewritten requests since
        the controller read it, so it is read again and written conditionally on the
        version read (again if that moved). Entries that cannot be read (reported by the
        controller's read) go whenever it is written, and with ``drop_unreadable`` even if
        nothing else does. ``read_czxid``: the czxid of the znode the controller read; one
        found with another is a request created since (an admin deleted the one read), left
        as it is for the controller to read. Returns whether the controller should read the
        znode again: it was deleted, or created anew since."""
        if not done and not drop_unreadable:
            return False
        for _ in range(MAX_REASSIGNMENT_ZNODE_ROUNDS):
            # Read with its watch (the controller's handler): a rewrite of ours spent the
            # one its last read armed, and an admin may have deleted it since, to create
            # it anew later. Kafka 2.8's ZooKeeperClient arms a watch with every read of a
            # path it has a handler for (shouldWatch), this check included.
            got = self.zk.get(paths.REASSIGN_PARTITIONS, watch=True)
            if got is None:
                return False
            if read_czxid is not None and got[1].czxid != read_czxid:
                return True
            try:
                requested, unreadable = decode_reassignment_entries(got[0])
            except MalformedZnode as e:
                log.error("%s; leaving it for the next reassignment event", e)
                return False
            remaining = {
                tp: target
                for tp, target in requested.items()
                if tuple(done.get(tp, ())) != tuple(target)
            }
            if len(remaining) == len(requested) and not unreadable:
                return False
            version = got[1].version
            if not remaining:
                # Its children first (Kafka deletes it recursively): the conditional
                # delete below would fail NotEmpty. They do not move its data version.
                self._delete_in_order(
                    [
                        Delete(p)
                        for p in subtrees_leaves_first(self.zk, [paths.REASSIGN_PARTITIONS])[:-1]
                    ],
                    epoch_zk_version,
                )
            op: WriteOp = (
                SetData(paths.REASSIGN_PARTITIONS, encode_reassignment(remaining), version)
                if remaining
                else Delete(paths.REASSIGN_PARTITIONS, version)
            )
            result = self.zk.multi_fenced(epoch_zk_version, [op], session=self.session)[0]
            if isinstance(result, NoNodeError):
                return False  # deleted by an admin meanwhile: nothing left to track
            if isinstance(result, BadVersionError):
                continue  # rewritten meanwhile: read it again
            if is_error(result):
                raise result
            return not remaining
        log.error(
            "gave up updating %s: it kept changing under the controller",
            paths.REASSIGN_PARTITIONS,
        )
        return False


def _root_of(path: str) -> str:
    """The topic znode, config or deletion request a znode under one of them is under:
    each is three levels deep (/brokers/topics/<t>, /config/topics/<t>,
    /admin/delete_topics/<t>)."""
    return "/".join(path.split("/", 4)[:4])
