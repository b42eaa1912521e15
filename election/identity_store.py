"""ZooKeeper as the broker identity store: the thin I/O around election/broker_identity.py.

``/brokers/identities/<id>`` (persistent) holds each allocated id's claim; creating it is
the compare-and-set of ApplyBrokerId (ZooKeeper's replicated log orders competing claims:
exactly one create of a path succeeds). GetNextBrokerId reads every id the cluster knows:
one multiRead of the children of ``/brokers/identities``, ``/brokers/ids`` and
``/brokers/topics``, then the topics' assignments in pipelined multiReads (none when there
is no topic). Kafka's generated ids bump ``/brokers/seqid``'s version with an
unconditional setData.

``requests`` counts the ZooKeeper requests made (each one round trip), for the accounts in
docs/broker-identity.md; the session's own handshake is not counted.

A request that fails for want of a connection is sent again once connected, as Kafka's
client retries until connected: a ZooKeeper blip while a broker starts is waited out, not
a failed start. Each request is safe to repeat, including one that was carried out and
whose answer was lost: a claim's create then meets our own claim (NodeExists, and the
check code tells it is ours; ``create_claim`` tells NodeExists met only by the create sent
again, as a claim the lost send made is), a repeated delete of our own claim finds it
gone, and a repeated seqid bump skips an id, as Kafka's does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import TYPE_CHECKING, TypeVar

from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from zkdata import paths
from zkdata.client import CancelledWhileDisconnected, NodeExistsError, ZkClient
from zkdata.znodes import (
    IdentityClaim,
    MalformedZnode,
    decode_cluster_id,
    decode_identity_claim,
    decode_topic,
    encode_cluster_id,
    encode_identity_claim,
    new_topic_id,
    topic_id_to_str,
)

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from election.broker_identity import IdentityFiles, IdentityOutcome, KnownIds

T = TypeVar("T")


class ZkIdentityStore:
    def __init__(self, zk: ZkClient, cancelled: threading.Event | None = None) -> None:
        self.zk = zk
        #: set when the broker is asked to stop: a wait for the connection gives up
        #: (CancelledWhileDisconnected)
        self.cancelled = cancelled
        self.requests = 0

    def _request(self, fn: Callable[[], T]) -> T:
        """One request, sent again once connected if the connection was lost."""

        def attempt() -> T:
            self.requests += 1
            return fn()

        return self.zk.until_connected(attempt, cancelled=self.cancelled)

    def _create(self, path: str, data: bytes = b"", *, make_parents: bool = False) -> bool | None:
        """True: this call created the znode. False: it existed when the create arrived
        (made by another, or by our own earlier attempt). None: it exists, met only by the
        create sent again after an answer was lost: the lost send may have made it."""
        sends = 0

        def create() -> None:
            nonlocal sends
            sends += 1
            self.zk.create(path, data, make_parents=make_parents)

        try:
            self._request(create)
        except NodeExistsError:
            return None if sends > 1 else False
        return True

    def known_ids(self) -> KnownIds:
        """The claimed, registered and assigned ids. A child that is not a broker id, or a
        topic znode that cannot be decoded, is skipped with a warning: what it would name
        is unknowable, and one bad znode must not stop every new broker from starting."""
        from election.broker_identity import KnownIds

        parents = [paths.BROKER_IDENTITIES, paths.BROKER_IDS, paths.BROKER_TOPICS]
        identities, ids, topics = self._request(lambda: self.zk.get_children_many(parents))
        names = sorted(topics or [])
        assigned: set[int] = set()
        if names:
            got = self._request(lambda: self.zk.get_many([paths.topic(n) for n in names]))
            for name, node in zip(names, got, strict=True):
                if node is None:  # deleted since the children were read
                    continue
                try:
                    assignment = decode_topic(name, node[0])
                except MalformedZnode as e:
                    log.warning("GetNextBrokerId: topic %s's replicas are not counted: %s", name, e)
                    continue
                for replica_map in (
                    assignment.partitions,
                    assignment.adding_replicas,
                    assignment.removing_replicas,
                ):
                    for replicas in set(replica_map.values()):
                        assigned.update(replicas)
        return KnownIds(
            _broker_ids(paths.BROKER_IDENTITIES, identities),
            _broker_ids(paths.BROKER_IDS, ids),
            frozenset(assigned),
        )

    def is_registered(self, broker_id: int) -> bool:
        return self._request(lambda: self.zk.exists(paths.broker(broker_id))) is not None

    def get_claim(self, broker_id: int) -> IdentityClaim | None:
        got = self._request(lambda: self.zk.get(paths.broker_identity(broker_id)))
        return None if got is None else decode_identity_claim(broker_id, got[0])

    def delete_claim(self, broker_id: int) -> None:
        self._request(lambda: self.zk.delete(paths.broker_identity(broker_id)))

    def create_claim(self, claim: IdentityClaim) -> bool | None:
        """The compare-and-set. False: the id was claimed before; None: claimed, met by the
        create sent again after its answer was lost to a blip, so perhaps by this very
        claim. Either way the caller reads the claim and compares check codes."""
        path = paths.broker_identity(claim.broker_id)
        data = encode_identity_claim(claim)
        try:
            return self._create(path, data)
        except NoNodeError:  # the first claim of the cluster: create the parent first
            self._create(paths.BROKER_IDENTITIES, make_parents=True)
            return self._create(path, data)

    def set_claim(self, claim: IdentityClaim) -> None:
        data = encode_identity_claim(claim)
        self._request(lambda: self.zk.set(paths.broker_identity(claim.broker_id), data))

    def generate_seq_id(self) -> int:
        """Kafka's KafkaZkClient.generateBrokerSequenceId."""

        def bump() -> int:
            return int(self.zk.set(paths.BROKER_SEQID, b"", -1).version)

        try:
            return self._request(bump)
        except NoNodeError:
            self._create(paths.BROKER_SEQID, make_parents=True)
            return self._request(bump)

    def cluster_id(self) -> str:
        """Kafka's KafkaServer.getOrGenerateClusterId: /cluster/id, or a new id created
        there; a create that meets one (made meanwhile, or by our own lost send) reads it."""
        from election.broker_identity import IdentityError

        got = self._request(lambda: self.zk.get(paths.CLUSTER_ID))
        if got is None:
            proposed = topic_id_to_str(new_topic_id())
            if self._create(paths.CLUSTER_ID, encode_cluster_id(proposed), make_parents=True):
                return proposed
            got = self._request(lambda: self.zk.get(paths.CLUSTER_ID))
            if got is None:  # Kafka's createOrGetClusterId
                raise IdentityError(
                    f"failed to get the cluster id from ZooKeeper: {paths.CLUSTER_ID} was"
                    " deleted while it was being created"
                )
        return decode_cluster_id(got[0])


