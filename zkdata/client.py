"""The ZooKeeper client shell: batched reads, watch dispatch, and the fenced write path.

Built on kazoo, with four additions a Kafka controller needs:

* `get_many`/`get_children_many` batch reads into ZooKeeper 3.6+ `multiRead` requests
  (opcode 22), pipelined. A single kazoo `get` costs a round trip and ~100 us of Python;
  a multiRead of 1,000 znodes costs about as much as one, so loading 100,000 partition
  states takes well under a second instead of ten.
* Watches are dispatched by path to registered handlers (as Kafka's ZooKeeperClient does),
  so the controller registers a handler once and re-arms the one-shot watch by reading
  with `watch=True`.
* Watches survive a reconnection within the session. kazoo drops them all when its
  connection drops (it has no SetWatches), and the server it reconnects to, often another
  ensemble member, knows none of them; the Java client, and so Kafka, re-arms them with a
  SetWatches request. So does this client (`_SetWatches`): without it a controller whose
  connection moved would never hear of a broker leaving or coming back.
* `multi_fenced` is the one path for controller writes: every multi starts with a check
  of the `/controller_epoch` zkVersion, so a controller that lost its term changes nothing.
  A term is also bound to the session it was won in (`session_generation`): its writes
  are refused once that session expired, though kazoo opened a new one at once, in which
  the zkVersion check alone would pass until another controller was elected.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from typing import Any, Protocol, TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    EXCEPTIONS,
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
    ZookeeperError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.serialization import Create as KazooCreate
from kazoo.protocol.serialization import (
    int_struct,
    long_struct,
    multiheader_struct,
    read_buffer,
    read_string,
    stat_struct,
    write_string,
)
from kazoo.protocol.states import EventType, KeeperState, WatchedEvent, ZnodeStat
from kazoo.retry import KazooRetry
from kazoo.security import OPEN_ACL_UNSAFE

from zkdata import paths
from zkdata.poll_handler import PollingHandler
from zkdata.tree import subtrees_leaves_first

log = logging.getLogger(__name__)

_GET_DATA = 4
_GET_CHILDREN = 8
_ERROR = -1
# Each multiRead carries at most this many reads: big enough to amortise the round trip,
# small enough to stay far below ZooKeeper's 1 MB jute.maxbuffer for the response.
READ_BATCH = 1000
# Writes per multi when batching many independent items (e.g. partition states), and the
# bytes per multi: ZooKeeper refuses a request over jute.maxbuffer (1 MB by default).
WRITE_BATCH_OPS = 500
WRITE_BATCH_BYTES = 512 * 1024
# Packed multis sent and not yet answered, at most (see _multi_batched).
MULTIS_IN_FLIGHT = 16
# How long a bounded stop waits for kazoo's connection thread once its socket is shut (it
# ends at once, or after the back-off between two connection attempts, at most ~1.4 s).
_STOP_AFTER_SHUT_S = 1.0


T = TypeVar("T")


class ControllerMovedError(Exception):
    """The `/controller_epoch` check of a fenced write failed: another controller won."""


class CancelledWhileDisconnected(Exception):
    """A request retried until connected was cancelled while there was no connection."""


class ZooKeeperClientTimeout(Exception):
    """No connection, or no answer, within the time a request was given (Kafka's
    ZooKeeperClientTimeoutException, after zookeeper.connection.timeout.ms)."""


# ZooKeeper out of reach: the connection lost with a request in flight (it may have been
# applied), the session gone, no answer in time. What a request met is not known.
ZOOKEEPER_UNAVAILABLE: tuple[type[Exception], ...] = (
    ConnectionLoss,
    SessionExpiredError,
    OperationTimeoutError,
    KazooTimeoutError,
    ZooKeeperClientTimeout,
    CancelledWhileDisconnected,
)


class _MultiRead:
    """kazoo request object for ZooKeeper's multiRead (opcode 22), in kazoo's conventions:
    reads of one kind (``op``), none of them watched (ZooKeeper ignores the flag in a
    multiRead anyway)."""

    type = 22
    __slots__ = ("op", "paths")

    def __init__(self, op: int, paths: Sequence[str]) -> None:
        self.op = op
        self.paths = paths  # chrooted

    def serialize(self) -> bytes:
        """Each read's header, its path (length, UTF-8) and a watch flag of 0, then the
        end marker; made by loops in C (a failover of 100,000 partitions sends 100,000)."""
        head = multiheader_struct.pack(self.op, False, -1)
        encoded = list(map(str.encode, self.paths))
        lengths = list(map(len, encoded))
        prefix = {n: head + int_struct.pack(n) for n in set(lengths)}
        reads = zip(map(prefix.__getitem__, lengths), encoded, repeat(b"\x00"))
        return b"".join(chain.from_iterable(reads)) + _MULTI_END

    @classmethod
    def deserialize(cls, buf: bytes, offset: int) -> list[Any]:
        out: list[Any] = []
        unpack_header = multiheader_struct.unpack_from
        unpack_int = int_struct.unpack_from
        unpack_stat = stat_struct.unpack_from
        stat_size = stat_struct.size
        while True:
            op, done, _err = unpack_header(buf, offset)
            offset += multiheader_struct.size
            if done:
                return out
            if op == _GET_DATA:
                data, offset = read_buffer(buf, offset)
                out.append((data, ZnodeStat._make(unpack_stat(buf, offset))))
                offset += stat_size
            elif op == _GET_CHILDREN:
                (count,) = unpack_int(buf, offset)
                offset += 4
                children = []
                for _ in range(max(count, 0)):
                    child, offset = read_string(buf, offset)
                    children.append(child)
                out.append(children)
            elif op == _ERROR:
                (code,) = unpack_int(buf, offset)
                offset += 4
                out.append(EXCEPTIONS[code]())
            else:
                raise ZookeeperError(f"unexpected op {op} in a multiRead response")


class _SetWatches:
    """kazoo request object for SetWatches (opcode 101): arms watches on the server a client
    reconnected to within its session. The server fires at once each watch whose znode
    changed since `relative_zxid` (created, deleted, data or children), so nothing that
    happened while the client was away is missed."""

    type = 101
    __slots__ = ("child", "data", "exist", "relative_zxid")

    def __init__(
        self, relative_zxid: int, data: list[str], exist: list[str], child: list[str]
    ) -> None:
        self.relative_zxid = relative_zxid
        self.data, self.exist, self.child = data, exist, child  # chrooted paths

    def serialize(self) -> bytearray:
        b = bytearray(long_struct.pack(self.relative_zxid))
        for path_list in (self.data, self.exist, self.child):
            b += int_struct.pack(len(path_list))
            for path in path_list:
                b += write_string(path)
        return b

    @classmethod
    def deserialize(cls, _buf: bytes, _offset: int) -> None:
        return None  # the reply is its header alone


# Paths per SetWatches request, in bytes: the Java client's limit, far below jute.maxbuffer.
_SET_WATCHES_MAX_BYTES = 128 * 1024


def _set_watches_requests(
    relative_zxid: int, data: list[str], exist: list[str], child: list[str]
) -> list[_SetWatches]:
    """The SetWatches requests that re-arm these watches, each under the size limit."""
    requests: list[_SetWatches] = []
    current = _SetWatches(relative_zxid, [], [], [])
    size = 0
    for kind, path_list in (("data", data), ("exist", exist), ("child", child)):
        for path in path_list:
            cost = len(path.encode()) + 4
            if size + cost > _SET_WATCHES_MAX_BYTES and size:
                requests.append(current)
                current, size = _SetWatches(relative_zxid, [], [], []), 0
            getattr(current, kind).append(path)
            size += cost
    if size:
        requests.append(current)
    return requests


_CREATE = 1
_DELETE = 2
_SET_DATA = 5
_CHECK = 13
_SET_DATA_HEADER = multiheader_struct.pack(_SET_DATA, False, -1)
_CHECK_HEADER = multiheader_struct.pack(_CHECK, False, -1)
_DELETE_HEADER = multiheader_struct.pack(_DELETE, False, -1)
_CREATE_HEADER = multiheader_struct.pack(_CREATE, False, -1)
_MULTI_END: bytes = multiheader_struct.pack(-1, True, -1)
# States in which kazoo's _call refuses a request instead of queueing it.
_REFUSING_STATES = (KeeperState.AUTH_FAILED, KeeperState.CLOSED, KeeperState.EXPIRED_SESSION)


class _Multi:
    """kazoo request object for ZooKeeper's multi (opcode 14), serialized by us.

    kazoo's transaction builds, validates and serializes a tuple per op (~4 us each:
    40 ms of the controller's thread for 10,000 partition writes); this is the same
    bytes written straight from our ops, whose paths `zkdata.paths` made (no relative
    parts to normalise). Its type is kazoo's Transaction's, so kazoo un-chroots the paths
    of creates in the response as it does for its own.
    """

    type = 14
    __slots__ = ("_payload",)

    def __init__(self, payload: bytearray) -> None:
        self._payload = payload

    def serialize(self) -> bytearray:
        return self._payload

    @classmethod
    def deserialize(cls, buf: bytes, offset: int) -> list[Any]:
        """A result per op, as kazoo's Transaction gives them."""
        out: list[Any] = []
        unpack_header = multiheader_struct.unpack_from
        header_size = multiheader_struct.size
        while True:
            op, done, _err = unpack_header(buf, offset)
            offset += header_size
            if done:
                return out
            if op == _SET_DATA:
                out.append(ZnodeStat._make(stat_struct.unpack_from(buf, offset)))
                offset += stat_struct.size
            elif op in (_CHECK, _DELETE):
                out.append(True)
            elif op == _CREATE:
                created, offset = read_string(buf, offset)
                out.append(created)
            elif op == _ERROR:
                (code,) = int_struct.unpack_from(buf, offset)
                offset += 4
                out.append(EXCEPTIONS[code]())
            else:
                raise ZookeeperError(f"unexpected op {op} in a multi response")


