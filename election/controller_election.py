"""Who is controller: the race for `/controller` and the controller epoch.

Kafka's KafkaZkClient.registerControllerAndIncrementControllerEpoch: one multi creates the
ephemeral `/controller` AND bumps `/controller_epoch` conditionally on its zkVersion, so
winning the race and taking the next epoch are one atomic step. The winner's
`FencingToken` (epoch, zkVersion of `/controller_epoch`) is what every later write of its
term is conditioned on, and the term is bound to the ZooKeeper session it was won in
(the client's session generation): once that session ends its writes are refused, as
Kafka's requests on an expired handle fail, although the zkVersion check alone would pass
in the client's next session until another controller is elected.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from kazoo.exceptions import ConnectionLoss, OperationTimeoutError, SessionExpiredError

from zkdata import paths
from zkdata.client import (
    Check,
    Create,
    Delete,
    NodeExistsError,
    NoNodeError,
    SetData,
    WriteOp,
    ZkClient,
    is_error,
)
from zkdata.int_text import INT32_MAX
from zkdata.znodes import (
    MalformedZnode,
    decode_controller,
    decode_controller_epoch,
    encode_controller,
    encode_controller_epoch,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

NO_CONTROLLER = -1
# Someone holds /controller but its data is unreadable: not us, and not electable.
UNKNOWN_CONTROLLER = -2


@dataclass(frozen=True, slots=True)
class FencingToken:
    """A controller's term: its epoch, the zkVersion of /controller_epoch it wrote, and
    the session generation (`ZkClient.session_generation`) it was won in."""

    epoch: int
    zk_version: int
    session: int


@dataclass(frozen=True, slots=True)
class ElectionOutcome:
    controller_id: int  # the active controller after the attempt (NO_CONTROLLER if none)
    token: FencingToken | None  # set only when this broker won
    # Why no election could be held at all (a malformed /controller_epoch), else None.
    problem: str | None = None

    @property
    def won(self) -> bool:
        return self.token is not None


def read_controller_epoch(zk: ZkClient, *, watch: bool = False) -> FencingToken:
    """The current epoch and its zkVersion (the session: the one it was read in); creates
    `/controller_epoch` as 0 if missing. ``watch``: the read leaves a watch on it."""
    session = zk.session_generation
    got = zk.get(paths.CONTROLLER_EPOCH, watch=watch)
    if got is None:
        try:
            zk.create(paths.CONTROLLER_EPOCH, encode_controller_epoch(0))
        except NodeExistsError:
            pass
        got = zk.get(paths.CONTROLLER_EPOCH)
        if got is None:
            raise RuntimeError("/controller_epoch vanished right after it was created")
    data, stat = got
    return FencingToken(decode_controller_epoch(data), stat.version, session)


def read_controller(
    zk: ZkClient, *, watch: bool = False, timeout_s: float | None = None
) -> tuple[int, int]:
    """(controller id, owner session id) of `/controller`; (NO_CONTROLLER, 0) if absent.

    With `watch`, leaves a watch for its creation, change or deletion. With `timeout_s`
    (no watch), ZooKeeperClientTimeout unless ZooKeeper answers within it.
    """
    if timeout_s is not None:
        assert not watch
        got = zk.get_within(paths.CONTROLLER, timeout_s)
    else:
        got = zk.get(paths.CONTROLLER, watch=watch)
    if got is None:
        return NO_CONTROLLER, 0
    data, stat = got
    try:
        return decode_controller(data), int(stat.ephemeralOwner)
    except MalformedZnode as e:
        log.error("%s; treating the controller as unknown until the znode goes away", e)
        return UNKNOWN_CONTROLLER, int(stat.ephemeralOwner)


def try_elect(zk: ZkClient, broker_id: int, *, session: int | None = None) -> ElectionOutcome:
    """One attempt to become controller. Never raises for a lost race, nor for a lost
    answer within a session timeout (`_answered_in`).

    A `/controller_epoch` that is not a valid epoch stops the election: no broker can know
    which epoch comes next, and a guess below one the brokers have seen would have every
    request of the new controller refused as stale. The problem is logged naming the znode,
    a watch is left on it by the read that found it so (`_read_epoch_watched_if_bad`; the
    controller retries when it changes: `zk_handlers.controller_epoch_change`), and the
    outcome says there is no controller.

    The term won is bound to ``session`` (a `session_generation`; None: the one the
    attempt started in): the election multi is refused (SessionExpiredError) if that
    session ended before it was sent, so a term is never won in a session other than its
    token's. The controller passes the session this broker last registered in: kazoo
    opens the next session at once, and a term won there before the broker registered
    again would have its failover count the broker dead.
    """
    if session is None:
        session = zk.session_generation
    try:
        current = _read_epoch_to_increment(zk)
    except MalformedZnode as e:
        return _unelectable(e)
    new_epoch = current.epoch + 1
    ops: list[WriteOp] = [
        Create(paths.CONTROLLER, encode_controller(broker_id), ephemeral=True),
        SetData(paths.CONTROLLER_EPOCH, encode_controller_epoch(new_epoch), current.zk_version),
    ]
    # A lost answer is not a lost election: the multi is sent again (_answered_in), and
    # one that had landed is answered NODEEXISTS and recognised below.
    results = _answered_in(zk, session, lambda: zk.multi(ops, session=session))
    if not any(is_error(r) for r in results):
        return ElectionOutcome(broker_id, FencingToken(new_epoch, results[1].version, session))
    # Lost, or our own earlier attempt succeeded before a lost connection hid the answer:
    # it was ours if /controller names us under our session and the epoch is the one we
    # wrote (Kafka's checkControllerAndEpoch).
    owner_session = zk.session_id
    controller_id, owner = _answered_in(zk, session, lambda: read_controller(zk, watch=True))
    if controller_id == broker_id and owner == owner_session and zk.session_generation == session:
        try:
            epoch = _answered_in(zk, session, lambda: _read_epoch_watched_if_bad(zk))
        except MalformedZnode as e:
            return _unelectable(e)
        if epoch.epoch == new_epoch:
            return ElectionOutcome(broker_id, FencingToken(epoch.epoch, epoch.zk_version, session))
    if controller_id == NO_CONTROLLER and any(isinstance(r, NoNodeError) for r in results):
        log.warning("election multi failed with %r", results)
    return ElectionOutcome(controller_id, None)


def _answered_in(zk: ZkClient, session: int, request: Callable[[], T]) -> T:
    """``request()``, made again once connected each time its answer is lost
    (ConnectionLoss, or none within the request timeout) while the session of generation
    ``session`` lives, as Kafka's registerControllerAndIncrementControllerEpoch retries
    its requests until connected: thrown away, an election that landed took its
    /controller with it (removed as a stale one of our own) and a further epoch. For the
    election's requests only: the multi (a resend of one that landed fails, changing
    nothing) and reads. SessionExpiredError once the session ended (its ephemerals went
    with it). The connection is waited for at most a session timeout from the first
    lost answer, then the error is raised: disconnected that long, the controller takes
    its session for ended (item 2 of docs/architecture.md)."""
    deadline: float | None = None
    while True:
        try:
            return request()
        except (ConnectionLoss, OperationTimeoutError) as e:
            if zk.session_generation != session:
                raise SessionExpiredError("the session of the election has ended") from e
            if deadline is None:
                deadline = time.monotonic() + zk.session_timeout_ms / 1000
            log.info("election: ZooKeeper's answer was lost (%s); asking again", type(e).__name__)
            time.sleep(0.05)  # not to spin on a failure that outlives the connection's return
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not zk.wait_connected(remaining):
                raise


def _read_epoch_to_increment(zk: ZkClient) -> FencingToken:
    """`/controller_epoch` as `_read_epoch_watched_if_bad` reads it, and MalformedZnode for
    an epoch that cannot be incremented: epochs are int32 on the wire, so the next one
    could be neither written nor sent (Kafka 2.8's Int wraps to a negative epoch every
    broker refuses as stale)."""

    def incrementable(token: FencingToken) -> FencingToken:
        if token.epoch >= INT32_MAX:
            raise MalformedZnode(
                paths.CONTROLLER_EPOCH, f"epoch {token.epoch} cannot be incremented"
            )
        return token

    return _read_epoch_watched_if_bad(zk, incrementable)


def _read_epoch_watched_if_bad(
    zk: ZkClient, check: Callable[[FencingToken], FencingToken] = lambda token: token
) -> FencingToken:
    """`/controller_epoch`, ``check``ed; one found malformed (MalformedZnode) is read again
    with a watch, whose change retries the election (`zk_handlers.
    controller_epoch_change`), and MalformedZnode is raised if that read finds it so too.
    The watch is armed by the read that holds the election: a repair after it fires the
    watch, one before it is read (and elects). Armed afterwards (an exists), a repair
    landing in between was neither, and no broker was ever elected. Unwatched at first,
    as a watch on every election's read would retry each broker's election at every
    epoch change."""
    try:
        return check(read_controller_epoch(zk))
    except MalformedZnode:
        return check(read_controller_epoch(zk, watch=True))


def _unelectable(error: MalformedZnode) -> ElectionOutcome:
    """No election: the problem, logged (the watch is left by the read that found it)."""
    problem = (
        f"cannot elect a controller: {error}. No broker can be elected until it holds a"
        " valid epoch: write the last controller epoch the brokers have seen (or a larger"
        f" integer below {INT32_MAX}) into {paths.CONTROLLER_EPOCH}; the election is"
        " retried when it changes"
    )
    log.error("%s", problem)
    return ElectionOutcome(NO_CONTROLLER, None, problem)


def delete_own_controller_znode(zk: ZkClient, broker_id: int) -> bool:
    """Remove `/controller` if it is this session's (a resigned controller whose session
    survived an outage must not leave the cluster with a controller nobody is acting as:
    KAFKA-13407). Nobody else's is ever removed.

    The session that owns the ephemeral is what makes it ours, whatever its data says: one
    whose data someone made unreadable, or rewrote to name another broker, is ours too, and
    left standing it would block every election.

    The server that answers the reads may lag behind the ensemble's leader (one just back
    from a pause): it can still show our old `/controller` after an admin deleted it and
    another broker won the next term, whose `/controller` has the same version (0). So the
    delete is also conditional on `/controller_epoch`'s version, read first: it removes
    the `/controller` of the term read, or nothing. And it is made in the session whose
    ownership was seen, or not at all (SessionExpiredError).
    """
    session = zk.session_generation
    epoch = zk.get(paths.CONTROLLER_EPOCH)
    got = zk.get(paths.CONTROLLER)
    if got is None:
        return False
    _data, stat = got
    if int(stat.ephemeralOwner) != zk.session_id:
        return False
    epoch_zk_version = None if epoch is None else epoch[1].version
    return delete_controller_of_term(zk, epoch_zk_version, stat.version, session=session)


def delete_controller_of_term(
    zk: ZkClient,
    epoch_zk_version: int | None,
    controller_version: int,
    *,
    session: int | None = None,
) -> bool:
    """Delete `/controller` (at that version) only while `/controller_epoch` still has the
    version read with it (None: there was none to check): no election happened since.
    ``session``: only in that session generation. Whether it was deleted."""
    ops: list[WriteOp] = [Delete(paths.CONTROLLER, controller_version)]
    if epoch_zk_version is not None:
        ops.insert(0, Check(paths.CONTROLLER_EPOCH, epoch_zk_version))
    return not any(is_error(r) for r in zk.multi(ops, session=session))
