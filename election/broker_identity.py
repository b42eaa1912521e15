"""Broker identity: which broker id a starting broker is, and how it knows.

Two modes (``broker.identity.mode``; docs/broker-identity.md compares them):

* ``kafka`` (Kafka's): ``broker.id`` from the configuration, or, when it is -1, an id
  generated from ``/brokers/seqid`` (a ``setData`` bumps the znode's version; the id is
  that version plus ``reserved.broker.max.id``). Either way the id is kept in
  ``meta.properties`` in every log directory, with the cluster id, and at start every
  directory must agree with the others and with the configuration.
* ``persistent`` (the RocketMQ 5 controller's scheme): with no ``broker.id``, the id is
  allocated once through a two-phase protocol and kept in the ``broker-identity`` file of
  the first log directory: read the next id (one above every id the cluster knows:
  claimed, registered, or named by a topic's replicas); write a temp file with the id and
  a random check code; apply the id with a compare-and-set in ZooKeeper
  (``/brokers/identities/<id>`` is created holding cluster name, broker name, address and
  code; an existing claim with the same code counts as ours); write the final file and
  remove the temp file. The identity is ``cluster.name:broker.name:id`` from then on.

The decisions are pure functions (``decide_kafka_id``, ``next_step``, ``next_free_id``,
``decide_claim``) over what was read from disk and ZooKeeper; ``establish_identity`` is
the thin shell that reads, asks them, writes, and talks to ZooKeeper through an
``IdentityStore``.

Every crash point of the protocol can be reached on purpose: with
``ZKCTL_IDENTITY_CRASH_AT=<point>`` in its environment the broker exits with status 86 at
that point (``after_generate``: a Kafka-mode id generated but not yet in meta.properties;
``after_temp``: temp file written, nothing applied; ``after_apply``: the claim accepted,
no final file; ``after_final``: the final file written, the temp file not yet removed).
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import re
import secrets
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Protocol

from broker.config import ConfigError, format_properties, parse_properties
from storage.checkpoints import fsync_dir, write_atomically
from zkdata.int_text import INT32_MAX, INT32_MIN, java_int_in_range
from zkdata.znodes import IdentityClaim, MalformedZnode

log = logging.getLogger(__name__)

META_PROPERTIES = "meta.properties"
IDENTITY_FILE = "broker-identity"
IDENTITY_TEMP_FILE = "broker-identity-temp"

CRASH_ENV = "ZKCTL_IDENTITY_CRASH_AT"
CRASH_POINTS = ("after_generate", "after_temp", "after_apply", "after_final")
CRASH_EXIT_CODE = 86

MAX_ALLOCATION_ATTEMPTS = 200


class IdentityError(ValueError):
    """The broker cannot establish who it is; the message says why. Stops the broker."""


# --------------------------------------------------------------------------- meta.properties


@dataclass(frozen=True)
class MetaProperties:
    """Kafka's ``meta.properties`` (version 0): the broker id and the cluster id. Either
    may be missing: a file without broker.id holds no id (Kafka 2.8's RawMetaProperties),
    and the configured or a generated one is used and written there once registered."""

    broker_id: int | None
    cluster_id: str | None = None
    # The file's other properties (version among them), sorted: Kafka compares the log
    # directories' whole files. Not part of equality, which is the identity alone. The
    # default is what format_meta_properties writes.
    others: tuple[tuple[str, str], ...] = field(default=(("version", "0"),), compare=False)


def parse_meta_properties(text: str, where: str) -> MetaProperties:
    try:
        props = parse_properties(text)
    except ConfigError as e:
        raise IdentityError(f"{where} is not a properties file: {e}") from None
    raw_version = props.get("version")
    version = 0 if raw_version is None else _java_int(raw_version)
    if version is None:  # Kafka's intValue: "Failed to parse version property as an int"
        raise IdentityError(f"{where} has no valid version (found {raw_version!r})")
    if version != 0:
        raise IdentityError(f"{where} has version {raw_version!r}; only version 0 is known")
    # An empty cluster.id is still a cluster id, no cluster's (Kafka's
    # RawMetaProperties.clusterId is Some(""), which the cluster id check refuses).
    cluster_id = props.get("cluster.id")
    others = tuple(sorted((k, v) for k, v in props.items() if k not in _IDENTITY_KEYS))
    raw = props.get("broker.id")
    if raw is None:
        return MetaProperties(None, cluster_id, others)
    broker_id = _java_int(raw)
    if broker_id is None:  # Kafka's intValue: "Failed to parse broker.id property as an int"
        raise IdentityError(f"{where} has no valid broker.id (found {raw!r})")
    return MetaProperties(broker_id, cluster_id, others)


_IDENTITY_KEYS = frozenset(("broker.id", "cluster.id"))
_ASCII_DIGITS = re.compile(r"[0-9]+")


def _java_int(text: str) -> int | None:
    """``text`` as a Java int (Integer.parseInt, which Kafka reads meta.properties' ints
    with: zkdata/int_text.py), or None."""
    return java_int_in_range(text, INT32_MIN, INT32_MAX)


def format_meta_properties(meta: MetaProperties) -> str:
    props = {"version": "0", "broker.id": str(meta.broker_id)}
    if meta.cluster_id is not None:
        props["cluster.id"] = meta.cluster_id
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
    return f"#\n#{stamp}\n" + format_properties(props)


@dataclass(frozen=True)
class UseId:
    broker_id: int
    source: str  # "config", "meta.properties"


@dataclass(frozen=True)
class GenerateId:
    pass


def _describe_meta(meta: MetaProperties) -> str:
    broker_id = "none" if meta.broker_id is None else meta.broker_id
    cluster_id = "none" if meta.cluster_id is None else repr(meta.cluster_id)
    others = "".join(f", {key} {value!r}" for key, value in meta.others)
    return f"broker.id {broker_id}, cluster.id {cluster_id}{others}"


def check_meta_properties_alike(metas: Mapping[str, MetaProperties | None]) -> None:
    """The log directories' files must be alike, every property compared (cluster.id,
    version, any other), with or without a broker.id (Kafka 2.8's
    getBrokerMetadataAndOfflineDirs compares their Properties:
    InconsistentBrokerMetadataException)."""
    found = {d: m for d, m in metas.items() if m is not None}
    if len({(m, m.others) for m in found.values()}) > 1:
        where = "; ".join(f"{d}: {_describe_meta(m)}" for d, m in sorted(found.items()))
        raise IdentityError(
            f"the log directories' {META_PROPERTIES} files disagree ({where}); each log"
            " directory must belong to the same broker of the same cluster"
        )


def decide_kafka_id(
    configured: int, metas: Mapping[str, MetaProperties | None], *, generation_enabled: bool
) -> UseId | GenerateId:
    """Kafka's KafkaServer.getOrGenerateBrokerId: the log directories must agree with each
    other and with a configured id; a stored id wins; else the configured one; else one is
    generated. A file without broker.id stores none. The files must be alike
    (``check_meta_properties_alike``); their cluster id is checked before this is asked
    (``check_cluster_id_before_the_id``)."""
    check_meta_properties_alike(metas)
    stored = {d: m.broker_id for d, m in metas.items() if m is not None}
    stored_id = next(iter(stored.values()), None)
    if stored_id is not None:
        if configured >= 0 and configured != stored_id:
            raise IdentityError(
                f"configured broker.id {configured} does not match broker.id {stored_id}"
                f" stored in {META_PROPERTIES} ({', '.join(sorted(stored))}); if you moved"
                " the log directories between brokers, change broker.id to match"
            )
        return UseId(stored_id, META_PROPERTIES)
    if configured >= 0:
        return UseId(configured, "config")
    if generation_enabled:
        return GenerateId()
    raise IdentityError("broker.id is not set and broker.id.generation.enable is false")


def check_cluster_id(metas: Mapping[str, MetaProperties | None], cluster_id: str) -> None:
    """Raises IdentityError if a log directory belongs to another cluster (Kafka's
    InconsistentClusterIdException); a file without cluster.id belongs to none yet."""
    for d, meta in sorted(metas.items()):
        if meta is not None and meta.cluster_id is not None and meta.cluster_id != cluster_id:
            raise IdentityError(
                f"the cluster id {meta.cluster_id!r} in {Path(d) / META_PROPERTIES} does not"
                f" match the cluster id {cluster_id!r} in ZooKeeper: this log directory"
                " belongs to another cluster (or zookeeper.connect points at the wrong one)"
            )


def meta_to_write(
    metas: Mapping[str, MetaProperties | None], broker_id: int, cluster_id: str
) -> list[str]:
    """The log directories whose meta.properties must be (re)written; raises IdentityError
    if one belongs to another cluster (``check_cluster_id``)."""
    check_cluster_id(metas, cluster_id)
    # Rewritten when any property differs, as Kafka rewrites every file once registered:
    # a file left with another property (version=00, a key of its own) would disagree
    # with the directories written beside it at the next start.
    written = MetaProperties(broker_id, cluster_id)
    return [
        d
        for d, meta in sorted(metas.items())
        if meta is None or (meta, meta.others) != (written, written.others)
    ]


def _read_properties(path: Path) -> str:
    """A properties file's text as Properties.load(InputStream) reads it, which Kafka 2.8
    reads meta.properties with: ISO-8859-1, one character per byte, so no file fails to
    decode (``format_properties`` writes other characters as \\uXXXX escapes). OSError
    if it cannot be read."""
    return path.read_bytes().decode("latin-1")


def read_meta_properties(
    log_dirs: Sequence[str], unreadable: dict[str, OSError] | None = None
) -> dict[str, MetaProperties | None]:
    """Each log directory's meta.properties (None: it has none). One that cannot be read
    raises IdentityError, or, given ``unreadable``, is left out and put there with its
    error: Kafka's start-up takes such a directory offline (KIP-112) and goes on."""
    result: dict[str, MetaProperties | None] = {}
    for d in log_dirs:
        path = Path(d) / META_PROPERTIES
        try:
            text = _read_properties(path)
        except FileNotFoundError:
            result[d] = None
            continue
        except OSError as e:
            if unreadable is None:
                raise IdentityError(f"cannot read {path}: {e}") from None
            log.error("cannot read %s: %s; its log directory will be offline", path, e)
            unreadable[d] = e
            continue
        result[d] = parse_meta_properties(text, str(path))
    return result