def _put_string(out: bytearray, text: str) -> None:
    data = text.encode()
    out += int_struct.pack(len(data))
    out += data


# --- write operations -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Create:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False


@dataclass(frozen=True, slots=True)
class SetData:
    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True, slots=True)
class Delete:
    path: str
    version: int = -1


@dataclass(frozen=True, slots=True)
class Check:
    path: str
    version: int


WriteOp = Create | SetData | Delete | Check
# A result per op: the created path, a ZnodeStat for SetData, True, or the ZooKeeper error.
OpResult = Any


class WatchHandler(Protocol):
    """Receives the watch events of one path. Runs on kazoo's callback thread: enqueue only."""

    def __call__(self, event: WatchedEvent) -> None: ...


def is_error(result: object) -> bool:
    return isinstance(result, Exception)


def _op_bytes(op: WriteOp) -> int:
    """Roughly what an op weighs in a multi request (path, data, headers)."""
    data = op.data if isinstance(op, (Create, SetData)) else b""
    return len(op.path) + len(data) + 32


# on_answered of the batched writes: the indices of some items, and their results.
AnsweredCallback = Callable[[list[int], list[list[OpResult]]], None]


def is_own_failure(result: object) -> bool:
    """Whether a multi's result is its op's own failure. When an op of a multi fails,
    ZooKeeper answers the ops before it RolledBackError (code 0) and the ops after it
    RuntimeInconsistency (code -2: it stops preparing the multi at the first failure);
    neither says anything about its own op, only that another one failed."""
    return isinstance(result, Exception) and not isinstance(
        result, RolledBackError | RuntimeInconsistency
    )


#: restarts of kazoo's connection thread closer together than this back off
RESTART_WINDOW_S = 60.0


