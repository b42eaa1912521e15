"""Fixtures of the unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from broker.state_change_log import StateChangeLog


@pytest.fixture(autouse=True)
def _close_state_change_logs(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Close every state-change log a test opened (many build a broker's parts, a
    ReplicaManager, KafkaApis, with one, and drop them): each held its file open until
    the garbage collector found it, hundreds of file descriptors over a run."""
    opened: list[StateChangeLog] = []
    init = StateChangeLog.__init__

    def tracked(self: StateChangeLog, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        opened.append(self)

    monkeypatch.setattr(StateChangeLog, "__init__", tracked)
    yield
    for state_log in opened:
        state_log.close()