def checkpoint_meta_properties(log_dirs: Sequence[str], broker_id: int, cluster_id: str) -> int:
    """Write meta.properties (atomically) where it is missing or outdated; return how many
    were written. Raises IdentityError for a directory of another cluster, and OSError
    for one whose meta.properties cannot be read or written."""
    unreadable: dict[str, OSError] = {}
    metas = read_meta_properties(log_dirs, unreadable)
    if unreadable:
        raise next(iter(unreadable.values()))
    todo = meta_to_write(metas, broker_id, cluster_id)
    for d in todo:
        write_meta_properties(d, broker_id, cluster_id)
    return len(todo)


def write_meta_properties(log_dir: str, broker_id: int, cluster_id: str) -> None:
    """Write one log directory's meta.properties (atomically); OSError if it fails."""
    Path(log_dir).mkdir(parents=True, exist_ok=True)
    text = format_meta_properties(MetaProperties(broker_id, cluster_id))
    write_atomically(Path(log_dir) / META_PROPERTIES, text)


# --------------------------------------------------------------------------- identity files


@dataclass(frozen=True)
class IdentityRecord:
    """The content of a persistent identity file (final or temp)."""

    cluster_name: str
    broker_name: str
    broker_id: int
    check_code: str

    @property
    def identity(self) -> str:
        return f"{self.cluster_name}:{self.broker_name}:{self.broker_id}"