def _broker_ids(parent: str, children: list[str] | None) -> frozenset[int]:
    ids = set()
    for child in children or ():
        broker_id = paths.parse_broker_id(child)
        if broker_id is None:
            log.warning("GetNextBrokerId: ignoring %s/%s: not a broker id", parent, child)
        else:
            ids.add(broker_id)
    return frozenset(ids)


@contextmanager
def zk_identity_store(
    connect: str,
    *,
    session_timeout_ms: int,
    connection_timeout_ms: int,
    cancelled: threading.Event | None = None,
) -> Iterator[ZkIdentityStore]:
    """A short ZooKeeper session for establishing the identity (the chroot must exist)."""
    from election.broker_identity import IdentityError

    zk = ZkClient(
        connect,
        session_timeout_ms=session_timeout_ms,
        connection_timeout_ms=connection_timeout_ms,
    )
    try:
        zk.start(cancelled=cancelled)
    except CancelledWhileDisconnected:
        raise
    except Exception as e:
        raise IdentityError(
            f"cannot connect to ZooKeeper at {connect} to establish the broker id"
            f" ({type(e).__name__}: {e})"
        ) from None
    try:
        yield ZkIdentityStore(zk, cancelled)
    finally:
        zk.close()


def establish_identity(
    config: BrokerConfig,
    address: str,
    *,
    prepare: Callable[[], None] | None = None,
    cancelled: threading.Event | None = None,
) -> IdentityOutcome:
    """Who this broker is, by ``broker.identity.mode``. Opens a ZooKeeper session only
    when one is needed (a generated or a persistent id, or a cluster id named by a log
    directory's meta.properties to check first); ``prepare`` runs before it (the broker
    creates its chroot there). Raises IdentityError with a clear message, or
    CancelledWhileDisconnected when ``cancelled`` is set while ZooKeeper is out of reach."""
    from election.broker_identity import IdentityError

    started = time.monotonic()
    sessions = 0

    def finished(outcome: IdentityOutcome) -> IdentityOutcome:
        outcome.zk_sessions = sessions
        outcome.total_ms = (time.monotonic() - started) * 1000
        return outcome

    def session() -> AbstractContextManager[ZkIdentityStore]:
        nonlocal sessions
        sessions += 1
        log.info(
            "connecting to ZooKeeper at %s to establish the broker id (mode %s)",
            config.zookeeper_connect,
            config.broker_identity_mode,
        )
        if prepare is not None:
            prepare()
        return zk_identity_store(
            config.zookeeper_connect,
            session_timeout_ms=config.zookeeper_session_timeout_ms,
            connection_timeout_ms=config.zookeeper_connection_timeout_ms,
            cancelled=cancelled,
        )

    try:
        return _establish(config, address, session, finished)
    except (KazooException, KazooTimeoutError) as e:
        raise IdentityError(
            f"ZooKeeper failed while establishing the broker id: {type(e).__name__} {e}"
        ) from None


