"""A multi one of whose ops fails, as ZooKeeper answers it: the ops before the failing one
RolledBackError (code 0), the failing one its own error, the ops after it
RuntimeInconsistency (code -2) (PrepRequestProcessor stops preparing at the first
failure). Only the failing op's result says what went wrong; and the items of a packed
multi retried alone that ZooKeeper answered are reported even if a later answer is lost."""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Iterator, Sequence
from typing import Any, cast

import pytest
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)
from kazoo.protocol.states import ZnodeStat

from admin.errors import TopicExistsError
from admin.topics import TopicCreationPlan, write_topic_creation
from controller.store import ZkControllerStore
from tests.unit.fake_zk import FakeZk
from zkdata import paths
from zkdata.client import (
    MULTIS_IN_FLIGHT,
    Create,
    Delete,
    SetData,
    WriteOp,
    ZkClient,
    is_own_failure,
)


def test_the_fake_answers_a_failed_multi_as_zookeeper_does() -> None:
    zk = FakeZk()
    for path in ("/a", "/p", "/p/c", "/q", "/r"):
        zk.put(path, b"")
    results = zk.multi([Delete("/a"), Delete("/p"), Delete("/q"), Delete("/r")])
    assert [type(r) for r in results] == [
        RolledBackError,
        NotEmptyError,
        RuntimeInconsistency,
        RuntimeInconsistency,
    ]
    assert {"/a", "/q", "/r"} <= zk.nodes.keys()  # nothing applied


def test_only_the_failing_op_is_an_own_failure() -> None:
    assert is_own_failure(NotEmptyError())
    assert is_own_failure(BadVersionError())
    assert not is_own_failure(RolledBackError())
    assert not is_own_failure(RuntimeInconsistency())
    assert not is_own_failure(True)
    assert not is_own_failure("/created")


def epoch_version(zk: FakeZk) -> int:
    zk.ensure_paths([paths.CONTROLLER_EPOCH])
    version: int = zk.nodes[paths.CONTROLLER_EPOCH][1].version
    return version


def test_a_child_put_under_the_topic_before_the_roots_multi_goes_in_the_next_round() -> None:
    """The topic's znode is the roots multi's first op: its NotEmpty leaves the config's
    and request's deletes RuntimeInconsistency, which ended the controller's term."""
    zk = FakeZk()
    zk.ensure_paths([paths.partition_state("t", 0), paths.topic_config("t")])
    zk.ensure_paths([paths.delete_topic("t")])
    version = epoch_version(zk)
    store = ZkControllerStore(cast(ZkClient, zk))
    real = zk.multi_fenced_batched
    raced: list[str] = []

    def child_created_meanwhile(epoch_zk_version: int, items: Any, **kwargs: Any) -> Any:
        items = list(items)
        if not raced and any(
            getattr(op, "path", None) == paths.topic("t") for ops in items for op in ops
        ):
            raced.append(zk.create(paths.topic("t") + "/stray")[0])
        return real(epoch_zk_version, items, **kwargs)

    zk.multi_fenced_batched = child_created_meanwhile  # type: ignore[method-assign]
    store.delete_topic("t", [0], version)
    assert raced
    assert not [p for p in zk.nodes if p.startswith(paths.topic("t"))]
    assert paths.topic_config("t") not in zk.nodes
    assert paths.delete_topic("t") not in zk.nodes


def test_a_topic_created_under_a_vanished_parent_raises_the_creates_own_error() -> None:
    """The config op is answered RolledBackError when the topic's create fails: that is
    no sign the config changed meanwhile."""
    zk = FakeZk()
    real = zk.multi

    def topics_znode_deleted_meanwhile(ops: Any, **kwargs: Any) -> Any:
        for path in [p for p in zk.nodes if p.startswith(paths.BROKER_TOPICS)]:
            del zk.nodes[path]
        return real(ops, **kwargs)

    zk.multi = topics_znode_deleted_meanwhile  # type: ignore[method-assign]
    plan = TopicCreationPlan("t", {0: [1]}, {}, uuid.uuid4())
    with pytest.raises(NoNodeError):
        write_topic_creation(cast(ZkClient, zk), plan, if_not_exists=False)


