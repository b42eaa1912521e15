"""`zkctl controller`'s reading of a status file: what a person sees without --json."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.events import QueueTimeStats
from zkctl.controller_status import describe, failed_log_dirs


def status(**controller: Any) -> dict[str, Any]:
    waited, took = QueueTimeStats(), QueueTimeStats(keep=4)
    for ms in (1.0, 2.0, 30.0):
        waited.record(ms)
    for ms in (0.5, 0.5, 0.5, 0.5, 90.0, 0.5):
        took.record(ms)
    doc: dict[str, Any] = {
        "broker_id": 1,
        "pid": 4242,
        "broker_epoch": 20,
        "started_at": 1000.0,
        "zookeeper_connected": True,
        "partitions": 7,
        "leaders": 4,
        "requests_handled": 1234,
        "controller": {
            "broker_id": 1,
            "active": True,
            "active_controller_id": 1,
            "controller_epoch": 2,
            "event_queue_size": 0,
            "event_queue_time_ms": waited.snapshot(),
            "event_process_time_ms": took.snapshot(),
            "current_event": None,
            "channel_queue_sizes": {"10": 3, "2": 0, "1": 0},
            "channel_queue_time_ms": {"10": waited.snapshot(), "2": QueueTimeStats().snapshot()},
            "channel_update_metadata_superseded": 0,
            "offline_partitions": 1,
            "partitions": 8,
            "unclean_elections": 0,
            "failovers": 1,
            "resignations": 0,
            "last_failover": {
                "elected_at": 1000.5,
                "load_ms": 7.42,
                "update_metadata_ms": 8.5,
                "total_ms": 12_345.0,
                "partitions": 100_000,
                "brokers": 2,
            },
        },
    }
    doc["controller"].update(controller)
    # As the broker writes it and the command reads it back: JSON (broker ids as strings).
    return dict(json.loads(json.dumps(doc)))


def test_an_acting_controller_is_read_in_a_few_lines() -> None:
    lines = describe(status(), now=1060.0)
    assert lines[0] == "Acting as controller in epoch 2: 8 partitions (1 offline)"
    assert "Events waiting: 0; idle" in lines
    assert "Time an event waited: p50 2.0 ms, p99 30.0 ms (3 events), max 30.0 ms" in lines
    # Percentiles of the events kept (4 here), the max of all six.
    assert "Time an event took: p50 0.5 ms, p99 90.0 ms (the last 4 of 6 events), max 90.0 ms" in (
        lines
    )
    # Brokers in numeric order although JSON made their ids strings.
    assert "Requests waiting to be sent: broker 1: 0, broker 2: 0, broker 10: 3" in lines
    # A broker whose requests were timed (broker 2 has had none sent yet).
    assert "Time a request waited to be sent: broker 10: p99 30.0 ms, max 30.0 ms" in lines
    assert "Failovers: 1, resignations: 0, unclean elections: 0" in lines
    last = next(line for line in lines if line.startswith("Last failover at "))
    assert last.endswith(
        ": 12.3 s for 100,000 partitions and 2 brokers (context loaded after 7.4 ms,"
        " UpdateMetadata queued after 8.5 ms)"
    )
    assert lines[-1] == (
        "Broker: broker epoch 20; pid 4242; up 60 s; ZooKeeper connected; hosts 7 replicas,"
        " leads 4; 1,234 requests served"
    )


def test_one_of_a_kind_is_said_in_the_singular() -> None:
    """A fresh one-broker cluster's controller: 1 broker, 1 partition, 1 event."""
    waited = QueueTimeStats()
    waited.record(3.0)
    doc = status(
        partitions=1,
        offline_partitions=0,
        event_queue_time_ms=waited.snapshot(),
        last_failover={"total_ms": 5.0, "partitions": 0, "brokers": 1, "load_ms": 1.0},
    )
    doc.update(partitions=1, leaders=1, requests_handled=1)
    lines = describe(doc, now=1060.0)
    assert lines[0] == "Acting as controller in epoch 2: 1 partition (0 offline)"
    assert "Time an event waited: p50 3.0 ms, p99 3.0 ms (1 event), max 3.0 ms" in lines
    assert "Last failover: 5.0 ms for 0 partitions and 1 broker (context loaded after" in (
        " ".join(lines)
    )
    assert lines[-1] == (
        "Broker: broker epoch 20; pid 4242; up 60 s; ZooKeeper connected; hosts 1 replica,"
        " leads 1; 1 request served"
    )
    # Not a number: the plural, as for any count but one.
    assert describe(status(partitions="x"), now=1060.0)[0].endswith(": ? partitions (1 offline)")


