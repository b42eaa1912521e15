"""RequestTracker: an event's broker requests counted until every one is answered; what
waits for that (a ControlledShutdown answer) runs once, when it happens."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from broker.state_change_log import open_for_broker
from controller.controller import RequestTracker
from wire.api import ApiKey


def request(api: ApiKey, broker_id: int) -> Any:
    return SimpleNamespace(api_key=api, broker_id=broker_id)


def tracker(tmp_path: Path) -> RequestTracker:
    return RequestTracker("ControlledShutdown", 0.0, open_for_broker([str(tmp_path)], 1), 3)


def test_waiters_run_once_when_every_request_is_answered(tmp_path: Path) -> None:
    t = tracker(tmp_path)
    calls: list[str] = []
    lai, umr = request(ApiKey.LEADER_AND_ISR, 2), request(ApiKey.UPDATE_METADATA, 3)
    t.add([lai, umr])
    t.when_done(lambda: calls.append("first"))
    t.ack(lai)
    t.ack(umr)
    assert calls == []  # the event is still running: more requests may come
    t.close()
    assert calls == ["first"]
    t.when_done(lambda: calls.append("late"))  # already done: at once
    assert calls == ["first", "late"]
    [line] = (tmp_path / "state-change.log").read_text().splitlines()
    record = json.loads(line)
    assert record["event"] == "requests_acknowledged"
    assert record["requests"] == {"LEADER_AND_ISR": 1, "UPDATE_METADATA": 1}


def test_an_abandoned_request_completes_it_too(tmp_path: Path) -> None:
    t = tracker(tmp_path)
    calls: list[int] = []
    lai = request(ApiKey.LEADER_AND_ISR, 2)
    t.add([lai])
    t.close()
    t.when_done(lambda: calls.append(1))
    assert calls == []
    t.abandon(lai)  # the broker left before answering
    assert calls == [1]


def test_an_event_that_sent_nothing_completes_when_it_finishes(tmp_path: Path) -> None:
    t = tracker(tmp_path)
    calls: list[int] = []
    t.when_done(lambda: calls.append(1))
    t.close()
    assert calls == [1]
    assert (
        not (tmp_path / "state-change.log").exists()
        or not (tmp_path / "state-change.log").read_text()
    )
