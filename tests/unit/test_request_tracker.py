"""RequestTracker: an event's broker requests counted until every one is answered (then
logged); what waits for the requests sent so far (a ControlledShutdown answer, once its
ZooKeeper writes are made) runs once, when those are answered."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import cast

from broker.state_change_log import open_for_broker
from controller.request_batch import BrokerRequest
from controller.request_tracker import RequestTracker
from wire.api import ApiKey


def request(api: ApiKey, broker_id: int) -> BrokerRequest:
    return BrokerRequest(broker_id, api, 0, dict)


def tracker(tmp_path: Path) -> RequestTracker:
    return RequestTracker("ControlledShutdown", 0.0, open_for_broker([str(tmp_path)], 1), 3)


def logged(tmp_path: Path) -> list[dict[str, object]]:
    path = tmp_path / "state-change.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_waiters_run_once_when_the_requests_sent_before_are_answered(
    tmp_path: Path,
) -> None:
    t = tracker(tmp_path)
    calls: list[str] = []
    lai, umr = t.track([request(ApiKey.LEADER_AND_ISR, 2), request(ApiKey.UPDATE_METADATA, 3)])
    assert lai.tracker is t
    assert umr.tracker is t
    t.when_answered(lambda: calls.append("first"))
    t.ack(lai)
    assert calls == []
    t.ack(umr)
    # Not waiting for the event to finish: the rest of it builds and sends requests that
    # the waiter does not wait for (the handler registers it once its writes are made).
    assert calls == ["first"]
    assert logged(tmp_path) == []  # the event's requests are logged once it finished
    t.when_answered(lambda: calls.append("late"))  # already so: at once
    assert calls == ["first", "late"]
    t.close()
    assert calls == ["first", "late"]
    [record] = logged(tmp_path)
    assert record["event"] == "requests_acknowledged"
    assert record["requests"] == {"LEADER_AND_ISR": 1, "UPDATE_METADATA": 1}
    assert record["sent_ms_by_api"] == {}  # the channel never said they were written


def test_when_each_api_was_last_written_is_logged(tmp_path: Path) -> None:
    """From when the controller learned of the event: a failover's UpdateMetadata sent
    (the issue's measure), apart from when it was answered."""
    t = RequestTracker("ControllerChange", time.monotonic(), open_for_broker([str(tmp_path)], 1), 3)
    to_2, to_3 = t.track([request(ApiKey.UPDATE_METADATA, 2), request(ApiKey.UPDATE_METADATA, 3)])
    t.written(to_2)
    time.sleep(0.02)
    t.written(to_3)
    written_at = time.monotonic()
    t.ack(to_2)
    t.ack(to_3)
    t.close()
    [record] = logged(tmp_path)
    sent = cast(dict[str, float], record["sent_ms_by_api"])["UPDATE_METADATA"]
    assert 20 <= sent <= (written_at - t.learned_at) * 1000 + 0.1  # the last copy's
    assert sent <= cast(dict[str, float], record["acked_ms_by_api"])["UPDATE_METADATA"]


def test_a_waiter_does_not_wait_for_what_is_sent_after_it(tmp_path: Path) -> None:
    t = tracker(tmp_path)
    calls: list[str] = []
    [moves] = t.track([request(ApiKey.LEADER_AND_ISR, 2)])
    t.when_answered(lambda: calls.append("moves applied"))
    [isr_changes] = t.track([request(ApiKey.LEADER_AND_ISR, 2)])
    t.close()
    t.ack(moves)
    assert calls == ["moves applied"]
    assert logged(tmp_path) == []  # the event's requests are not all answered yet
    t.ack(isr_changes)
    assert calls == ["moves applied"]
    assert [r["event"] for r in logged(tmp_path)] == ["requests_acknowledged"]


def test_a_request_answered_as_a_copy_counts(tmp_path: Path) -> None:
    """A channel answers an UpdateMetadata it dropped for a newer one with a copy of it."""
    t = tracker(tmp_path)
    calls: list[int] = []
    [umr] = t.track([request(ApiKey.UPDATE_METADATA, 2)])
    t.when_answered(lambda: calls.append(1))
    t.close()
    t.ack(dataclasses.replace(umr, update_metadata_rows=None))
    assert calls == [1]


def test_an_abandoned_request_counts_too(tmp_path: Path) -> None:
    t = tracker(tmp_path)
    calls: list[int] = []
    [lai] = t.track([request(ApiKey.LEADER_AND_ISR, 2)])
    t.close()
    t.when_answered(lambda: calls.append(1))
    assert calls == []
    t.abandon(lai)  # the broker left before answering
    assert calls == [1]


def test_an_event_that_sent_nothing_is_answered_at_once(tmp_path: Path) -> None:
    t = tracker(tmp_path)
    calls: list[int] = []
    t.when_answered(lambda: calls.append(1))
    assert calls == [1]
    t.close()
    assert calls == [1]
    assert logged(tmp_path) == []


def test_an_answer_after_the_last_logs_nothing_more(tmp_path: Path) -> None:
    t = tracker(tmp_path)
    [lai] = t.track([request(ApiKey.LEADER_AND_ISR, 2)])
    t.close()
    t.ack(lai)
    t.abandon(lai)  # said again: the event was logged already
    assert [r["event"] for r in logged(tmp_path)] == ["requests_acknowledged"]
