"""An in-memory stand-in for zkdata.client.ZkClient: one session's view, multis atomic
with an error per failed op, ZooKeeper's rules for creates (the parent must exist) and
deletes (no children left), the batched reads and fenced writes the controller uses, and
registered watch handlers fired by hand (`fire`). Several fakes can share one tree
(`share`) to stand for several sessions of one ensemble. `fail_next` makes the next
requests fail (a timeout, a lost connection) without losing the session. `expire` ends
the session as kazoo does (its ephemerals gone, the listeners told LOST) and starts the
next one at once; a write bound to an ended session (``session=``) is refused as
ZkClient refuses it."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)
from kazoo.protocol.states import EventType, KeeperState, WatchedEvent, ZnodeStat

from zkdata import paths
from zkdata.client import Check, ControllerMovedError, Create, Delete, SetData, WriteOp

T = TypeVar("T")

_EVENT_TYPES = {
    "CREATED": EventType.CREATED,
    "CHANGED": EventType.CHANGED,
    "DELETED": EventType.DELETED,
    "CHILD": EventType.CHILD,
}


def _next_version(version: int) -> int:
    """The version a setData gives: ZooKeeper's DataTree keeps it in a Java int, which
    wraps from 2**31 - 1 to -2**31."""
    return version + 1 if version < 2**31 - 1 else -(2**31)


class FakeZk:
    def __init__(self, session_id: int = 0x100) -> None:
        self.nodes: dict[str, tuple[bytes, ZnodeStat]] = {}
        self.session_id = session_id
        self.session_timeout_ms = 6000
        self.connection_restarts = 0  # ZkClient's: kazoo's loop never ends here
        self.request_timeout_ms = 6000  # ZkClient._answer's bound
        self._zxid = itertools.count(10)
        self.handlers: dict[str, list[Callable[..., None]]] = {}
        self.listeners: list[Callable[..., None]] = []
        # Raised, in order, by the next requests (reads and multis) of this session.
        self.fail_next: list[Exception] = []
        self.session_generation = 0

    def expire(self, new_session_id: int) -> None:
        """The session ends (its ephemerals with it; the listeners hear LOST, after the
        generation moved on, as ZkClient's do) and the next one, ``new_session_id``,
        starts at once."""
        old = self.session_id
        for path in [p for p, (_d, st) in self.nodes.items() if st.ephemeralOwner == old]:
            del self.nodes[path]
        self.session_generation += 1
        for listener in list(self.listeners):
            listener("LOST")
        self.session_id = new_session_id

    def _check_session(self, session: int | None) -> None:
        if session is not None and session != self.session_generation:
            raise SessionExpiredError("the session this request was made for has ended")

    def share(self, session_id: int) -> FakeZk:
        """Another session of the same ensemble: the same tree."""
        other = FakeZk(session_id)
        other.nodes, other._zxid = self.nodes, self._zxid
        return other

    def put(self, path: str, data: bytes, *, owner: int = 0) -> None:
        z = next(self._zxid)
        self.nodes[path] = (data, ZnodeStat(z, z, 0, 0, 0, 0, 0, owner, len(data), 0, z))

    def set_data(self, path: str, data: bytes) -> None:
        """Someone's setData: a new version, the same czxid and owner."""
        old = self.nodes[path][1]
        self.nodes[path] = (
            data,
            old._replace(version=_next_version(old.version), mzxid=next(self._zxid)),
        )

    def fire(self, path: str, kind: str) -> None:
        """The watch on ``path`` fires (kind: CREATED, CHANGED, DELETED or CHILD)."""
        event = WatchedEvent(_EVENT_TYPES[kind], KeeperState.CONNECTED, path)
        for handler in list(self.handlers.get(path, [])):
            handler(event)

    def children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted(
            {
                p[len(prefix) :]
                for p in self.nodes
                if p.startswith(prefix) and "/" not in p[len(prefix) :]
            }
        )

    def _maybe_fail(self) -> None:
        if self.fail_next:
            raise self.fail_next.pop(0)

    # --- what the code under test calls -------------------------------------------------

    def get(self, path: str, *, watch: bool = False) -> tuple[bytes, ZnodeStat] | None:
        self._maybe_fail()
        return self.nodes.get(path)

    def exists(
        self,
        path: str,
        *,
        watch: bool = False,
        watcher: Callable[[WatchedEvent], None] | None = None,
    ) -> ZnodeStat | None:
        self._maybe_fail()
        got = self.nodes.get(path)
        return None if got is None else got[1]

    def get_children(self, path: str, *, watch: bool = False) -> list[str] | None:
        self._maybe_fail()
        return self.children(path) if path in self.nodes else None

    def get_many(
        self, path_list: Iterable[str], *, watch: bool = False, batch: int = 0
    ) -> list[tuple[bytes, ZnodeStat] | None]:
        self._maybe_fail()
        return [self.nodes.get(p) for p in path_list]

    def get_many_sent(
        self, path_list: Iterable[str], *, batch: int = 0
    ) -> Callable[[], list[tuple[bytes, ZnodeStat] | None]]:
        got = self.get_many(path_list)
        return lambda: got

    def get_children_many(
        self, path_list: Iterable[str], *, watch: bool = False, batch: int = 0
    ) -> list[list[str] | None]:
        self._maybe_fail()
        return [self.children(p) if p in self.nodes else None for p in path_list]

    def ensure_paths(self, path_list: Iterable[str]) -> None:
        for path in path_list:
            parts = path.strip("/").split("/")
            for i in range(1, len(parts) + 1):
                prefix = "/" + "/".join(parts[:i])
                if prefix not in self.nodes:
                    self._apply(Create(prefix, b""))

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> tuple[str, ZnodeStat]:
        self._maybe_fail()
        parent = path.rsplit("/", 1)[0]
        if make_parents and parent and parent not in self.nodes:
            self.ensure_paths([parent])  # (kazoo's makepath: the parents, then the node)
        self._apply(Create(path, data, ephemeral=ephemeral))
        return path, self.nodes[path][1]

    def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        self._maybe_fail()
        return self._apply(SetData(path, data, version))

    def delete(self, path: str, version: int = -1) -> bool:
        """False if it was already gone (as ZkClient.delete)."""
        self._maybe_fail()
        try:
            self._apply(Delete(path, version))
        except NoNodeError:
            return False
        return True

    def until_connected(self, fn: Callable[[], T], *, cancelled: Any = None) -> T:
        """The session never loses its connection here: ``fn()`` once."""
        return fn()

    def wait_connected(self, timeout_s: float) -> bool:
        """The session never loses its connection here."""
        return True

    def multi(self, ops: Sequence[WriteOp], *, session: int | None = None) -> list[Any]:
        self._check_session(session)
        self._maybe_fail()
        saved = dict(self.nodes)
        results: list[Any] = []
        for op in ops:
            try:
                results.append(self._apply(op))
            except Exception as e:  # an op's error is its result
                self.nodes.clear()
                self.nodes.update(saved)
                # ZooKeeper's answer: the ops before rolled back, those after not tried.
                return (
                    [RolledBackError() for _ in results]
                    + [e]
                    + [RuntimeInconsistency() for _ in ops[len(results) + 1 :]]
                )
        return results

    def multi_fenced_batched(
        self,
        epoch_zk_version: int,
        items: Iterable[Sequence[WriteOp]],
        *,
        max_ops: int = 500,
        on_answered: Callable[[list[int], list[list[Any]]], None] | None = None,
        session: int | None = None,
    ) -> list[list[Any]]:
        """Each item in a multi of its own after the epoch check (as ZkClient's results;
        with ``on_answered``, handed to it and not returned, as ZkClient's)."""
        out: list[list[Any]] = []
        for i, item in enumerate(list(items)):
            self._check_session(session)
            res = self.multi([Check(paths.CONTROLLER_EPOCH, epoch_zk_version), *item])
            if isinstance(res[0], (BadVersionError, NoNodeError)):
                raise ControllerMovedError("the /controller_epoch zkVersion changed")
            if on_answered is not None:
                on_answered([i], [res[1:]])
            else:
                out.append(res[1:])
        return out

    def multi_fenced(
        self, epoch_zk_version: int, ops: Sequence[WriteOp], *, session: int | None = None
    ) -> list[Any]:
        return self.multi_fenced_batched(epoch_zk_version, [ops], session=session)[0]

    def _existing(self, path: str, version: int) -> tuple[bytes, ZnodeStat]:
        got = self.nodes.get(path)
        if got is None:
            raise NoNodeError()
        if version != -1 and got[1].version != version:
            raise BadVersionError()
        return got

    def _apply(self, op: WriteOp) -> Any:
        if isinstance(op, Check):
            self._existing(op.path, op.version)
            return True
        if isinstance(op, Create):
            if op.path in self.nodes:
                raise NodeExistsError()
            parent = op.path.rsplit("/", 1)[0]
            if parent and parent not in self.nodes:
                raise NoNodeError()
            self.put(op.path, op.data, owner=self.session_id if op.ephemeral else 0)
            return op.path
        if isinstance(op, Delete):
            self._existing(op.path, op.version)
            if self.children(op.path):
                raise NotEmptyError()
            del self.nodes[op.path]
            return True
        if isinstance(op, SetData):
            stat = self._existing(op.path, op.version)[1]
            stat = stat._replace(version=_next_version(stat.version), mzxid=next(self._zxid))
            self.nodes[op.path] = (op.data, stat)
            return stat
        raise TypeError(op)

    def register_handler(self, path: str, handler: Callable[..., None]) -> None:
        self.handlers.setdefault(path, []).append(handler)

    def unregister_handler(self, path: str, handler: Callable[..., None]) -> None:
        if handler in self.handlers.get(path, []):
            self.handlers[path].remove(handler)

    def unregister_all_handlers(self) -> None:
        self.handlers.clear()

    def add_state_listener(self, listener: Callable[..., None]) -> None:
        self.listeners.append(listener)