def test_failed_log_directories_are_said() -> None:
    doc = status()
    doc.update(offline_log_dirs=["/disks/b", "/disks/c"], offline_partitions=1500)
    assert describe(doc, now=1060.0)[-1].endswith(
        "; 1,234 requests served; log directories failed: /disks/b, /disks/c"
        " (1,500 of its partitions offline until it restarts)"
    )
    assert failed_log_dirs({"offline_log_dirs": [], "offline_partitions": 0}) is None
    assert failed_log_dirs({"offline_log_dirs": ["/d"]}) == (
        "log directories failed: /d (its partitions there offline until it restarts)"
    )


def test_restarts_of_the_zookeeper_connection_are_said_when_there_were_any() -> None:
    """kazoo's connection thread ended by an error (an answer out of order) and started
    again with a new session: worth an operator's look, said only when it happened."""
    doc = status()
    doc.update(zookeeper_connection_restarts=0)
    assert "started again" not in describe(doc, now=1060.0)[-1]
    doc.update(zookeeper_connection_restarts=1)
    assert (
        "ZooKeeper connected; its ZooKeeper connection started again 1 time after an error;"
        in describe(doc, now=1060.0)[-1]
    )
    doc.update(zookeeper_connection_restarts=3)
    assert "started again 3 times after an error" in describe(doc, now=1060.0)[-1]


def test_a_broker_not_acting_as_controller_says_whom_it_knows() -> None:
    """The file predating the election, or a resigned zombie's."""
    lines = describe(
        status(
            active=False,
            active_controller_id=3,
            controller_epoch=None,
            current_event="Startup",
            channel_queue_sizes={},
            channel_queue_time_ms={},
            failovers=0,
        ),
        now=1001.0,
    )
    assert lines[0] == "Not acting as controller (the controller it knows of: broker 3)"
    assert "Events waiting: 0; working on Startup" in lines
    assert not [
        line
        for line in lines
        if line.startswith(("Requests waiting", "Time a request", "Last failover"))
    ]
    assert "superseded" not in " ".join(lines)


def test_a_broker_elected_but_not_done_with_its_failover_says_so() -> None:
    """The status file says active once the failover is done; before, the broker knows
    itself as the controller."""
    lines = describe(
        status(active=False, active_controller_id=1, controller_epoch=None), now=1001.0
    )
    assert lines[0] == "Taking over as controller: its failover is under way"


def test_superseded_update_metadata_is_counted_when_there_is_any() -> None:
    lines = describe(status(channel_update_metadata_superseded=12), now=1001.0)
    assert (
        "Requests waiting to be sent: broker 1: 0, broker 2: 0, broker 10: 3; 12 UpdateMetadata"
        " dropped as superseded" in lines
    )


# What a damaged or foreign file could hold, edge numbers (an infinite float from
# a Python writer, an int past a float's range, a time past the platform's) drawn often.
edges = st.sampled_from([float("inf"), -float("inf"), 1e300, -1e300, 10**400, -1, 0, "\n", ""])
json_values = st.recursive(
    edges
    | st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300)
@given(
    top=st.dictionaries(
        st.sampled_from(
            [
                "pid",
                "broker_epoch",
                "started_at",
                "zookeeper_connected",
                "zookeeper_connection_restarts",
                "partitions",
                "leaders",
                "requests_handled",
                "controller",
            ]
        ),
        json_values,
    ),
    controller=st.dictionaries(st.sampled_from(sorted(status()["controller"])), json_values),
    nested=st.booleans(),
)
def test_any_status_document_is_described_without_an_error(
    top: dict[str, Any], controller: dict[str, Any], nested: bool
) -> None:
    """The file is read from disk: whatever it holds, some lines come out, no traceback."""
    if nested:
        top["controller"] = controller
    lines = describe(top, now=0.0)
    assert lines
    assert all(isinstance(line, str) and "\n" not in line for line in lines)