@pytest.mark.parametrize("stale_config", [False, True], ids=["no_config", "stale_config"])
@pytest.mark.parametrize("if_not_exists", [False, True])
def test_a_topic_another_creator_wrote_meanwhile_is_recognised(
    stale_config: bool, if_not_exists: bool
) -> None:
    """Another creator wrote the config and the topic after our reads: our config op fails
    (NodeExists, or BadVersion over a config left by an earlier incarnation) and the
    topic's Create only answers RuntimeInconsistency. The topic exists, as Kafka 2.8's
    AdminZkClient.createTopic says (TopicExistsException), not "run the command again"."""
    zk = FakeZk()
    if stale_config:
        zk.ensure_paths([paths.topic_config("t")])
    real = zk.multi

    def created_meanwhile(ops: Any, **kwargs: Any) -> Any:
        zk.multi = real  # type: ignore[method-assign]
        theirs = TopicCreationPlan("t", {0: [2]}, {"retention.ms": "1"}, uuid.uuid4())
        assert write_topic_creation(cast(ZkClient, zk), theirs, if_not_exists=False)
        return real(ops, **kwargs)

    zk.multi = created_meanwhile  # type: ignore[method-assign]
    plan = TopicCreationPlan("t", {0: [1]}, {}, uuid.uuid4())
    if if_not_exists:
        assert write_topic_creation(cast(ZkClient, zk), plan, if_not_exists=True) is False
    else:
        with pytest.raises(TopicExistsError, match="already exists"):
            write_topic_creation(cast(ZkClient, zk), plan, if_not_exists=False)


class Answer:
    def __init__(self, value: Any) -> None:
        self.value = value

    def get(self, timeout: float | None = None) -> Any:
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


def stat(version: int) -> ZnodeStat:
    return ZnodeStat(0, 0, 0, 0, version, 0, 0, 0, 0, 0, 0)


@pytest.mark.parametrize(
    "lost", [ConnectionLoss(), OperationTimeoutError(), SessionExpiredError()], ids=type
)
def test_retries_answered_before_zookeeper_became_unavailable_are_reported(
    lost: Exception,
) -> None:
    """Items retried alone after their packed multi failed on one of them: ZooKeeper
    answered (and applied, in order) the first two retries before the third's answer was
    lost. Those two are reported, then the loss raised: each item reported exactly once,
    every write reported (the state-change log holds each successful write)."""
    zk = ZkClient("127.0.0.1:1")  # never started: the multis are answered below
    answers = iter(
        [
            # the packed multi: the check passed, item 0 BadVersion, the rest not applied
            Answer([RolledBackError(), BadVersionError(), *[RuntimeInconsistency()] * 2]),
            # the retries, one item a multi, answered in order until the answers stop
            Answer([RolledBackError(), BadVersionError()]),
            Answer([True, stat(4)]),
            Answer(lost),
        ]
    )
    zk._multi_async = lambda ops, session=None: next(answers)  # type: ignore[method-assign]
    reported: dict[int, list[Any]] = {}

    def on_answered(indices: list[int], results: list[list[Any]]) -> None:
        for i, r in zip(indices, results, strict=True):
            assert i not in reported
            reported[i] = r

    items = [[SetData(f"/s{i}", b"x", 3)] for i in range(3)]
    with pytest.raises(type(lost)):
        zk.multi_fenced_batched(7, items, on_answered=on_answered)
    assert sorted(reported) == [0, 1]
    assert isinstance(reported[0][0], BadVersionError)
    assert reported[1] == [stat(4)]


def test_a_packed_multi_failing_on_its_last_item_retries_the_items_before_it() -> None:
    """ZooKeeper answers RolledBackError for the items before the failing one and nothing
    after it: the retry is decided by the failing op, wherever it is."""
    zk = FakeZk()
    for i in range(3):
        zk.put(f"/s{i}", b"")
    zk.ensure_paths([paths.CONTROLLER_EPOCH])
    zk.__class__ = type(
        "PackingZk",
        (FakeZk,),
        {
            "multi_fenced_batched": ZkClient.multi_fenced_batched,
            "_multi_batched": ZkClient._multi_batched,
            "_packed": staticmethod(ZkClient._packed),
            "_raise_if_fenced": staticmethod(ZkClient._raise_if_fenced),
            "_answer": ZkClient._answer,
            "_multi_async": lambda self, ops, session=None: Answer(self.multi(ops)),
        },
    )
    items: list[list[WriteOp]] = [
        [SetData("/s0", b"x", 0)],
        [Create("/s1")],
        [SetData("/s2", b"x", 0)],
    ]
    results = zk.multi_fenced_batched(0, items)
    assert isinstance(results[0][0], ZnodeStat)
    assert isinstance(results[1][0], NodeExistsError)
    assert isinstance(results[2][0], ZnodeStat)


