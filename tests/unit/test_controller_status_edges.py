"""`zkctl controller`'s lines at their boundaries: a duration is in milliseconds below ten
seconds and in seconds from there; only the JSON true in "active" means acting."""

from __future__ import annotations

from controller.events import QueueTimeStats
from tests.unit.test_controller_status_text import status
from zkctl.controller_status import describe


def failover_line(total_ms: float) -> str:
    doc = status(
        last_failover={"total_ms": total_ms, "partitions": 2, "brokers": 2, "load_ms": 9_999.9}
    )
    lines = [line for line in describe(doc, now=1060.0) if line.startswith("Last failover")]
    assert len(lines) == 1
    return lines[0]


def test_a_duration_is_in_milliseconds_below_ten_seconds_then_in_seconds() -> None:
    assert ": 2500.0 ms for 2 partitions" in failover_line(2_500.0)
    assert "(context loaded after 9999.9 ms," in failover_line(2_500.0)
    assert ": 10.0 s for 2 partitions" in failover_line(10_000.0)


def test_only_true_in_active_means_acting_as_controller() -> None:
    """A damaged file's "active": 1 or "yes" is no JSON true: the controller it names."""
    for active in (1, "yes"):
        lines = describe(status(active=active, active_controller_id=3), now=1060.0)
        assert lines[0] == "Not acting as controller (the controller it knows of: broker 3)"


def test_a_failover_whose_election_time_is_unset_is_said_without_a_clock() -> None:
    """FailoverTimings.elected_at defaults to 0.0: no time known, not 1970's midnight."""
    doc = status(last_failover={"elected_at": 0.0, "total_ms": 5.0, "partitions": 1, "brokers": 1})
    lines = describe(doc, now=1060.0)
    assert [line for line in lines if line.startswith("Last failover")] == [
        "Last failover: 5.0 ms for 1 partition and 1 broker (context loaded after ?,"
        " UpdateMetadata queued after ?)"
    ]


def test_a_start_time_ahead_of_the_clock_is_up_0_s() -> None:
    """The file's clock and the reader's may differ: never a negative uptime."""
    doc = status()
    doc.update(started_at=1100.0)
    assert "; up 0 s;" in describe(doc, now=1060.0)[-1]
    assert "; up 60 s;" in describe(doc, now=1160.0)[-1]


def test_a_boolean_is_no_count() -> None:
    """JSON true is not the number 1 (Python's bool is an int): a count is unknown."""
    doc = status(partitions=True, offline_partitions=False)
    doc.update(partitions=True, leaders=True, requests_handled=False)
    lines = describe(doc, now=1060.0)
    assert lines[0] == "Acting as controller in epoch 2: ? partitions"
    assert "hosts" not in lines[-1]
    assert "served" not in lines[-1]


def test_no_timing_line_before_any_event_was_timed() -> None:
    """A fresh controller's empty snapshots say nothing (not "p50 ? ms (0 events)")."""
    empty = QueueTimeStats().snapshot()
    lines = describe(status(event_queue_time_ms=empty, event_process_time_ms=empty), now=1060.0)
    assert not [line for line in lines if line.startswith("Time an event")]
    assert "Events waiting: 0; idle" in lines


def test_a_broker_leading_nothing_says_leads_0() -> None:
    doc = status()
    doc.update(leaders=0, partitions=0)
    assert "; hosts 0 replicas, leads 0;" in describe(doc, now=1060.0)[-1]


def test_text_that_is_not_printable_is_quoted_on_its_line() -> None:
    """The file is read from disk: a newline or an escape in a string stays on the line,
    quoted (repr), rather than starting another line or driving the terminal."""
    lines = describe(status(current_event="Startup\n\x1b[2J"), now=1060.0)
    assert "Events waiting: 0; working on 'Startup\\n\\x1b[2J'" in lines
    doc = status()
    doc.update(offline_log_dirs=["/disks/\nb"])
    assert "log directories failed: '/disks/\\nb' (" in describe(doc, now=1060.0)[-1]