def connection_restart_delay_s(recent_restarts: int) -> float:
    """The wait before starting kazoo's connection thread again, given how many restarts
    came within RESTART_WINDOW_S before: none for the first, then 0.5 s doubling up to
    10 s (a session timeout's order: brokers re-register about as often as they would
    after expiries)."""
    if recent_restarts <= 0:
        return 0.0
    return float(min(10.0, 0.5 * 2 ** (recent_restarts - 1)))


class ZkClient:
    """A kazoo client plus the batched and fenced operations above. Thread-safe."""

    def __init__(
        self,
        connect: str,
        *,
        session_timeout_ms: int = 18_000,
        connection_timeout_ms: int | None = None,
        request_timeout_ms: int | None = None,
    ) -> None:
        """``connection_timeout_ms``: how long `start` waits for a connection;
        ``request_timeout_ms``: how long a request waits for its answer (`_answer`). Both
        default to the session timeout."""
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self.request_timeout_ms = request_timeout_ms or session_timeout_ms
        #: write requests handed to kazoo (creates, sets, deletes, multis): a caller whose
        #: request went unanswered knows whether it had asked for a change
        self.writes_sent = 0
        # Retry the connection forever (a broker outlives a ZooKeeper outage); each command
        # gets no automatic retry, so its caller decides what a lost connection means.
        self.kazoo = KazooClient(
            hosts=connect,
            timeout=session_timeout_ms / 1000,
            connection_retry=KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0),
            command_retry=None,
            handler=PollingHandler(),
        )
        self._handlers: dict[str, list[WatchHandler]] = defaultdict(list)
        self._handlers_lock = threading.Lock()
        self._state_listeners: list[Callable[[str], None]] = []
        self._closing = False
        # Chrooted paths last watched while missing (exist watches, not data watches), and
        # the watches a dropped connection took with it, to re-arm within the same session.
        self._exist_watched: set[str] = set()
        self._watch_lock = threading.Lock()
        self._lost_watches: tuple[int, list[str], list[str]] | None = None
        #: connections lost (suspended, or the session with them) since the start: a
        #: waiter that reads it twice knows whether ZooKeeper went away in between
        self.disconnections = 0
        # Sessions ended (expired or closed) since the start, moved on under _submit_lock
        # by _on_state; a request bound to a generation is queued under the same lock.
        self._generation = 0
        self._submit_lock = threading.Lock()
        # Orders close() and a restart of kazoo's connection thread (_restart_connection).
        self._lifecycle_lock = threading.Lock()
        #: times kazoo's connection thread ended on an error and was started again
        self.connection_restarts = 0
        #: the wait before the last of those restarts (connection_restart_delay_s)
        self.last_restart_delay_s = 0.0
        self._restart_times: deque[float] = deque()
        self._closed = threading.Event()  # set by close(): ends a restart's wait
        self.kazoo.add_listener(self._on_state)
        self._watch_connection_thread()

    # --- lifecycle --------------------------------------------------------------------

    def start(self, *, cancelled: threading.Event | None = None) -> None:
        """Connect, waiting at most the connection timeout (then KazooTimeoutError, as
        Kafka fails a start that cannot reach ZooKeeper within
        zookeeper.connection.timeout.ms). ``cancelled`` set meanwhile: the attempt stops
        and CancelledWhileDisconnected is raised, so a broker asked to stop while it
        cannot reach ZooKeeper stops at once. Not kazoo's own start: its failure path
        waits for the connection thread, which may be waiting out a handshake timeout
        kazoo derives from the session timeout (`_stop_kazoo`)."""
        connected = self.kazoo.start_async()
        deadline = time.monotonic() + self.connection_timeout_ms / 1000
        while not connected.wait(min(0.2, max(0.0, deadline - time.monotonic()))):
            if (cancelled is not None and cancelled.is_set()) or time.monotonic() >= deadline:
                break
        if not self.kazoo.connected:
            self._stop_kazoo(0.0)  # no session to close
            if cancelled is not None and cancelled.is_set():
                raise CancelledWhileDisconnected("asked to stop while connecting to ZooKeeper")
            raise KazooTimeoutError("Connection time-out")

    def close(self, *, timeout_s: float | None = None) -> None:
        """Close the session (ZooKeeper answers the close) and stop the client. With
        ``timeout_s``, wait at most about that long: a close ZooKeeper leaves unanswered is
        then given up, and the session expires on its own."""
        with self._lifecycle_lock:
            self._closing = True  # the LOST that kazoo reports next is our own doing
        self._closed.set()
        self._stop_kazoo(timeout_s)

    def _stop_kazoo(self, timeout_s: float | None) -> None:
        """kazoo's stop and close. kazoo's stop waits for its connection thread, which may
        be waiting for an answer from a ZooKeeper that accepted the connection and does
        not answer (stopped, its machine gone), for as long as the handshake or read
        timeout kazoo derives from the session timeout. With ``timeout_s``, it is given
        that long, then kazoo's socket is shut, which ends that thread's wait at once;
        one still opening its TCP connection is left to end on its own (a daemon)."""
        kazoo = self.kazoo
        if timeout_s is None:
            try:
                kazoo.stop()
            finally:
                kazoo.close()
            return
        stopped = threading.Event()

        def stop() -> None:
            try:
                kazoo.stop()
                kazoo.close()
            except Exception:
                log.exception("stopping the ZooKeeper client failed")
            finally:
                stopped.set()

        threading.Thread(target=stop, name="zk-client-stop", daemon=True).start()
        if stopped.wait(timeout_s):
            return
        # kazoo's stop marks the client stopped before it waits: woken, the connection
        # thread then ends instead of connecting again.
        kazoo._stopped.wait(_STOP_AFTER_SHUT_S)
        sock = kazoo._connection._socket
        if sock is not None:
            with contextlib.suppress(OSError):  # closed meanwhile by its thread
                sock.shutdown(socket.SHUT_RDWR)
        stopped.wait(_STOP_AFTER_SHUT_S)

    @property
    def session_id(self) -> int:
        cid = self.kazoo.client_id
        return int(cid[0]) if cid else 0

    @property
    def connected(self) -> bool:
        return bool(self.kazoo.connected)

    @property
    def session_generation(self) -> int:
        """Which session this is: moved on each time one ends (expired or closed), before
        any state listener hears of it. A request bound to a generation (``session=``)
        is refused with SessionExpiredError once it moved on, so nothing made for one
        session is ever applied in the next (kazoo opens it at once, transparently)."""
        return self._generation

    def add_state_listener(self, listener: Callable[[str], None]) -> None:
        """`listener(state)` with state one of "CONNECTED", "SUSPENDED", "LOST", "CLOSED".

        Called on kazoo's connection thread: it must only enqueue.
        """
        self._state_listeners.append(listener)

    def _on_state(self, state: str) -> None:
        name = {KazooState.CONNECTED: "CONNECTED", KazooState.SUSPENDED: "SUSPENDED"}.get(
            state, "CLOSED" if self._closing else "LOST"
        )
        if name != "CONNECTED":
            self.disconnections += 1
        if name in ("LOST", "CLOSED"):
            # kazoo runs its listeners before it fails the requests still queued for the
            # ended session (_notify_pending): one queued before this point is failed by
            # kazoo, one bound to the old generation after it is refused by _call_in.
            with self._submit_lock:
                self._generation += 1
        if name == "SUSPENDED":
            self._remember_watches()
        elif name == "CONNECTED":
            self._rearm_watches()
        else:
            self._lost_watches = None  # a new session starts without watches
        for listener in list(self._state_listeners):
            try:
                listener(name)
            except Exception:
                log.exception("ZooKeeper state listener failed")

    def _watch_connection_thread(self) -> None:
        """kazoo's connection thread ends for good on an error it does not expect (an
        answer out of order: poll_handler): kazoo would never connect again, and the
        broker would stay without ZooKeeper, unregistered, while it went on serving. Its
        loop is wrapped so that such an end starts it again (`_restart_connection`).
        kazoo tells the listeners LOST first, unless the session was lost already (the
        loop died while connecting again after an expiry)."""
        connection = self.kazoo._connection
        loop = connection.zk_loop

        def zk_loop() -> None:
            try:
                loop()
            except Exception:
                pass  # logged by kazoo ("Unhandled exception in connection loop")
            finally:
                if not self._closing and not self.kazoo._stopped.is_set():
                    threading.Thread(
                        target=self._restart_connection, name="zk-client-restart", daemon=True
                    ).start()

        connection.zk_loop = zk_loop  # looked up by kazoo each time it starts the thread

    def _restart_connection(self) -> None:
        """Start kazoo's connection thread again, off that thread (kazoo joins the old one
        first): a new session, which the listeners take as they take one after an expiry
        (LOST, then CONNECTED). The first restart is at once; one following others within
        RESTART_WINDOW_S waits longer each time (connection_restart_delay_s), so that a
        ZooKeeper that keeps failing the loop is not met with a new session in a tight
        loop. close() ends the wait."""
        now = time.monotonic()
        times = self._restart_times
        while times and now - times[0] > RESTART_WINDOW_S:
            times.popleft()
        delay_s = connection_restart_delay_s(len(times))
        times.append(now)
        log.error(
            "the ZooKeeper client's connection thread ended on an error; "
            "connecting again, with a new session, in %.1f s",
            delay_s,
        )
        if self._closed.wait(delay_s):
            return
        with self._lifecycle_lock:
            if self._closing or self.kazoo._stopped.is_set():
                return
            self.connection_restarts += 1
            self.last_restart_delay_s = delay_s
            try:
                self.kazoo.start_async()
            except Exception:
                log.exception("starting the ZooKeeper client's connection again failed")

    def _remember_watches(self) -> None:
        """On kazoo's connection thread, as the connection drops: kazoo clears its watches
        right after telling its listeners, so note which of ours it holds now."""
        mine = self._dispatch
        data = [p for p, ws in list(self.kazoo._data_watchers.items()) if mine in ws]
        child = [p for p, ws in list(self.kazoo._child_watchers.items()) if mine in ws]
        # client_id is None once the connection is down: the session id itself stays.
        self._lost_watches = (self.kazoo._session_id or 0, data, child)

    def _rearm_watches(self) -> None:
        """On kazoo's connection thread, reconnected: if the session is the one whose
        connection dropped, arm its watches again, here and on the server, before any
        event can arrive for them. Never waits (the thread reading the answers is this
        one)."""
        lost, self._lost_watches = self._lost_watches, None
        if lost is None or lost[0] != (self.kazoo._session_id or 0) or not (lost[1] or lost[2]):
            return
        _session, watched_data, child = lost
        with self._watch_lock:
            exist = [p for p in watched_data if p in self._exist_watched]
        exist_set = set(exist)
        data = [p for p in watched_data if p not in exist_set]
        mine = self._dispatch
        for path in watched_data:
            self.kazoo._data_watchers[path].add(mine)
        for path in child:
            self.kazoo._child_watchers[path].add(mine)
        for request in _set_watches_requests(self.kazoo.last_zxid, data, exist, child):
            result = self.kazoo.handler.async_result()
            result.rawlink(_log_set_watches_failure)
            self.kazoo._call(request, result)
        log.info(
            "reconnected within the session: re-armed %d data, %d exists and %d child watches",
            len(data),
            len(exist),
            len(child),
        )

    def _note_watched(self, path: str, exists: bool) -> None:
        full = self._chrooted(path)
        with self._watch_lock:
            if exists:
                self._exist_watched.discard(full)
            else:
                self._exist_watched.add(full)

    def wait_connected(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not self.kazoo.connected:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    def until_connected(
        self, fn: Callable[[], T], *, cancelled: threading.Event | None = None
    ) -> T:
        """``fn()``, called again once connected each time it fails for want of a
        connection (ConnectionLoss, SessionExpiredError, OperationTimeoutError: no answer
        within the session timeout, ``_answer``), as Kafka's
        ZooKeeperClient retries requests until connected: for steps that are safe to
        repeat (idempotent reads and creates) and that must not fail a broker's start-up
        over a ZooKeeper blip. ``cancelled`` set: CancelledWhileDisconnected."""
        while True:
            try:
                return fn()
            except (ConnectionLoss, SessionExpiredError, OperationTimeoutError) as e:
                log.info("ZooKeeper request failed (%s); retrying once connected", type(e).__name__)
                # The connection retries forever: wait as long, a fifth of a second at a
                # time, to see a cancel; and a moment at least, not to spin on a failure
                # that outlives the connection's return.
                time.sleep(0.05)
                while True:
                    if cancelled is not None and cancelled.is_set():
                        raise CancelledWhileDisconnected(str(e) or type(e).__name__) from e
                    if self.wait_connected(0.2):
                        break

    # --- watch dispatch ---------------------------------------------------------------

    def register_handler(self, path: str, handler: WatchHandler) -> None:
        with self._handlers_lock:
            if handler not in self._handlers[path]:
                self._handlers[path].append(handler)

    def unregister_handler(self, path: str, handler: WatchHandler) -> None:
        with self._handlers_lock:
            lst = self._handlers.get(path)
            if lst and handler in lst:
                lst.remove(handler)
            if not lst:
                self._handlers.pop(path, None)

    def unregister_all_handlers(self) -> None:
        with self._handlers_lock:
            self._handlers.clear()

    def _dispatch(self, event: WatchedEvent) -> None:
        with self._handlers_lock:
            handlers = list(self._handlers.get(event.path, ()))
        for handler in handlers:
            try:
                handler(event)
            except Exception:
                log.exception("watch handler for %s failed", event.path)

    # --- answers ----------------------------------------------------------------------

    def _answer(self, result: Any) -> Any:
        """What ZooKeeper answered a request, waiting at most the request timeout (by
        default a session timeout): else OperationTimeoutError. kazoo holds a request
        made while its connection is down until it is back or the session is declared
        expired (its own sync calls wait for good meanwhile), so an unbounded wait would
        keep a controller's event thread from its resignation for as long as ZooKeeper is
        out of reach (items 2 and 35 of docs/architecture.md). The request may still be
        sent, and applied, once the connection is back: the error is a lost answer's, as
        ConnectionLoss is."""
        try:
            return result.get(timeout=self.request_timeout_ms / 1000)
        except KazooTimeoutError as e:  # the timeout_exception of kazoo's threading handler
            raise OperationTimeoutError(
                f"no answer from ZooKeeper within {self.request_timeout_ms} ms"
            ) from e

    # --- single reads -----------------------------------------------------------------

    def get(self, path: str, *, watch: bool = False) -> tuple[bytes, ZnodeStat] | None:
        """Data and stat of a znode, or None if it does not exist.

        With ``watch``, a missing znode is watched for its creation (an exists watch); one
        created between the read and that watch is read again, or its creation would go
        unnoticed until it changed again (an admin tool re-creating a request znode the
        moment the controller deleted the last one)."""
        while True:
            try:
                data, stat = self._answer(
                    self.kazoo.get_async(path, watch=self._dispatch if watch else None)
                )
            except NoNodeError:
                if watch and self.exists(path, watch=True) is not None:
                    continue  # created meanwhile
                return None
            if watch:
                self._note_watched(path, True)
            return data, stat

    def get_within(self, path: str, timeout_s: float) -> tuple[bytes, ZnodeStat] | None:
        """Data and stat of a znode, or None if it does not exist, within ``timeout_s``:
        else ZooKeeperClientTimeout. Kafka's ZooKeeperClient waits at most
        zookeeper.connection.timeout.ms for a connection, and sends a request again when
        its connection was lost; kazoo's ``get`` waits for a connection forever (a
        request made while disconnected is queued until it is back). Here both the wait
        for a connection and the answer are bounded, together."""
        got: tuple[bytes, ZnodeStat] | None = self._within(path, timeout_s, self.kazoo.get_async)
        return got

    def get_children_within(self, path: str, timeout_s: float) -> list[str] | None:
        """Children of a znode, or None if it does not exist, within ``timeout_s`` (as
        ``get_within``)."""
        children = self._within(path, timeout_s, self.kazoo.get_children_async)
        return None if children is None else list(children)

    def _within(self, path: str, timeout_s: float, request: Callable[[str], Any]) -> Any:
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.wait_connected(remaining):
                break
            answer = request(path)
            try:
                return answer.get(timeout=max(0.0, deadline - time.monotonic()))
            except NoNodeError:
                return None
            except self.kazoo.handler.timeout_exception:
                break
            except (ConnectionLoss, SessionExpiredError, OperationTimeoutError) as e:
                log.info("ZooKeeper request failed (%s); retrying once connected", type(e).__name__)
                time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
                continue
        raise ZooKeeperClientTimeout(
            f"no answer from ZooKeeper for {path} within {timeout_s * 1000:.0f} ms"
        )

    def exists(
        self,
        path: str,
        *,
        watch: bool = False,
        watcher: Callable[[WatchedEvent], None] | None = None,
    ) -> ZnodeStat | None:
        """The znode's stat, or None. ``watcher``: a one-shot callback of the caller's own
        instead of the path's handlers (not armed again after a reconnection)."""
        if watcher is None and watch:
            watcher = self._dispatch
        stat: ZnodeStat | None = self._answer(self.kazoo.exists_async(path, watch=watcher))
        if watcher == self._dispatch:  # bound methods: equal, never the same object
            self._note_watched(path, stat is not None)
        return stat

    def get_children(self, path: str, *, watch: bool = False) -> list[str] | None:
        """Children of a znode, or None if it does not exist (watched as ``get`` does)."""
        while True:
            try:
                return list(
                    self._answer(
                        self.kazoo.get_children_async(path, watch=self._dispatch if watch else None)
                    )
                )
            except NoNodeError:
                if watch and self.exists(path, watch=True) is not None:
                    continue  # created meanwhile
                return None

    # --- batched reads ----------------------------------------------------------------

    def _chrooted(self, path: str) -> str:
        chroot: str = self.kazoo.chroot
        return chroot + path if chroot and path != "/" else (chroot or path)

    def _multi_read(self, op: int, path_list: Sequence[str], batch: int) -> list[Any]:
        return self._multi_read_sent(op, path_list, batch)()

    def _multi_read_sent(
        self, op: int, path_list: Sequence[str], batch: int
    ) -> Callable[[], list[Any]]:
        """Send the multiReads now; the function returned waits for their results."""
        chroot: str = self.kazoo.chroot
        if chroot and "/" not in path_list:
            chrooted: Sequence[str] = list(map(chroot.__add__, path_list))
        else:
            chrooted = [self._chrooted(p) for p in path_list]
        pending = []
        for start in range(0, len(chrooted), batch):
            result = self.kazoo.handler.async_result()
            self.kazoo._call(_MultiRead(op, chrooted[start : start + batch]), result)
            pending.append(result)

        def results() -> list[Any]:
            out: list[Any] = []
            for result in pending:
                out.extend(self._answer(result))
            return out

        return results

    def _watched_reads(self, op: int, path_list: Sequence[str]) -> list[Any]:
        # ZooKeeper ignores the watch flag inside a multiRead (Op.GetData drops it), so
        # reads that arm a watch are single requests, pipelined.
        call = self.kazoo.get_children_async if op == _GET_CHILDREN else self.kazoo.get_async
        pending = [call(p, watch=self._dispatch) for p in path_list]
        out: list[Any] = []
        for path, result in zip(path_list, pending, strict=True):
            try:
                out.append(self._answer(result))
                if op != _GET_CHILDREN:
                    self._note_watched(path, True)
            except NoNodeError as e:
                # A watch for its creation; one created between the read and that watch
                # is read again (as ``get`` does), or it would be reported missing until
                # it changed again.
                if self.exists(path, watch=True) is None:
                    out.append(e)
                    continue
                again = (
                    self.get_children(path, watch=True)
                    if op == _GET_CHILDREN
                    else self.get(path, watch=True)
                )
                out.append(e if again is None else again)
        return out

    def _read(self, op: int, path_list: Sequence[str], watch: bool, batch: int) -> list[Any]:
        if watch:
            results = self._watched_reads(op, path_list)
        else:
            results = self._multi_read(op, path_list, batch)
        return self._checked(results)

    @staticmethod
    def _checked(results: list[Any]) -> list[Any]:
        for r in results:
            if isinstance(r, Exception) and not isinstance(r, NoNodeError):
                raise r
        return [None if isinstance(r, NoNodeError) else r for r in results]

    def get_many(
        self, path_list: Sequence[str], *, watch: bool = False, batch: int = READ_BATCH
    ) -> list[tuple[bytes, ZnodeStat] | None]:
        """Data and stat of each path, None where it does not exist.

        Unwatched reads go in pipelined multiReads. Any error other than a missing node
        (e.g. a lost connection) raises: a partial view is never returned.
        """
        return self._read(_GET_DATA, path_list, watch, batch)

    def get_many_sent(
        self, path_list: Sequence[str], *, batch: int = READ_BATCH
    ) -> Callable[[], list[tuple[bytes, ZnodeStat] | None]]:
        """``get_many`` (unwatched) in two steps: the reads are sent now, and the function
        returned waits for what they read. A caller reading in slices sends the next
        slice before working through this one, so ZooKeeper is never left waiting on it.
        """
        sent = self._multi_read_sent(_GET_DATA, path_list, batch)
        return lambda: self._checked(sent())

    def get_children_many(
        self, path_list: Sequence[str], *, watch: bool = False, batch: int = READ_BATCH
    ) -> list[list[str] | None]:
        return [
            None if r is None else list(r)
            for r in self._read(_GET_CHILDREN, path_list, watch, batch)
        ]

    # --- unfenced writes (brokers, admin tools; never the controller) -----------------

    def ensure_paths(self, path_list: Iterable[str]) -> None:
        for path in path_list:
            self.writes_sent += 1
            self._answer(self.kazoo.ensure_path_async(path))

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> tuple[str, ZnodeStat]:
        self.writes_sent += 1
        created, stat = self._answer(
            self.kazoo.create_async(
                path,
                data,
                ephemeral=ephemeral,
                sequence=sequential,
                makepath=make_parents,
                include_data=True,
            )
        )
        return str(created), stat

    def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        self.writes_sent += 1
        stat: ZnodeStat = self._answer(self.kazoo.set_async(path, data, version=version))
        return stat

    def delete(self, path: str, version: int = -1) -> bool:
        """Delete a znode; False if it was already gone."""
        self.writes_sent += 1
        try:
            self._answer(self.kazoo.delete_async(path, version=version))
        except NoNodeError:
            return False
        return True

    def delete_tree(self, root: str, *, passes: int = 3) -> int:
        """Delete ``root`` and every znode below it; how many were deleted (0 when it is
        absent). The tree is listed a level at a time in pipelined multiReads and deleted
        leaves first in packed multis, which ZooKeeper applies in order: a cluster's
        100,000 partitions are 200,000 znodes, which one delete at a time (kazoo's
        recursive delete) took minutes. A znode created below meanwhile fails its
        parent's delete (NotEmpty): the tree is listed and deleted again, up to
        ``passes`` times, then that error is raised."""
        deleted = 0
        for attempt in range(1, passes + 1):
            not_empty: NotEmptyError | None = None
            doomed = subtrees_leaves_first(self, [root])
            for (result,) in self.multi_batched([[Delete(path)] for path in doomed]):
                if result is True:
                    deleted += 1
                elif isinstance(result, NotEmptyError):
                    not_empty = result
                elif is_error(result) and not isinstance(result, NoNodeError):
                    raise result
            if not_empty is None:
                return deleted
            if attempt == passes:
                raise not_empty
        return deleted

    def multi(self, ops: Sequence[WriteOp], *, session: int | None = None) -> list[OpResult]:
        """One atomic multi; a result or an error per op (errors are returned, not raised).
        ``session``: applied only in that session (`session_generation`), else
        SessionExpiredError is raised."""
        return list(self._answer(self._multi_async(ops, session)))

    def _multi_async(self, ops: Sequence[WriteOp], session: int | None = None) -> Any:
        self.writes_sent += 1
        out = bytearray()
        pack_int = int_struct.pack
        chrooted = self._chrooted
        for op in ops:
            if isinstance(op, SetData):
                out += _SET_DATA_HEADER
                _put_string(out, chrooted(op.path))
                out += pack_int(len(op.data))
                out += op.data
                out += pack_int(op.version)
            elif isinstance(op, Check):
                out += _CHECK_HEADER
                _put_string(out, chrooted(op.path))
                out += pack_int(op.version)
            elif isinstance(op, Delete):
                out += _DELETE_HEADER
                _put_string(out, chrooted(op.path))
                out += pack_int(op.version)
            else:
                flags = (1 if op.ephemeral else 0) | (2 if op.sequential else 0)
                acl = self.kazoo.default_acl or OPEN_ACL_UNSAFE
                out += _CREATE_HEADER
                out += KazooCreate(chrooted(op.path), op.data, acl, flags).serialize()
        out += _MULTI_END
        result = self.kazoo.handler.async_result()
        if session is None:
            self.kazoo._call(_Multi(out), result)
        else:
            self._call_in(session, _Multi(out), result)
        return result

    def _call_in(self, session: int, request: Any, result: Any) -> None:
        """kazoo's ``_call``, for the session of generation ``session`` only: the check
        and the queueing are one step under _submit_lock, which _on_state takes to move
        the generation on. kazoo's wake-up write is made after the lock is released: it
        blocks while the connection thread is not reading (reconnecting), and that thread
        takes the lock when the session ends."""
        kazoo = self.kazoo
        with self._submit_lock:
            if session != self._generation:
                result.set_exception(
                    SessionExpiredError("the session this request was made for has ended")
                )
                return
            if kazoo._state in _REFUSING_STATES:
                kazoo._call(request, result)  # fails it at once, queueing nothing
                return
            kazoo._queue.append((request, result))
        write_sock = kazoo._connection._write_sock
        try:
            write_sock.send(b"\0")
        except Exception:  # None (closed meanwhile) or a closed socket, as kazoo's _call
            result.set_exception(ConnectionClosedError("Connection has been closed"))

    # --- the fenced write path --------------------------------------------------------

    def multi_fenced(
        self, epoch_zk_version: int, ops: Sequence[WriteOp], *, session: int | None = None
    ) -> list[OpResult]:
        """One multi that applies `ops` only while `/controller_epoch` has that zkVersion.

        Raises ControllerMovedError if the check failed: nothing was changed. Otherwise
        returns the results of `ops` (without the check), errors included. ``session``:
        as in multi_fenced_batched.
        """
        return self.multi_fenced_batched(epoch_zk_version, [ops], session=session)[0]

    def multi_fenced_batched(
        self,
        epoch_zk_version: int,
        items: Iterable[Sequence[WriteOp]],
        *,
        max_ops: int = WRITE_BATCH_OPS,
        on_answered: AnsweredCallback | None = None,
        session: int | None = None,
    ) -> list[list[OpResult]]:
        """Apply independent items (each a list of ops, atomic on its own), fenced by the
        `/controller_epoch` zkVersion; raises ControllerMovedError if a check failed.

        ``session``: the `session_generation` the term was won in. Once that session has
        ended, every multi not yet handed to kazoo is refused and raises
        SessionExpiredError (as do those kazoo held for it): the zkVersion alone would let
        the term write on in the next session until another controller is elected.
        None: any session (tools and tests that hold no term).

        ``on_answered(indices, results)``: called with the final results of each packed
        multi's items as ZooKeeper answers it, while the later multis are still being
        applied, so the caller's work on the written items overlaps ZooKeeper's on the
        rest. Each item is reported exactly once, in no particular order across calls; a
        check that fails afterwards, or a later answer lost (ZOOKEEPER_UNAVAILABLE), still
        raises (the items reported were answered: written, or refused by their own op).
        The results are not kept besides: an empty list is returned (a deletion's 100,000
        answers held 27.5 MB to the end, for callers that had read them already). Items
        after a raise may never be sent (at most MULTIS_IN_FLIGHT multis await answers).
        """
        return self._multi_batched(
            items,
            Check(paths.CONTROLLER_EPOCH, epoch_zk_version),
            max_ops,
            fenced=True,
            on_answered=on_answered,
            session=session,
        )

    def multi_batched(
        self,
        items: Sequence[Sequence[WriteOp]],
        *,
        check: Check | None = None,
        max_ops: int = WRITE_BATCH_OPS,
    ) -> list[list[OpResult]]:
        """Apply independent items (each a list of ops, atomic on its own), each after
        `check` if given; returns each item's results (the check's first, if any).

        Items are packed many to a multi, and the multis pipelined: 10,000 partition
        updates cost a few round trips. A multi is all-or-nothing, so when an item's own
        op fails (say BadVersion on one partition), the items packed with it are retried
        each in a multi of its own to learn every item's result. A failed check fails the
        whole multi: those items are not retried.
        """
        return self._multi_batched(items, check, max_ops, fenced=False)

    def _multi_batched(
        self,
        items_in: Iterable[Sequence[WriteOp]],
        check: Check | None,
        max_ops: int,
        *,
        fenced: bool,
        on_answered: AnsweredCallback | None = None,
        session: int | None = None,
    ) -> list[list[OpResult]]:
        """multi_batched; ``fenced``: a failed check raises ControllerMovedError (looked
        at once per multi), and the results leave the check's out; ``session``: each
        multi bound to that session (`_call_in`); ``on_answered``: each answer handed to
        it and not kept (an empty list returned)."""
        prefix: list[WriteOp] = [check] if check is not None else []
        skip = len(prefix)
        keep = skip if fenced else 0  # where an item's results start in a multi's
        keeping = on_answered is None
        items: list[Sequence[WriteOp]] = []
        results: list[list[OpResult] | None] = []
        retry_alone: list[int] = []
        # Each multi is sent as soon as it is packed: ZooKeeper applies the first while the
        # items of the next are still being made (a generator may make them as we go).
        # At most MULTIS_IN_FLIGHT wait for their answers: past that the oldest answer is
        # taken first, and its request and items let go of. Sent all at once, a
        # deletion's 100,000 writes held every request, item and answer until the first
        # answer was read (the step's memory peak, tracemalloc).
        in_flight: deque[tuple[list[int], Any]] = deque()

        def take_oldest_answer() -> None:
            group, async_result = in_flight.popleft()
            res = list(self._answer(async_result))
            del async_result
            if fenced:
                self._raise_if_fenced(res)
            check_failed = bool(prefix) and is_own_failure(res[0])
            failed = any(is_own_failure(r) for r in res[skip:])
            if failed and not check_failed and len(group) > 1:
                retry_alone.extend(group)
                return
            head = res[keep:skip]
            pos = skip
            got: list[list[OpResult]] = []
            for i in group:
                n = len(items[i])
                got.append([*head, res[pos]] if n == 1 else head + res[pos : pos + n])
                items[i] = ()
                pos += n
            if keeping:
                for i, item_results in zip(group, got, strict=True):
                    results[i] = item_results
            elif on_answered is not None:
                on_answered(group, got)

        def send(group: list[int]) -> None:
            in_flight.append(
                (group, self._multi_async(self._packed(prefix, items, group), session))
            )
            if len(in_flight) > MULTIS_IN_FLIGHT:
                take_oldest_answer()

        current: list[int] = []
        size = 0
        nbytes = 0
        for i, item in enumerate(items_in):
            items.append(item)
            if keeping:
                results.append(None)
            # One op an item is the common case (a partition state each): no generator.
            item_bytes = _op_bytes(item[0]) if len(item) == 1 else sum(_op_bytes(op) for op in item)
            if current and (size + len(item) > max_ops or nbytes + item_bytes > WRITE_BATCH_BYTES):
                send(current)
                current, size, nbytes = [], 0, 0
            current.append(i)
            size += len(item)
            nbytes += item_bytes
        if current:
            send(current)
        while in_flight:
            take_oldest_answer()
        if retry_alone:
            alone = [(i, self._multi_async([*prefix, *items[i]], session)) for i in retry_alone]
            answered: list[int] = []
            answered_results: list[list[OpResult]] = []
            fenced_res: list[OpResult] | None = None
            try:
                for i, async_result in alone:
                    res = list(self._answer(async_result))
                    if fenced:
                        try:
                            self._raise_if_fenced(res)
                        except ControllerMovedError:
                            # ZooKeeper applied the retries before this one (in order):
                            # they are reported before the raise, so each write is
                            # logged; the ones after are fenced too.
                            fenced_res = res
                            break
                    answered.append(i)
                    answered_results.append(res[keep:])
            finally:
                # An answer lost (ConnectionLoss, a timeout, the session expired) leaves
                # the retries answered before it applied: reported before the raise too.
                if keeping:
                    for i, item_results in zip(answered, answered_results, strict=True):
                        results[i] = item_results
                elif on_answered is not None and answered:
                    on_answered(answered, answered_results)
            if fenced_res is not None:
                self._raise_if_fenced(fenced_res)
        return [r if r is not None else [] for r in results]

    @staticmethod
    def _packed(
        prefix: list[WriteOp], items: list[Sequence[WriteOp]], group: list[int]
    ) -> list[WriteOp]:
        return [*prefix, *(op for i in group for op in items[i])]

    @staticmethod
    def _raise_if_fenced(res: Sequence[OpResult]) -> None:
        if res and isinstance(res[0], (BadVersionError, NoNodeError)):
            raise ControllerMovedError(
                "the /controller_epoch zkVersion changed: another controller was elected"
            )


def _log_set_watches_failure(result: Any) -> None:
    if result.exception is not None:
        # The connection dropped again before the answer; the next reconnection re-arms.
        log.warning("SetWatches failed: %r", result.exception)


def event_kind(event: WatchedEvent) -> str:
    """CREATED, DELETED, CHANGED, CHILD or NONE: a stable name for logs and handlers."""
    return {
        EventType.CREATED: "CREATED",
        EventType.DELETED: "DELETED",
        EventType.CHANGED: "CHANGED",
        EventType.CHILD: "CHILD",
    }.get(event.type, "NONE")


# Errors a caller of this module may want to catch without importing kazoo.
__all__ = [
    "ZOOKEEPER_UNAVAILABLE",
    "BadVersionError",
    "Check",
    "ConnectionLoss",
    "ControllerMovedError",
    "Create",
    "Delete",
    "KazooException",
    "NoNodeError",
    "NodeExistsError",
    "OperationTimeoutError",
    "SessionExpiredError",
    "SetData",
    "WatchedEvent",
    "ZkClient",
    "ZnodeStat",
    "ZooKeeperClientTimeout",
    "ZookeeperError",
    "event_kind",
    "is_error",
    "is_own_failure",
]