def identity_files(log_dirs: Sequence[str]) -> IdentityFiles:
    """Where the persistent identity files are: the first log directory, where they are
    written, unless it holds neither and another log directory does (log.dirs reordered,
    or a directory added before it: the identity is still this broker's, as Kafka's
    meta.properties is found in any directory). Identity files in more than one of the
    others cannot be told apart: IdentityError. A directory that cannot be looked into
    holds none here (start-up takes it offline)."""
    from election.broker_identity import IdentityError, IdentityFiles

    def holds(files: IdentityFiles) -> bool:
        try:
            return files.final_path.exists() or files.temp_path.exists()
        except OSError:
            return False

    first = IdentityFiles(log_dirs[0])
    if holds(first):
        return first
    others = [files for files in map(IdentityFiles, log_dirs[1:]) if holds(files)]
    if len(others) > 1:
        raise IdentityError(
            f"identity files in more than one log directory"
            f" ({', '.join(str(f.directory) for f in others)}) and none in the first"
            f" ({first.directory}): keep only this broker's"
        )
    return others[0] if others else first


def _establish(
    config: BrokerConfig,
    address: str,
    session: Callable[[], AbstractContextManager[ZkIdentityStore]],
    finished: Callable[[IdentityOutcome], IdentityOutcome],
) -> IdentityOutcome:
    from election.broker_identity import (
        IdentityError,
        check_cluster_id_before_the_id,
        obtain_kafka_id,
        obtain_persistent_id,
        read_meta_properties,
    )

    if config.broker_identity_mode != "persistent":
        with ExitStack() as stack:
            kafka_outcome = obtain_kafka_id(
                config.broker_id,
                list(config.log_dirs),
                generation_enabled=config.broker_id_generation_enable,
                reserved_max_id=config.reserved_broker_max_id,
                store_factory=lambda: stack.enter_context(session()),
            )
        return finished(kafka_outcome)
    assert config.broker_name is not None  # the config requires it in this mode
    files = identity_files(config.log_dirs)
    # A directory whose meta.properties cannot be read has no say (start-up takes it
    # offline, KIP-112), as in Kafka's mode; nor one whose file holds no broker.id (no
    # Kafka-mode broker's: it is written over once registered).
    metas = read_meta_properties(list(config.log_dirs), {})
    stored = {d: m.broker_id for d, m in metas.items() if m and m.broker_id is not None}
    with session() as store:
        # The cluster id first, as Kafka 2.8 checks it before the broker id: a directory of
        # another cluster is refused as such, not as a Kafka-mode broker's.
        check_cluster_id_before_the_id(store, metas)
        if stored and files.read_final() is None and files.read_temp() is None:
            raise IdentityError(
                f"log directories {', '.join(sorted(stored))} belong to broker id"
                f" {sorted(set(stored.values()))} (meta.properties) but hold no persistent"
                f" identity ({files.final_path}): they were used in"
                " broker.identity.mode=kafka; use that mode, or empty them"
            )
        outcome = obtain_persistent_id(
            store,
            files,
            cluster_name=config.cluster_name,
            broker_name=config.broker_name,
            address=address,
            reserved_max=config.reserved_broker_max_id,
        )
    wrong = {d: i for d, i in stored.items() if i != outcome.broker_id}
    if wrong:
        raise IdentityError(
            f"{outcome.identity} ({files.final_path}) disagrees with meta.properties in"
            f" {', '.join(f'{d} (broker.id {i})' for d, i in sorted(wrong.items()))}"
        )
    return finished(outcome)