def format_identity(record: IdentityRecord) -> str:
    return format_properties(
        {
            "cluster.name": record.cluster_name,
            "broker.name": record.broker_name,
            "broker.id": str(record.broker_id),
            "check.code": record.check_code,
        }
    )


def parse_identity(text: str, where: str) -> IdentityRecord:
    try:
        props = parse_properties(text)
    except ConfigError as e:
        raise IdentityError(f"{where} is not a properties file: {e}") from None
    missing = [
        k for k in ("cluster.name", "broker.name", "broker.id", "check.code") if not props.get(k)
    ]
    if missing:
        raise IdentityError(f"{where} is incomplete: no {', '.join(missing)}")
    raw = props["broker.id"]
    # This project's own file, always written with ASCII digits: nothing else is read.
    broker_id = _java_int(raw) if _ASCII_DIGITS.fullmatch(raw) else None
    if broker_id is None or broker_id < 1:
        raise IdentityError(f"{where} has an invalid broker.id {raw!r}")
    return IdentityRecord(
        props["cluster.name"], props["broker.name"], broker_id, props["check.code"]
    )


@dataclass(frozen=True)
class UseFinal:
    """A final identity file exists: use it (and remove a temp file left behind)."""

    record: IdentityRecord
    remove_temp: bool


@dataclass(frozen=True)
class Reapply:
    """Only a temp file: the claim may or may not have been applied; apply it again."""

    record: IdentityRecord


