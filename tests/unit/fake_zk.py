"""An in-memory stand-in for zkdata.client.ZkClient, for the controller's election and
resignation logic: one session's view, multis atomic with an error per failed op. Several
fakes can share one tree (`share`) to stand for several sessions of one ensemble."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError
from kazoo.protocol.states import ZnodeStat

from zkdata.client import Check, Create, Delete, SetData, WriteOp


class FakeZk:
    def __init__(self, session_id: int = 0x100) -> None:
        self.nodes: dict[str, tuple[bytes, ZnodeStat]] = {}
        self.session_id = session_id
        self.session_timeout_ms = 6000
        self._zxid = itertools.count(10)
        self.handlers: dict[str, list[Callable[..., None]]] = {}
        self.listeners: list[Callable[..., None]] = []

    def share(self, session_id: int) -> FakeZk:
        """Another session of the same ensemble: the same tree."""
        other = FakeZk(session_id)
        other.nodes, other._zxid = self.nodes, self._zxid
        return other

    def put(self, path: str, data: bytes, *, owner: int = 0) -> None:
        z = next(self._zxid)
        self.nodes[path] = (data, ZnodeStat(z, z, 0, 0, 0, 0, 0, owner, len(data), 0, z))

    # --- what the code under test calls -------------------------------------------------

    def get(self, path: str, *, watch: bool = False) -> tuple[bytes, ZnodeStat] | None:
        return self.nodes.get(path)

    def exists(self, path: str, *, watch: bool = False) -> ZnodeStat | None:
        got = self.nodes.get(path)
        return None if got is None else got[1]

    def get_children(self, path: str, *, watch: bool = False) -> list[str]:
        return []

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> tuple[str, ZnodeStat]:
        if path in self.nodes:
            raise NodeExistsError()
        self.put(path, data, owner=self.session_id if ephemeral else 0)
        return path, self.nodes[path][1]

    def multi(self, ops: Sequence[WriteOp]) -> list[Any]:
        saved = dict(self.nodes)
        results: list[Any] = []
        for op in ops:
            try:
                results.append(self._apply(op))
            except Exception as e:  # an op's error is its result
                self.nodes.clear()
                self.nodes.update(saved)
                return (
                    [RolledBackError() for _ in results]
                    + [e]
                    + [RolledBackError() for _ in ops[len(results) + 1 :]]
                )
        return results

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
            self.put(op.path, op.data, owner=self.session_id if op.ephemeral else 0)
            return op.path
        if isinstance(op, Delete):
            self._existing(op.path, op.version)
            del self.nodes[op.path]
            return True
        if isinstance(op, SetData):
            stat = self._existing(op.path, op.version)[1]
            stat = stat._replace(version=stat.version + 1, mzxid=next(self._zxid))
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