class _Item(list[WriteOp]):
    """An item that can be watched for being let go of (a plain list cannot)."""


def test_the_items_and_requests_of_an_answered_multi_are_let_go_before_the_next_answer() -> None:
    # A deletion's 100,000 writes held 30 MB of items to the last answer (tracemalloc).
    zk = ZkClient("127.0.0.1:1")  # never started: the multis are answered below
    requests: list[weakref.ref[Any]] = []

    def answer(ops: Sequence[WriteOp], session: int | None = None) -> Answer:
        request = Answer([True, *[stat(1)] * (len(ops) - 1)])
        requests.append(weakref.ref(request))
        return request

    zk._multi_async = answer  # type: ignore[method-assign]
    items: list[weakref.ref[_Item]] = []

    def made() -> Iterator[_Item]:
        for i in range(4):
            item = _Item([SetData(f"/s{i}", b"x", 0)])
            items.append(weakref.ref(item))
            yield item

    held: list[tuple[list[bool], list[bool]]] = []

    def on_answered(indices: list[int], results: list[list[Any]]) -> None:
        held.append(([r() is not None for r in items], [r() is not None for r in requests]))

    assert zk.multi_fenced_batched(7, made(), on_answered=on_answered, max_ops=1) == []
    # Answered in order: when the k-th answer is handed on, the items before it and the
    # requests up to it are let go of (the last item the loop that made the multis holds).
    assert len(held) == 4
    for k, (items_held, requests_held) in enumerate(held):
        assert items_held[:k] == [False] * k
        assert requests_held == [False] * (k + 1) + [True] * (3 - k)


def test_at_most_multis_in_flight_await_their_answers_and_each_is_answered_in_turn() -> None:
    """Past MULTIS_IN_FLIGHT packed multis sent, the oldest answer is taken before the next
    is sent: a deletion's 200 multis held every request, item and answer at once."""
    zk = ZkClient("127.0.0.1:1")  # never started: the multis are answered below
    taken: list[int] = []
    in_flight: list[int] = []
    most = [0]

    class Counted(Answer):
        def __init__(self, n: int, ops: int) -> None:
            super().__init__([True, *[stat(n)] * (ops - 1)])
            self.n = n

        def get(self, timeout: float | None = None) -> Any:
            in_flight.remove(self.n)
            taken.append(self.n)
            return super().get(timeout)

    def answer(ops: Sequence[WriteOp], session: int | None = None) -> Answer:
        n = len(taken) + len(in_flight)
        in_flight.append(n)
        most[0] = max(most[0], len(in_flight))
        return Counted(n, len(ops))

    zk._multi_async = answer  # type: ignore[method-assign]
    multis = MULTIS_IN_FLIGHT * 3 + 2
    items = [[SetData(f"/s{i}", b"x", 0)] for i in range(multis * 2)]
    results = zk.multi_fenced_batched(7, items, max_ops=2)
    assert most[0] == MULTIS_IN_FLIGHT + 1  # the one just sent, before the oldest is taken
    assert taken == list(range(multis))
    assert results == [[stat(i // 2)] for i in range(multis * 2)]


def test_a_lost_answer_stops_the_sending_of_later_multis() -> None:
    """The items after a lost answer are not sent: the caller reports every item it was
    not told of as unanswered, and reads them back later; the ones never sent read back
    unwritten."""
    zk = ZkClient("127.0.0.1:1")  # never started: the multis are answered below
    sent: list[int] = []

    def answer(ops: Sequence[WriteOp], session: int | None = None) -> Answer:
        sent.append(len(sent))
        return Answer(ConnectionLoss() if len(sent) == 1 else [True, stat(1)])

    zk._multi_async = answer  # type: ignore[method-assign]
    items = [[SetData(f"/s{i}", b"x", 0)] for i in range(MULTIS_IN_FLIGHT * 4)]
    with pytest.raises(ConnectionLoss):
        zk.multi_fenced_batched(7, items, max_ops=1)
    assert len(sent) == MULTIS_IN_FLIGHT + 1