@dataclass(frozen=True)
class Allocate:
    """No identity yet: start at the first phase."""


Step = UseFinal | Reapply | Allocate


def _check_names(record: IdentityRecord, where: str, cluster_name: str, broker_name: str) -> None:
    wrong = []
    if record.cluster_name != cluster_name:
        wrong.append(f"cluster name {record.cluster_name!r} (configured: {cluster_name!r})")
    if record.broker_name != broker_name:
        wrong.append(f"broker name {record.broker_name!r} (configured: {broker_name!r})")
    if wrong:
        raise IdentityError(
            f"the identity file {where} belongs to another broker: it holds "
            f"{' and '.join(wrong)}; fix cluster.name/broker.name, or point log.dirs at this"
            " broker's own directory"
        )


def next_step(
    final: IdentityRecord | None,
    temp: IdentityRecord | None,
    *,
    cluster_name: str,
    broker_name: str,
    final_where: str = IDENTITY_FILE,
    temp_where: str = IDENTITY_TEMP_FILE,
) -> Step:
    """What a starting broker does with the identity files it found (RocketMQ's recovery
    table). Names that differ from the configuration are an error, never ignored."""
    if final is not None:
        _check_names(final, final_where, cluster_name, broker_name)
        return UseFinal(final, remove_temp=temp is not None)
    if temp is not None:
        _check_names(temp, temp_where, cluster_name, broker_name)
        return Reapply(temp)
    return Allocate()


class ClaimDecision(enum.Enum):
    FREE = "free"  # nobody holds the id: the claim creates it
    OURS = "ours"  # the id already holds our check code: a repeated apply, accepted
    TAKEN = "taken"  # another broker's code: rejected


def decide_claim(existing: IdentityClaim | MalformedZnode | None, check_code: str) -> ClaimDecision:
    """A claim that cannot be read (MalformedZnode) holds no check code of ours: TAKEN,
    as one of another code (this broker writes only claims that can be read)."""
    if existing is None:
        return ClaimDecision.FREE
    if isinstance(existing, MalformedZnode):
        return ClaimDecision.TAKEN
    return ClaimDecision.OURS if existing.check_code == check_code else ClaimDecision.TAKEN


def read_claim(store: IdentityStore, broker_id: int) -> IdentityClaim | MalformedZnode | None:
    """The claim of ``broker_id`` as ApplyBrokerId compares it: one that cannot be read is
    reported with its path and returned as such (``decide_claim``: another's), not a
    stopped broker."""
    try:
        return store.get_claim(broker_id)
    except MalformedZnode as e:
        log.warning("%s; taken for another broker's claim", e)
        return e


@dataclass(frozen=True)
class KnownIds:
    """The broker ids a cluster knows, as GetNextBrokerId reads them."""

    claimed: frozenset[int]  # persistent claims, /brokers/identities/<id>
    registered: frozenset[int]  # live brokers of any mode, /brokers/ids/<id>
    assigned: frozenset[int]  # replicas named by topic assignments, /brokers/topics/<t>


DEFAULT_RESERVED_BROKER_MAX_ID = 1000


