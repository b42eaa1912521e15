"""election/controller_election.py's try_elect against what happens between its read of
/controller_epoch and its multi, over the in-memory ZooKeeper (tests/unit/fake_zk.py).

Kafka 2.8's KafkaZkClient.registerControllerAndIncrementControllerEpoch creates
/controller and sets /controller_epoch conditionally on the zkVersion it read, in one
multi: an election held by anyone meanwhile makes it fail. On a failure,
checkControllerAndEpoch takes the term only if /controller names this broker AND
/controller_epoch holds the very epoch it meant to write; here also only if /controller
is of this session (the multi's ephemeral would be)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import pytest
from kazoo.exceptions import ConnectionLoss, OperationTimeoutError, SessionExpiredError

from election.controller_election import (
    NO_CONTROLLER,
    ElectionOutcome,
    delete_own_controller_znode,
    try_elect,
)
from tests.unit.fake_zk import FakeZk
from zkdata import paths
from zkdata.client import WriteOp, ZkClient
from zkdata.znodes import (
    decode_controller_epoch,
    encode_controller,
    encode_controller_epoch,
)

OURS, THEIRS = 0x111, 0x222


def elect(zk: FakeZk, broker_id: int) -> ElectionOutcome:
    return try_elect(cast(ZkClient, zk), broker_id)


def delete_own(zk: FakeZk, broker_id: int) -> bool:
    return delete_own_controller_znode(cast(ZkClient, zk), broker_id)


def ensemble(epoch: int) -> tuple[FakeZk, FakeZk]:
    """Our session and another of the same ensemble, /controller_epoch at ``epoch``."""
    zk = FakeZk(OURS)
    zk.put(paths.CONTROLLER_EPOCH, encode_controller_epoch(epoch))
    return zk, zk.share(THEIRS)


def before_our_multi(zk: FakeZk, meanwhile: Callable[[], None]) -> None:
    """``meanwhile()`` runs once, after try_elect read the epoch and before its multi."""
    real_multi = zk.multi
    done: list[int] = []

    def multi(ops: Sequence[WriteOp], *, session: Any = None) -> Any:
        if not done:
            done.append(1)
            meanwhile()
        return real_multi(ops, session=session)

    zk.multi = multi  # type: ignore[method-assign]


def epoch_of(zk: FakeZk) -> int:
    return decode_controller_epoch(zk.nodes[paths.CONTROLLER_EPOCH][0])


def test_an_election_held_and_resigned_meanwhile_makes_the_multi_fail() -> None:
    """Broker 2 wins epoch 5 and resigns (its /controller gone) between our read of
    epoch 4 and our multi: the epoch write is conditional on the zkVersion read, so ours
    fails; writing epoch 5 again would give two controllers the same epoch."""
    zk, other = ensemble(4)

    def elect_and_resign() -> None:
        assert elect(other, 2).won
        assert delete_own(other, 2)

    before_our_multi(zk, elect_and_resign)
    outcome = elect(zk, 1)
    assert not outcome.won
    assert outcome.controller_id == NO_CONTROLLER
    assert epoch_of(zk) == 5
    assert paths.CONTROLLER not in zk.nodes


def test_the_epoch_taken_by_another_session_naming_this_broker_is_not_this_terms() -> None:
    """A previous incarnation of broker 1 (another session, not yet expired) wins the
    epoch this attempt meant to write: /controller names broker 1 and the epoch is the one
    expected, but the znode is not of this session, and the term is not taken."""
    zk, other = ensemble(4)

    def previous_incarnation_wins() -> None:
        assert elect(other, 1).won

    before_our_multi(zk, previous_incarnation_wins)
    outcome = elect(zk, 1)
    assert not outcome.won
    assert outcome.controller_id == 1
    assert epoch_of(zk) == 5
    assert zk.nodes[paths.CONTROLLER][1].ephemeralOwner == THEIRS


def test_our_own_controller_of_an_earlier_epoch_is_no_new_term() -> None:
    """/controller of this session naming this broker is still there from an earlier
    term (epoch 4): the multi fails on it, and the epoch is not the one the attempt meant
    to write (5), so no term is taken (Kafka's checkControllerAndEpoch: epoch ==
    newControllerEpoch); the controller clears its own stale znode and races again."""
    zk, _other = ensemble(4)
    zk.put(paths.CONTROLLER, encode_controller(1), owner=OURS)
    outcome = elect(zk, 1)
    assert not outcome.won
    assert outcome.controller_id == 1
    assert epoch_of(zk) == 4


class WatchRecordingZk(FakeZk):
    """Records the paths of the reads that left a watch."""

    def __init__(self, session_id: int) -> None:
        super().__init__(session_id)
        self.watched: list[str] = []

    def get(self, path: str, *, watch: bool = False) -> Any:
        if watch:
            self.watched.append(path)
        return super().get(path, watch=watch)


def test_a_malformed_epoch_is_read_again_with_a_watch() -> None:
    """The election cannot be held on an epoch that is not an integer; the read that
    finds it so leaves a watch on it, whose change retries the election."""
    zk = WatchRecordingZk(OURS)
    zk.put(paths.CONTROLLER_EPOCH, b"not an epoch")
    outcome = elect(zk, 1)
    assert not outcome.won
    assert outcome.problem is not None
    assert paths.CONTROLLER_EPOCH in outcome.problem
    assert zk.watched == [paths.CONTROLLER_EPOCH]
    assert paths.CONTROLLER not in zk.nodes


def test_a_lost_race_leaves_a_watch_on_the_winners_controller() -> None:
    """A lost race remembers the active controller and watches /controller, whose
    deletion brings the next election (Kafka's ControllerChangeHandler)."""
    zk = WatchRecordingZk(OURS)
    zk.put(paths.CONTROLLER_EPOCH, encode_controller_epoch(4))
    zk.put(paths.CONTROLLER, encode_controller(3), owner=THEIRS)
    outcome = elect(zk, 1)
    assert not outcome.won
    assert outcome.controller_id == 3
    assert paths.CONTROLLER in zk.watched
    assert epoch_of(zk) == 4


class LaggingZk(FakeZk):
    """Reads answered by a server that lags behind the leader: the tree as it was when
    ``lag()`` was called; writes (multis) go to the leader's tree."""

    def __init__(self, session_id: int) -> None:
        super().__init__(session_id)
        self.seen: dict[str, Any] | None = None

    def lag(self) -> None:
        self.seen = dict(self.nodes)

    def get(self, path: str, *, watch: bool = False) -> Any:
        if self.seen is not None:
            return self.seen.get(path)
        return super().get(path, watch=watch)


def test_a_lagging_servers_view_of_our_old_controller_deletes_nobody_elses() -> None:
    """The server answering the reads still shows our /controller (version 0) of epoch
    4, but an admin deleted it and broker 2 won epoch 5, its /controller also at version
    0: the delete is conditional on the epoch's zkVersion read with it, so broker 2's
    /controller stands (KAFKA-13407's removal never takes another's term away)."""
    zk = LaggingZk(OURS)
    zk.put(paths.CONTROLLER_EPOCH, encode_controller_epoch(4))
    other = zk.share(THEIRS)
    assert elect(zk, 1).won
    zk.lag()
    del zk.nodes[paths.CONTROLLER]  # an admin's delete
    assert elect(other, 2).won
    assert zk.nodes[paths.CONTROLLER][1].version == 0
    assert not delete_own(zk, 1)
    assert zk.nodes[paths.CONTROLLER][1].ephemeralOwner == THEIRS
    assert epoch_of(zk) == 6


def test_our_controller_of_the_term_read_is_deleted() -> None:
    zk, other = ensemble(4)
    assert elect(zk, 1).won
    assert not delete_own(other, 2)  # not its session's
    assert paths.CONTROLLER in zk.nodes
    assert delete_own(zk, 1)
    assert paths.CONTROLLER not in zk.nodes
    assert epoch_of(zk) == 5


def test_a_read_whose_answer_is_lost_with_the_session_raises_session_expired() -> None:
    """The race is lost (broker 3 holds /controller), and the answer to the read of the
    winner is lost while the session ends: SessionExpiredError, not a read made again in
    the next session (whose answer would be taken for this attempt's)."""
    zk, _other = ensemble(4)
    zk.put(paths.CONTROLLER, encode_controller(3), owner=THEIRS)
    real_get = zk.get

    def get(path: str, *, watch: bool = False) -> Any:
        if path == paths.CONTROLLER and zk.session_generation == 0:
            zk.expire(0x333)
            raise ConnectionLoss()
        return real_get(path, watch=watch)

    zk.get = get  # type: ignore[method-assign]
    with pytest.raises(SessionExpiredError):
        elect(zk, 1)


@pytest.mark.timeout(30)  # the mutant asking forever would hang
def test_answers_missing_for_a_session_timeout_while_connected_raise() -> None:
    """ZooKeeper stays connected but never answers: after a session timeout from the
    first lost answer the error is raised, as a disconnection that long is."""
    zk, _other = ensemble(4)
    zk.session_timeout_ms = 100
    asked: list[int] = []

    def multi(ops: Sequence[WriteOp], *, session: Any = None) -> Any:
        asked.append(1)
        raise OperationTimeoutError()

    zk.multi = multi  # type: ignore[method-assign]
    with pytest.raises(OperationTimeoutError):
        elect(zk, 1)
    assert len(asked) >= 2  # asked again meanwhile
    assert epoch_of(zk) == 4


def test_our_controllers_deletion_is_made_in_the_session_that_owned_it_or_not_at_all() -> None:
    """The session ends between the reads that found /controller ours and the delete:
    refused (SessionExpiredError), not sent in the next session."""
    zk, _other = ensemble(4)
    assert elect(zk, 1).won
    real_multi = zk.multi
    sessions: list[Any] = []

    def multi(ops: Sequence[WriteOp], *, session: Any = None) -> Any:
        sessions.append(session)
        zk.expire(0x333)
        return real_multi(ops, session=session)

    zk.multi = multi  # type: ignore[method-assign]
    with pytest.raises(SessionExpiredError):
        delete_own(zk, 1)
    assert sessions == [0]