def next_free_id(
    claimed: Iterable[int],
    registered: Iterable[int],
    assigned: Iterable[int],
    *,
    reserved_max: int = DEFAULT_RESERVED_BROKER_MAX_ID,
) -> int | GenerateId:
    """GetNextBrokerId: one above the highest id the cluster knows; ids start at 1.

    Not only the claims: a static or generated broker's id (registered, or named by the
    replicas it holds while it is down) is as taken, and a persistent broker given it
    would either never register (BrokerIdInUse) or take over its replicas with an empty
    disk. Kafka keeps configured ids (at most ``reserved_max``) and generated ones (above
    it, from /brokers/seqid) apart by range; persistent ids stay in the configured range,
    counting only the ids there (a generated 1001 does not push them into the generated
    range, where a later generated id would meet them). Once that range is used up to its
    top: GenerateId, an id from /brokers/seqid as Kafka generates them, so that the
    counter keeps persistent and generated ids apart there too."""
    highest = max(i for i in chain(claimed, registered, assigned, (0,)) if i <= reserved_max)
    return highest + 1 if highest < reserved_max else GenerateId()


def new_check_code(address: str) -> str:
    """RocketMQ's ``address;currentTimeMillis``, plus random bits so that two brokers
    starting in the same millisecond on the same address still differ."""
    return f"{address};{time.time_ns() // 1_000_000};{secrets.token_hex(8)}"


# --------------------------------------------------------------------------- the shell


class IdentityStore(Protocol):
    """ZooKeeper as the identity store (election/identity_store.py), or a fake in tests."""

    requests: int

    def known_ids(self) -> KnownIds:
        """Claimed, registered and assigned ids (malformed entries skipped, logged)."""

    def is_registered(self, broker_id: int) -> bool:
        """Whether a broker is registered under ``broker_id`` (/brokers/ids/<id>)."""

    def get_claim(self, broker_id: int) -> IdentityClaim | None: ...

    def delete_claim(self, broker_id: int) -> None:
        """Remove the claim of ``broker_id`` (gone already: nothing to do)."""

    def create_claim(self, claim: IdentityClaim) -> bool | None:
        """Create the claim; False if the id is already claimed (by anyone); None if it
        is claimed as found by the create sent again after its answer was lost (by anyone,
        or by the lost send)."""

    def set_claim(self, claim: IdentityClaim) -> None: ...

    def generate_seq_id(self) -> int:
        """Bump /brokers/seqid; return its new version."""

    def cluster_id(self) -> str:
        """/cluster/id, created with a new id if missing (Kafka's getOrGenerateClusterId)."""


CrashHook = Callable[[str], None]


def crash_from_environment(point: str) -> None:
    """Exit the process at `point` when ZKCTL_IDENTITY_CRASH_AT names it (tests only)."""
    if os.environ.get(CRASH_ENV) == point:
        message = f"broker identity: crash point {point} reached ({CRASH_ENV}); exiting"
        log.warning("%s", message)
        print(message, file=sys.stderr, flush=True)
        os._exit(CRASH_EXIT_CODE)


@dataclass
class IdentityOutcome:
    """How the broker got its id, for the status file and the measurements."""

    mode: str
    broker_id: int
    source: str  # config, meta.properties, generated, identity-file, temp-file, allocated
    identity: str
    zk_requests: int = 0
    attempts: int = 0
    rejected: list[int] = field(default_factory=list)
    ms: float = 0.0
    #: ZooKeeper sessions opened for it (0 or 1), and the time including that session
    zk_sessions: int = 0
    total_ms: float = 0.0
    #: persistent mode: the claim as this broker records it (its address), written by
    #: ``record_claim_address`` once the broker is registered
    claim: IdentityClaim | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "mode": self.mode,
            "broker_id": self.broker_id,
            "identity": self.identity,
            "source": self.source,
            "zk_requests": self.zk_requests,
            "attempts": self.attempts,
            "rejected": list(self.rejected),
            "ms": round(self.ms, 2),
            "zk_sessions": self.zk_sessions,
            "total_ms": round(self.total_ms, 2),
        }


class IdentityFiles:
    """The final and temp identity files in one directory; every write is atomic (temp
    name, fsync, rename, fsync of the directory)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.final_path = self.directory / IDENTITY_FILE
        self.temp_path = self.directory / IDENTITY_TEMP_FILE

    def _read(self, path: Path) -> IdentityRecord | None:
        try:
            text = _read_properties(path)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise IdentityError(f"cannot read {path}: {e}") from None
        return parse_identity(text, str(path))

    def read_final(self) -> IdentityRecord | None:
        return self._read(self.final_path)

    def read_temp(self) -> IdentityRecord | None:
        try:
            return self._read(self.temp_path)
        except IdentityError as e:
            # A temp file is only a promise to retry; an unreadable one is dropped (the id
            # it named, if its claim went through, stays claimed and unused).
            log.warning("%s; removing it", e)
            self.remove_temp()
            return None

    def write_temp(self, record: IdentityRecord) -> None:
        self._write(self.temp_path, record)

    def write_final(self, record: IdentityRecord) -> None:
        self._write(self.final_path, record)

    def _write(self, path: Path, record: IdentityRecord) -> None:
        # A failed write (a full or read-only disk) stops the broker with the file named,
        # not a traceback; what was written before stays to be picked up at the restart.
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            write_atomically(path, format_identity(record))
        except OSError as e:
            raise IdentityError(f"cannot write {path}: {e}") from None

    def remove_temp(self) -> None:
        try:
            with contextlib.suppress(FileNotFoundError):
                self.temp_path.unlink()
                fsync_dir(self.directory)
        except OSError as e:
            raise IdentityError(f"cannot remove {self.temp_path}: {e}") from None


def obtain_persistent_id(
    store: IdentityStore,
    files: IdentityFiles,
    *,
    cluster_name: str,
    broker_name: str,
    address: str,
    reserved_max: int = DEFAULT_RESERVED_BROKER_MAX_ID,
    crash: CrashHook = crash_from_environment,
) -> IdentityOutcome:
    """The two-phase protocol with recovery from whatever a crash left behind.
    ``reserved_max``: reserved.broker.max.id, the top of the range persistent ids are
    allocated in before they are taken from /brokers/seqid (``next_free_id``)."""
    started = time.monotonic()
    outcome = IdentityOutcome("persistent", -1, "", "")

    def done(record: IdentityRecord, source: str) -> IdentityOutcome:
        outcome.broker_id = record.broker_id
        outcome.claim = claim_of(record)
        outcome.identity = record.identity
        outcome.source = source
        outcome.zk_requests = store.requests
        outcome.ms = (time.monotonic() - started) * 1000
        return outcome

    def claim_of(record: IdentityRecord) -> IdentityClaim:
        return IdentityClaim(
            record.broker_id, record.cluster_name, record.broker_name, address, record.check_code
        )

    def claim(record: IdentityRecord, *, absent: bool) -> ClaimDecision:
        """ApplyBrokerId: the compare-and-set on /brokers/identities/<id>. FREE: this call
        created the claim; OURS: it was there already, holding our check code; TAKEN.

        ``absent``: no claim was there when read before this call. A create whose answer
        was lost, sent again, meets a claim its first send may have made: if that claim
        holds our code and was absent before, that send made it (FREE)."""
        created = store.create_claim(claim_of(record))
        if created:
            return ClaimDecision.FREE
        decision = decide_claim(read_claim(store, record.broker_id), record.check_code)
        if decision is ClaimDecision.FREE:  # deleted in between: claim it again
            created = store.create_claim(claim_of(record))
            if created is None:
                # Absent at the read just before: a claim holding our code now was made
                # by the lost send (as below).
                again = decide_claim(read_claim(store, record.broker_id), record.check_code)
                created = again is ClaimDecision.OURS
            return ClaimDecision.FREE if created else ClaimDecision.TAKEN
        if decision is ClaimDecision.OURS and created is None and absent:
            return ClaimDecision.FREE
        return decision

    def apply(record: IdentityRecord, *, new_code: bool) -> str | None:
        """The claim, and then a check that no broker registered under the id since it was
        read (a static broker starting meanwhile); None when accepted, else why not.

        This process registers only once its final file is written, so a registration
        under an id it holds only in a temp file is another process's. A claim kept for
        such an id would pin this broker to an id it can never register: the id is given
        up. The claim is deleted only if this process made it (this call created it, or
        the check code is new in this attempt), so that the listing does not show this
        broker's name on the other broker's id. One that re-applying a temp file finds
        there already was made by an earlier start of this disk and is left: a copy of the
        disk may have finished with it and be the registered broker (a live claim), which
        nothing here tells from a static broker registered after a crash at after_apply
        (then the claim is left over, as a lost disk's is). Re-applying reads the claim
        first, so that a create sent again after a lost answer tells one made by its
        first send (absent at that read) from an earlier start's (present)."""
        absent = new_code or read_claim(store, record.broker_id) is None
        decision = claim(record, absent=absent)
        if decision is ClaimDecision.TAKEN:
            return "claimed by another broker first"
        if store.is_registered(record.broker_id):
            if decision is ClaimDecision.FREE or new_code:
                store.delete_claim(record.broker_id)
                return "claimed, but another broker registered under it meanwhile"
            return (
                "claimed with this check code before this start, and a broker is registered"
                " under it (a copy of this disk that finished with it, or another): its"
                " claim is left alone"
            )
        return None

    def finish(record: IdentityRecord) -> None:
        crash("after_apply")
        files.write_final(record)
        crash("after_final")
        files.remove_temp()

    while outcome.attempts < MAX_ALLOCATION_ATTEMPTS:
        step = next_step(
            files.read_final(),
            files.read_temp(),
            cluster_name=cluster_name,
            broker_name=broker_name,
            final_where=str(files.final_path),
            temp_where=str(files.temp_path),
        )
        if isinstance(step, UseFinal):
            if step.remove_temp:
                files.remove_temp()
            _verify_claim(store, step.record, address, str(files.final_path))
            return done(step.record, "identity-file")
        outcome.attempts += 1
        if isinstance(step, Reapply):
            record = step.record
            rejected = apply(record, new_code=False)
            if rejected is None:
                finish(record)
                return done(record, "temp-file")
            log.info("id %d of the temp file was rejected (%s)", record.broker_id, rejected)
            outcome.rejected.append(record.broker_id)
            files.remove_temp()
            continue
        known = store.known_ids()
        chosen = next_free_id(
            known.claimed, known.registered, known.assigned, reserved_max=reserved_max
        )
        if isinstance(chosen, GenerateId):
            broker_id = store.generate_seq_id() + reserved_max
            if broker_id in known.claimed | known.registered | known.assigned:
                # a configured id above the range (broker.id.generation.enable=false)
                log.info("generated id %d is in use; generating another", broker_id)
                outcome.rejected.append(broker_id)
                continue
        else:
            broker_id = chosen
        record = IdentityRecord(cluster_name, broker_name, broker_id, new_check_code(address))
        files.write_temp(record)
        crash("after_temp")
        rejected = apply(record, new_code=True)
        if rejected is None:
            finish(record)
            return done(record, "allocated")
        log.info("id %d was rejected (%s); starting over", broker_id, rejected)
        outcome.rejected.append(broker_id)
        files.remove_temp()
    raise IdentityError(
        f"could not claim a broker id in {MAX_ALLOCATION_ATTEMPTS} attempts (rejected:"
        f" {outcome.rejected[-10:]}...)"
    )


def _verify_claim(store: IdentityStore, record: IdentityRecord, address: str, where: str) -> None:
    """A restart with a final file: the claim in ZooKeeper must still be ours. Its address
    is not written here but once this broker is registered (``record_claim_address``): a
    broker started from a copy of a live broker's disk holds the same check code, passes
    this check, and is refused only by its registration (BrokerIdInUse)."""
    claim = store.get_claim(record.broker_id)
    decision = decide_claim(claim, record.check_code)
    if decision is ClaimDecision.FREE:
        log.warning(
            "the claim of %s is missing from ZooKeeper; claiming the id again", record.identity
        )
        mine = IdentityClaim(
            record.broker_id, record.cluster_name, record.broker_name, address, record.check_code
        )
        if not store.create_claim(mine):
            claim = store.get_claim(record.broker_id)
            decision = decide_claim(claim, record.check_code)
    if decision is ClaimDecision.TAKEN:
        holder = claim.identity if claim is not None else "?"
        raise IdentityError(
            f"broker id {record.broker_id} of {where} ({record.identity}) is claimed in"
            f" ZooKeeper by {holder} with another check code: two brokers share an identity"
            " file, or ZooKeeper's data was replaced"
        )


def claim_update(current: IdentityClaim | None, mine: IdentityClaim) -> IdentityClaim | None:
    """Once registered: the claim to write so that it records this broker's address, or
    None (up to date; gone, deleted by hand; or holding another check code, which only a
    claim replaced by hand can: this broker is registered under the id, and an operator's
    claim is not overwritten)."""
    if current is None or current.check_code != mine.check_code:
        return None
    return None if current.address == mine.address else mine


def record_claim_address(store: IdentityStore, mine: IdentityClaim) -> bool:
    """Bring the claim's address up to date (a restart on another address is the point of
    the scheme); called only after this process registered under ``mine.broker_id``, so
    that a broker refused its registration never rewrites a live broker's claim. True if
    it wrote."""
    current = store.get_claim(mine.broker_id)
    update = claim_update(current, mine)
    if update is None:
        if current is not None and current.check_code != mine.check_code:
            log.warning(
                "the claim of broker id %d holds another check code (%s); its address is"
                " left as it is",
                mine.broker_id,
                current.identity,
            )
        return False
    log.info(
        "%s moved from %s to %s",
        f"{mine.cluster_name}:{mine.broker_name}:{mine.broker_id}",
        current.address if current is not None and current.address else "?",
        mine.address or "?",
    )
    store.set_claim(update)
    return True


def check_cluster_id_before_the_id(
    store: IdentityStore, metas: Mapping[str, MetaProperties | None]
) -> None:
    """Kafka 2.8's KafkaServer.startup checks the log directories' cluster id before
    getOrGenerateBrokerId: no id is generated or claimed for a directory of another
    cluster, nor compared with a configured one, and the broker stops before it opens
    anything there. /cluster/id is read (or created, as the start-up would) only when a
    directory names a cluster id (``names_a_cluster_id``): there is nothing to check
    otherwise."""
    if names_a_cluster_id(metas):
        check_cluster_id(metas, store.cluster_id())


def names_a_cluster_id(metas: Mapping[str, MetaProperties | None]) -> bool:
    return any(m is not None and m.cluster_id is not None for m in metas.values())


def obtain_kafka_id(
    configured: int,
    log_dirs: Sequence[str],
    *,
    generation_enabled: bool,
    reserved_max_id: int,
    store_factory: Callable[[], IdentityStore],
    crash: CrashHook = crash_from_environment,
) -> IdentityOutcome:
    """Kafka's mode: configured or stored id, else one generated from /brokers/seqid.
    meta.properties is written later, once the broker is registered (as Kafka does).
    ``store_factory`` is called once at most: a session only to check a cluster id or to
    generate an id."""
    started = time.monotonic()
    # A directory whose meta.properties cannot be read has no say (it will be offline).
    metas = read_meta_properties(log_dirs, {})
    # Kafka 2.8's start-up order: the files agree, then the cluster id, then the broker id
    # (a directory of another cluster is refused as such, not as another broker's).
    check_meta_properties_alike(metas)
    store = store_factory() if names_a_cluster_id(metas) else None
    if store is not None:
        check_cluster_id_before_the_id(store, metas)
    decision = decide_kafka_id(configured, metas, generation_enabled=generation_enabled)
    if isinstance(decision, UseId):
        outcome = IdentityOutcome("kafka", decision.broker_id, decision.source, "")
    else:
        store = store or store_factory()
        broker_id = store.generate_seq_id() + reserved_max_id
        crash("after_generate")
        outcome = IdentityOutcome("kafka", broker_id, "generated", "")
        outcome.attempts = 1
    outcome.zk_requests = store.requests if store is not None else 0
    outcome.identity = str(outcome.broker_id)
    outcome.ms = (time.monotonic() - started) * 1000
    return outcome
