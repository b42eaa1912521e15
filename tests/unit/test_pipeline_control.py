"""Controller tenures, gaps, broker losses and incidents from control events (pure)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from pipeline import control

ANALYTICS = Path(__file__).resolve().parents[2] / "docs" / "analytics.md"


def ev(ts: int, broker: int, event: str, **fields: Any) -> dict[str, Any]:
    return {"ts": ts, "broker": broker, "event": event, **fields}


def elected(ts: int, broker: int, epoch: int) -> dict[str, Any]:
    return ev(ts, broker, "controller_elected", controller=broker, controller_epoch=epoch)


def seen(ts: int, broker: int, controller: int) -> dict[str, Any]:
    return ev(ts, broker, "controller_seen", controller=controller, reason="x")


def start() -> list[dict[str, Any]]:
    """Three brokers; broker 1 is controller of epoch 1."""
    return [
        ev(0, 1, "broker_registered"),
        ev(1, 2, "broker_registered"),
        ev(2, 3, "broker_registered"),
        elected(5, 1, 1),
        seen(6, 2, 1),
        seen(7, 3, 1),
    ]


def killed_controller() -> list[dict[str, Any]]:
    """SIGKILL of controller 1: its session expires, 2 and 3 see /controller go, 2 wins."""
    return [
        *start(),
        seen(6000, 2, -1),
        seen(6002, 3, -1),
        elected(6004, 2, 2),
        seen(6005, 3, 2),
        ev(6030, 2, "controller_failover", controller_epoch=2, total_ms=25.0),
        ev(9000, 1, "broker_registered"),
        ev(9002, 2, "broker_change", controller_epoch=2, new=[1], dead=[], bounced=[]),
    ]


def test_a_killed_controller_is_lost_when_the_others_notice() -> None:
    r = control.analyse(killed_controller())
    t1, t2 = r.tenures
    assert (t1.epoch, t1.broker, t1.start_ts, t1.end_ts, t1.end_reason) == (1, 1, 5, 6000, "lost")
    assert (t2.epoch, t2.broker, t2.start_ts, t2.end_ts, t2.end_reason) == (
        2,
        2,
        6004,
        None,
        "open",
    )
    assert t2.failover_done_ts == 6030
    assert t2.failover_ms == 25.0
    assert [(g.after_epoch, g.before_epoch, g.duration_ms) for g in r.gaps] == [(1, 2, 4)]
    [inc] = r.incidents
    assert (inc.kind, inc.broker, inc.lost_ts, inc.cause) == ("controller", 1, 6000, "lost")
    assert (inc.new_controller, inc.new_epoch, inc.new_controller_ts) == (2, 2, 6004)
    assert inc.failover_done_ts == 6030
    assert inc.back_ts == 9000
    assert r.deaths == [control.Death(1, 6000, 9000, inc.incident_id)]


@pytest.mark.parametrize("reverse", [False, True])
def test_a_none_sighting_and_the_next_in_one_millisecond_end_the_old_tenure_in_any_order(
    reverse: bool,
) -> None:
    """Broker 3 saw /controller go and, in the same millisecond, lost the election that
    followed to broker 2 (a -1, then a sighting of 2, as Controller._maybe_resign and
    _elect log them). The Spark job hands `analyse` the lines in no set order (a
    shuffle): read with the sighting of 2 first, the -1 used to end epoch 2 at its
    start, a second controller incident, broker 2 lost."""
    events = [e for e in killed_controller() if not (e["broker"] == 3 and e["ts"] >= 6000)]
    events += [seen(6005, 3, -1), seen(6005, 3, 2)]
    r = control.analyse(events[::-1] if reverse else events)
    t1, t2 = r.tenures
    assert (t1.end_ts, t1.end_reason) == (6000, "lost")
    assert (t2.end_ts, t2.end_reason) == (None, "open")
    assert [(i.kind, i.broker, i.controller_epoch) for i in r.incidents] == [("controller", 1, 1)]
    assert [d.broker for d in r.deaths] == [1]


def test_a_none_sighting_and_an_election_in_one_millisecond_end_the_old_tenure_lost() -> None:
    """Broker 2 saw /controller go and won the election that followed in the same
    millisecond (Controller._maybe_resign logs the -1, then _elect the election). By
    event name the election came first, which took broker 2's belief away before its -1:
    epoch 1 ended superseded (a cause no incident is documented with), not lost."""
    events = [
        ev(0, 1, "broker_registered"),
        ev(1, 2, "broker_registered"),
        elected(5, 1, 1),
        seen(6, 2, 1),
        seen(6000, 2, -1),
        elected(6000, 2, 2),
    ]
    r = control.analyse(events)
    t1, _t2 = r.tenures
    assert (t1.end_ts, t1.end_reason) == (6000, "lost")
    assert [(i.kind, i.broker, i.cause) for i in r.incidents] == [("controller", 1, "lost")]


def test_a_late_notice_of_an_old_loss_does_not_end_the_new_tenure() -> None:
    events = killed_controller()
    # Broker 3's watch fires after the election (still believing in broker 1).
    events = [e for e in events if not (e["broker"] == 3 and e["ts"] in (6002, 6005))]
    events += [seen(6010, 3, -1), seen(6011, 3, 2)]
    r = control.analyse(events, tol_ms=3)
    assert r.tenures[0].end_ts == 6000
    assert r.tenures[1].end_reason == "open"
    # A later loss of the new controller is still seen by 3, who now believes in 2.
    r = control.analyse([*events, seen(20000, 3, -1), elected(20003, 3, 3)], tol_ms=3)
    assert (r.tenures[1].end_ts, r.tenures[1].end_reason) == (20000, "lost")


def test_a_graceful_stop_is_a_resignation_and_the_session_close_its_loss() -> None:
    events = [
        *start(),
        ev(3000, 1, "controlled_shutdown", attempt=1, remaining=0),
        ev(
            3001,
            1,
            "controller_resigned",
            controller=1,
            controller_epoch=1,
            reason="broker shutting down",
        ),
        ev(3004, 1, "zookeeper_session", state="LOST"),
        seen(3006, 2, -1),
        seen(3007, 3, -1),
        elected(3012, 3, 2),
    ]
    r = control.analyse(events)
    t1 = r.tenures[0]
    assert (t1.end_ts, t1.end_reason, t1.resign_reason) == (
        3001,
        "resigned",
        "broker shutting down",
    )
    [inc] = r.incidents
    assert (inc.cause, inc.lost_ts, inc.new_controller_ts) == (
        "resigned: broker shutting down",
        3001,
        3012,
    )
    assert r.deaths == [control.Death(1, 3004, None, inc.incident_id)]


def test_a_graceful_stop_seen_by_a_clock_behind_within_skew_is_a_resignation() -> None:
    # Broker 2's clock is 30 ms behind broker 1's: its -1 is stamped before the
    # resignation it followed. Within --skew-ms, the resignation explains the end.
    events = [
        *start(),
        ev(995, 1, "controlled_shutdown", attempt=1, remaining=0),
        ev(
            1000,
            1,
            "controller_resigned",
            controller=1,
            controller_epoch=1,
            reason="broker shutting down",
        ),
        ev(1002, 1, "zookeeper_session", state="CLOSED"),
        seen(975, 2, -1),
        seen(1006, 3, -1),
        elected(1008, 3, 2),
    ]
    events.sort(key=lambda e: e["ts"])
    r = control.analyse(events, 100)
    t1 = r.tenures[0]
    assert (t1.end_ts, t1.end_reason) == (975, "resigned")
    assert r.incidents[0].cause == "resigned: broker shutting down"
    # Beyond the tolerance the other broker saw it go first: lost.
    r = control.analyse(events, 20)
    assert r.tenures[0].end_reason == "lost"


def test_a_paused_controller_comes_back_a_zombie() -> None:
    events = [
        *start(),
        seen(6000, 2, -1),
        seen(6001, 3, -1),
        elected(6004, 3, 2),
        seen(6005, 2, 3),
        # Resumed: it hears its session expired, resigns, registers again.
        ev(8000, 1, "zookeeper_session", state="SUSPENDED"),
        ev(8040, 1, "zookeeper_session", state="LOST"),
        ev(
            8042,
            1,
            "controller_resigned",
            controller=1,
            controller_epoch=1,
            reason="ZooKeeper error: SessionExpiredError",
        ),
        ev(8080, 1, "zookeeper_session", state="CONNECTED"),
        ev(8083, 1, "broker_registered"),
    ]
    r = control.analyse(events)
    t1 = r.tenures[0]
    assert (t1.end_ts, t1.end_reason, t1.resigned_ts, t1.overlap_ms) == (6000, "lost", 8042, 2038)
    [inc] = r.incidents
    assert "zombie" in inc.cause
    # One loss, from the first notice to the new registration: the late LOST is the same one.
    assert r.deaths == [control.Death(1, 6000, 8083, inc.incident_id)]


def test_a_controller_that_merely_lost_its_term_is_not_lost_as_a_broker() -> None:
    events = [
        *start(),
        elected(5000, 2, 2),
        ev(
            5010,
            1,
            "controller_resigned",
            controller=1,
            controller_epoch=1,
            reason="controller moved",
        ),
    ]
    r = control.analyse(events, tol_ms=5)
    assert r.tenures[0].end_reason == "superseded"
    assert r.tenures[0].overlap_ms == 10
    assert r.deaths == []


def test_broker_losses_kill_stop_and_bounce() -> None:
    events = [
        *start(),
        # SIGKILL of broker 3: the controller sees its registration go.
        ev(7000, 1, "broker_change", controller_epoch=1, new=[], dead=[3], bounced=[]),
        ev(9000, 3, "broker_registered"),
        ev(9002, 1, "broker_change", controller_epoch=1, new=[3], dead=[], bounced=[]),
        # A graceful stop of broker 2.
        ev(12000, 2, "controlled_shutdown", attempt=1, remaining=0),
        ev(12003, 2, "zookeeper_session", state="LOST"),
        ev(12005, 1, "broker_change", controller_epoch=1, new=[], dead=[2], bounced=[]),
        # Broker 3 restarted before its old session expired: a bounce.
        ev(15000, 1, "broker_change", controller_epoch=1, new=[], dead=[], bounced=[3]),
    ]
    r = control.analyse(events)
    got = [(i.kind, i.broker, i.lost_ts, i.cause, i.back_ts) for i in r.incidents]
    assert got == [
        ("broker", 3, 7000, "deregistered", 9000),
        ("broker", 2, 12003, "controlled shutdown", None),
        ("broker", 3, 15000, "bounced", 15000),
    ]
    assert [(d.broker, d.lost_ts, d.back_ts) for d in r.deaths] == [
        (2, 12003, None),
        (3, 7000, 9000),
        (3, 15000, 15000),
    ]
    assert all(i.controller_epoch == 1 for i in r.incidents)


def stopped_then(returns: list[dict[str, Any]], *loss: dict[str, Any]) -> list[dict[str, Any]]:
    """Broker 2 stopped gracefully, came back (`returns`: its own registration, the
    controller's BrokerChange that saw it new, or both), then lost again within the
    graceful window (`loss`)."""
    return [
        *start(),
        ev(12000, 2, "controlled_shutdown", attempt=1, remaining=0),
        ev(12003, 2, "zookeeper_session", state="LOST"),
        ev(12005, 1, "broker_change", controller_epoch=1, new=[], dead=[2], bounced=[]),
        *returns,
        *loss,
    ]


REGISTERED = ev(14000, 2, "broker_registered")
SEEN_NEW = ev(14002, 1, "broker_change", controller_epoch=1, new=[2], dead=[], bounced=[])


@pytest.mark.parametrize(
    "returns", [[REGISTERED, SEEN_NEW], [REGISTERED], [SEEN_NEW]], ids=["both", "own", "seen"]
)
def test_a_controlled_shutdown_that_finished_does_not_make_a_later_loss_graceful(
    returns: list[dict[str, Any]],
) -> None:
    # SIGKILLed 6 s after its return: its session expired, the controller saw it go.
    killed = ev(21000, 1, "broker_change", controller_epoch=1, new=[], dead=[2], bounced=[])
    got = [(i.lost_ts, i.cause) for i in control.analyse(stopped_then(returns, killed)).incidents]
    assert got == [(12003, "controlled shutdown"), (21000, "deregistered")]
    # Its session expired in a long pause and it registered again: a bounce.
    bounced = [
        ev(30000, 2, "zookeeper_session", state="LOST"),
        ev(30003, 2, "broker_registered"),
        ev(30005, 1, "broker_change", controller_epoch=1, new=[], dead=[], bounced=[2]),
    ]
    got = [(i.lost_ts, i.cause) for i in control.analyse(stopped_then(returns, *bounced)).incidents]
    assert got == [(12003, "controlled shutdown"), (30000, "bounced")]


def test_a_controllers_notice_of_a_registration_before_the_shutdown_is_no_return() -> None:
    # The controller's clock is ahead of broker 2's: its notice of broker 2's registration
    # is stamped after the broker's controlled shutdown, within --skew-ms. The shutdown is
    # still the loss's.
    events = [
        *start(),
        ev(12000, 2, "controlled_shutdown", attempt=1, remaining=0),
        ev(12004, 1, "broker_change", controller_epoch=1, new=[2], dead=[], bounced=[]),
        ev(12005, 2, "zookeeper_session", state="LOST"),
    ]
    got = [(i.lost_ts, i.cause) for i in control.analyse(events, tol_ms=5).incidents]
    assert got == [(12005, "controlled shutdown")]


def attempts(*remaining: int | None, start_ts: int = 12000) -> list[dict[str, Any]]:
    """Broker 2's controlled shutdown attempts (KafkaServer.controlledShutdown), 5 s apart
    (controlled.shutdown.retry.backoff.ms), with the partitions each left it leading."""
    return [
        ev(start_ts + 5000 * i, 2, "controlled_shutdown", attempt=i + 1, remaining=r)
        for i, r in enumerate(remaining)
    ]


@pytest.mark.parametrize("remaining", [2, None], ids=["still leading", "refused"])
def test_a_stop_whose_controlled_shutdown_attempts_all_failed_is_not_graceful(
    remaining: int | None,
) -> None:
    # Every attempt (controlled.shutdown.max.retries, 3) left it leading partitions or
    # failed: Kafka 2.8 proceeds "to do an unclean shutdown as all the controlled shutdown
    # attempts failed", its leaderships not moved. The loss's own evidence says what it was.
    events = [
        *start(),
        *attempts(remaining, remaining, remaining),
        ev(22010, 2, "zookeeper_session", state="CLOSED"),
        ev(22012, 1, "broker_change", controller_epoch=1, new=[], dead=[2], bounced=[]),
    ]
    got = [(i.lost_ts, i.cause) for i in control.analyse(events).incidents]
    assert got == [(22010, "session closed")]
    # A later attempt that succeeded makes it graceful.
    events[-5:-2] = attempts(remaining, 0)
    got = [(i.lost_ts, i.cause) for i in control.analyse(events).incidents]
    assert got == [(22010, "controlled shutdown")]


def test_a_session_end_stamped_just_after_the_deregistration_is_still_the_cause() -> None:
    """The broker's session ends before the controller can see its registration go (the
    znode is ephemeral): within the clocks' tolerance, a session end stamped after the
    controller's broker_change is still the loss's cause. The cause followed the stamps'
    order before ("deregistered" with the broker's clock 4 ms ahead)."""
    events = [
        *start(),
        *attempts(None, None, None),
        ev(22014, 2, "zookeeper_session", state="CLOSED"),
        ev(22012, 1, "broker_change", controller_epoch=1, new=[], dead=[2], bounced=[]),
    ]
    got = [(i.lost_ts, i.cause) for i in control.analyse(events, tol_ms=5).incidents]
    assert got == [(22012, "session closed")]
    # Beyond the tolerance it is another clock's later line: the controller's notice stands.
    events[-2] = ev(22020, 2, "zookeeper_session", state="CLOSED")
    got = [(i.lost_ts, i.cause) for i in control.analyse(events, tol_ms=5).incidents]
    assert got == [(22012, "deregistered")]


def test_a_session_expired_between_attempts_is_a_bounce_and_the_stop_graceful() -> None:
    # The first attempt failed; in the backoff its session expired, the controller's
    # thread registered it again (a stopping broker still does: only a wait for a stale
    # registration is cancelled) and the controller found it bounced; the next attempt
    # succeeded. The expiry moved no leadership: a bounce. The exit was graceful.
    events = [
        *start(),
        *attempts(None),
        ev(14000, 2, "zookeeper_session", state="LOST"),
        ev(14001, 2, "zookeeper_session", state="CONNECTED"),
        ev(14003, 2, "broker_registered"),
        ev(14005, 1, "broker_change", controller_epoch=1, new=[], dead=[], bounced=[2]),
        ev(17000, 2, "controlled_shutdown", attempt=2, remaining=0),
        ev(17010, 2, "zookeeper_session", state="CLOSED"),
        ev(17012, 1, "broker_change", controller_epoch=1, new=[], dead=[2], bounced=[]),
    ]
    got = [(i.lost_ts, i.cause) for i in control.analyse(events).incidents]
    assert got == [(14000, "bounced"), (17010, "controlled shutdown")]


@pytest.mark.parametrize(
    ("registered", "bounced"),
    [
        (40000, 40002),  # as they happened
        (40002, 40000),  # the controller's clock behind broker 2's, within --skew-ms
        (40000, 44000),  # the controller busy for seconds before it read the brokers
    ],
)
def test_a_bounce_after_a_stop_and_a_kill_is_that_stops_loss(registered: int, bounced: int) -> None:
    # `zkctl broker stop`: the controlled shutdown succeeded, then SIGKILL (the stop timed
    # out) before the session was closed. Restarted, the new process registers as soon as
    # the old session expires (KAFKA-7165) and the controller finds it bounced: the
    # registration the bounce reports came after the loss, no return before it.
    events = [
        *start(),
        ev(12000, 2, "controlled_shutdown", attempt=1, remaining=0),
        ev(registered, 2, "broker_registered"),
        ev(bounced, 1, "broker_change", controller_epoch=1, new=[], dead=[], bounced=[2]),
    ]
    got = [(i.lost_ts, i.cause) for i in control.analyse(events, tol_ms=5).incidents]
    assert got == [(bounced, "controlled shutdown")]


@pytest.mark.parametrize("registered", [40000, 40004])
def test_a_registration_within_skew_of_the_controllers_notice_of_the_loss_is_no_return(
    registered: int,
) -> None:
    # The same stop and kill, the controller reading the brokers between the old session's
    # expiry and the new registration: dead, then new. Broker 2's registration is stamped
    # within --skew-ms of the controller's dead on either side: it came after the loss.
    events = [
        *start(),
        ev(12000, 2, "controlled_shutdown", attempt=1, remaining=0),
        ev(40002, 1, "broker_change", controller_epoch=1, new=[], dead=[2], bounced=[]),
        ev(registered, 2, "broker_registered"),
        ev(40006, 1, "broker_change", controller_epoch=1, new=[2], dead=[], bounced=[]),
    ]
    got = [(i.lost_ts, i.cause) for i in control.analyse(events, tol_ms=5).incidents]
    assert got == [(40002, "controlled shutdown")]


def bounce(lost: int, registered: int, bounced: int) -> list[dict[str, Any]]:
    """Broker 2's session expired while its process lived on (a long pause), logged as the
    brokers log it: its session LOST and CONNECTED (every broker's Controller._on_zk_state),
    its registration (RegisterBrokerAndReelect), and the controller's BrokerChange that
    finds it bounced (a new broker epoch). The stamps are the writers' clocks."""
    return [
        *start(),
        ev(lost, 2, "zookeeper_session", state="LOST"),
        ev(lost + 1, 2, "zookeeper_session", state="CONNECTED"),
        ev(registered, 2, "broker_registered"),
        seen(registered + 1, 2, 1),
        ev(bounced, 1, "broker_change", controller_epoch=1, new=[], dead=[], bounced=[2]),
    ]


@pytest.mark.parametrize(
    ("lost", "registered", "bounced"),
    [
        (60000, 60003, 60005),  # as they happened
        (60000, 60006, 60004),  # the controller's clock behind: bounced before the registration
        (60003, 60006, 60001),  # further behind: bounced before the session's loss
        (60000, 60003, 64000),  # the controller busy for seconds before it read the brokers
    ],
)
def test_a_bounced_broker_is_one_incident(lost: int, registered: int, bounced: int) -> None:
    # The broker's registration closed its loss, and the controller's later `bounced`
    # opened a second one: two incidents (session lost, bounced) for one expiry.
    r = control.analyse(bounce(lost, registered, bounced), tol_ms=10)
    got = [(i.kind, i.broker, i.lost_ts, i.back_ts, i.cause) for i in r.incidents]
    first, back = min(lost, bounced), min(registered, bounced)
    assert got == [("broker", 2, first, back, "bounced")]
    assert [(d.broker, d.lost_ts, d.back_ts) for d in r.deaths] == [(2, first, back)]


def test_a_bounce_after_the_controller_saw_the_broker_back_is_one_of_its_own() -> None:
    # The controller read the registration (broker_change new) before the broker bounced
    # again: a restart within its old session, a loss of its own.
    events = [
        *bounce(60000, 60003, 60005)[:-1],
        ev(60005, 1, "broker_change", controller_epoch=1, new=[2], dead=[], bounced=[]),
        ev(90000, 1, "broker_change", controller_epoch=1, new=[], dead=[], bounced=[2]),
    ]
    got = [(i.broker, i.lost_ts, i.back_ts, i.cause) for i in control.analyse(events).incidents]
    assert got == [(2, 60000, 60003, "session lost"), (2, 90000, 90000, "bounced")]
    # A loss the controller saw (dead) and a registration no broker_change logged (the
    # controller read it at a failover): a later bounce is not that loss's notice.
    events = [
        *start(),
        ev(7000, 1, "broker_change", controller_epoch=1, new=[], dead=[3], bounced=[]),
        ev(9000, 3, "broker_registered"),
        ev(15000, 1, "broker_change", controller_epoch=1, new=[], dead=[], bounced=[3]),
    ]
    got = [(i.broker, i.lost_ts, i.back_ts, i.cause) for i in control.analyse(events).incidents]
    assert got == [(3, 7000, 9000, "deregistered"), (3, 15000, 15000, "bounced")]
    # A session lost long after a bounce is a loss of its own.
    events = [
        *start(),
        ev(15000, 1, "broker_change", controller_epoch=1, new=[], dead=[], bounced=[3]),
        ev(40000, 3, "zookeeper_session", state="LOST"),
        ev(40003, 3, "broker_registered"),
    ]
    got = [(i.broker, i.lost_ts, i.back_ts, i.cause) for i in control.analyse(events).incidents]
    assert got == [(3, 15000, 15000, "bounced"), (3, 40000, 40003, "session lost")]


def test_every_cause_of_a_broker_incident_is_documented() -> None:
    # docs/analytics.md's list of causes (the Incidents paragraph from "`cause`:" on).
    text = ANALYTICS.read_text()
    causes = text[text.index("`cause`:") : text.index("For each: `time_to_controller_ms`")]
    documented = set(re.findall(r"`([^`]+)`", causes))
    # Stopped gracefully, restarted, stopped again before its start-up completed (so no
    # controlled shutdown: broker/server.py asks for one only once started): its session
    # CLOSED. And a stop whose controlled shutdown attempts all failed.
    restarted_and_stopped = [
        *stopped_then([REGISTERED, SEEN_NEW]),
        ev(15000, 2, "zookeeper_session", state="CLOSED"),
        ev(15002, 1, "broker_change", controller_epoch=1, new=[], dead=[2], bounced=[]),
    ]
    failed_stop = [
        *start(),
        *attempts(2, 2, 2),
        ev(22010, 2, "zookeeper_session", state="CLOSED"),
    ]
    killed = [*start(), ev(7000, 1, "broker_change", controller_epoch=1, new=[], dead=[3])]
    # Its session expired, and the controller saw it registered again, not bounced.
    expired = [
        *bounce(60000, 60003, 60005)[:-1],
        ev(60005, 1, "broker_change", controller_epoch=1, new=[2], dead=[], bounced=[]),
    ]
    scenarios = (restarted_and_stopped, failed_stop, killed, bounce(60000, 60003, 60005), expired)
    got = {i.cause for events in scenarios for i in control.analyse(events).incidents}
    assert got == {
        "controlled shutdown",
        "session closed",
        "deregistered",
        "bounced",
        "session lost",
    }
    assert got <= documented, got - documented


def test_repeated_lines_are_dropped_and_counted() -> None:
    once = control.analyse(killed_controller())
    twice = control.analyse(killed_controller() + killed_controller()[3:8])
    assert twice.duplicates == 5
    assert twice.tenures == once.tenures
    assert twice.incidents == once.incidents


def test_an_epoch_elected_twice_is_an_anomaly() -> None:
    r = control.analyse([*start(), elected(100, 2, 1)])
    assert r.anomalies == {"duplicate_epoch": 1}
    assert [t.broker for t in r.tenures] == [1]


def test_topic_deletions_are_collected() -> None:
    r = control.analyse([*start(), ev(50, 1, "topic_deleted", topic="t", controller_epoch=1)])
    assert r.deletions == {"t": [50]}


@pytest.mark.parametrize(
    "reason", ["error processing TopicChange: KeyError", "ZooKeeper error: ConnectionLoss"]
)
def test_a_controller_resigned_on_an_error_is_not_lost_as_a_broker(reason: str) -> None:
    """Its event failed (a bug, or ZooKeeper mid-event with the session alive): the broker
    resigned and lived on. Only these two reasons' exact texts were known as alive."""
    events = [
        *start(),
        elected(5000, 2, 2),
        ev(5010, 1, "controller_resigned", controller=1, controller_epoch=1, reason=reason),
    ]
    r = control.analyse(events, tol_ms=5)
    assert r.tenures[0].end_reason == "superseded"
    assert r.deaths == []


def test_a_zookeeper_error_after_the_session_ended_is_a_loss() -> None:
    events = [
        *start(),
        elected(5000, 2, 2),
        ev(5008, 1, "zookeeper_session", state="LOST"),
        ev(
            5010,
            1,
            "controller_resigned",
            controller=1,
            controller_epoch=1,
            reason="ZooKeeper error: ConnectionLoss",
        ),
    ]
    r = control.analyse(events, tol_ms=5)
    [inc] = r.incidents
    assert "zombie" in inc.cause
    assert [(d.broker, d.lost_ts) for d in r.deaths] == [(1, 5000)]


def reelected(short_first_term: bool = False) -> list[dict[str, Any]]:
    """Controller 1 resigns on a ZooKeeper error (its session alive), deletes its own
    /controller and wins the next epoch at once; broker 2's watch reads no controller in
    between. `short_first_term`: epoch 1 began just before (a failover that failed), so
    broker 2's sighting of it is within the tolerance of epoch 2's election too."""
    first = 9948 if short_first_term else 5
    return [
        ev(0, 1, "broker_registered"),
        ev(1, 2, "broker_registered"),
        elected(first, 1, 1),
        seen(first + 2, 2, 1),
        ev(
            10000,
            1,
            "controller_resigned",
            controller=1,
            controller_epoch=1,
            reason="ZooKeeper error: ConnectionLoss",
        ),
        seen(10002, 2, -1),
        elected(10004, 1, 2),
        seen(10006, 2, 1),
        ev(10030, 1, "controller_failover", controller_epoch=2, total_ms=20.0),
        seen(60000, 2, 1),
    ]


@pytest.mark.parametrize("short_first_term", [False, True])
def test_a_controller_elected_again_is_not_ended_by_the_gap_between_its_terms(
    short_first_term: bool,
) -> None:
    """Broker 2's -1 saw epoch 1 go, not epoch 2, which began after its last sighting: a
    -1 ends only the tenure its writer last saw (it used to end the controller's latest
    tenure begun by then: epoch 2 lost at its start, broker 1 lost for good)."""
    r = control.analyse(reelected(short_first_term), tol_ms=100)
    t1, t2 = r.tenures
    assert (t1.end_ts, t1.end_reason) == (10000, "resigned")
    assert (t2.end_ts, t2.end_reason) == (None, "open")
    assert [(i.kind, i.controller_epoch, i.cause) for i in r.incidents] == [
        ("controller", 1, "resigned: ZooKeeper error: ConnectionLoss")
    ]
    assert r.deaths == []


def test_a_sighting_stamped_just_before_a_reelection_is_of_the_new_term() -> None:
    """Broker 2's clock is behind: it saw epoch 2 (after seeing /controller absent, so not
    epoch 1 again) at a stamp before epoch 2's election. Its later -1 ends epoch 2."""
    events = [e for e in reelected() if not (e["broker"] == 2 and e["ts"] >= 10006)]
    events += [seen(10003, 2, 1), seen(20000, 2, -1), elected(20004, 2, 3)]
    r = control.analyse(events, tol_ms=100)
    t1, t2, _t3 = r.tenures
    assert (t1.end_ts, t1.end_reason) == (10000, "resigned")
    assert (t2.end_ts, t2.end_reason) == (20000, "lost")
    assert [(d.broker, d.lost_ts) for d in r.deaths] == [(1, 20000)]


def reread_after_reelection(sighting_ts: int, successor: bool = True) -> list[dict[str, Any]]:
    """Controller 1 resigns on a ZooKeeper error and wins epoch 2; broker 2's watch fired
    on the deletion, but its read found /controller made again: it logs controller_seen 1,
    no -1 in between, at `sighting_ts`. Broker 1 is killed later: broker 2 sees
    /controller go and (`successor`) wins epoch 3."""
    events = [e for e in reelected() if not (e["broker"] == 2 and e["ts"] >= 10002)]
    events += [seen(sighting_ts, 2, 1), seen(20000, 2, -1)]
    return [*events, elected(20004, 2, 3)] if successor else events


@pytest.mark.parametrize("successor", [True, False])
@pytest.mark.parametrize("sighting_ts", [10001, 10003, 10005])
def test_a_sighting_after_a_resignation_is_of_the_controllers_next_term(
    sighting_ts: int, successor: bool
) -> None:
    """Stamped after epoch 1's resignation (and, but for 10005, before epoch 2's
    controller_elected line: broker 1 makes /controller before it writes that line, and
    broker 2's clock may be behind), the sighting is of epoch 2: epoch 1 was no longer in
    force. It used to be taken for epoch 1 (the term begun last by its stamp, though it
    had ended), so the -1 at 20000 ended epoch 1 again, epoch 2 was superseded (or left
    open) and broker 1 was never lost."""
    r = control.analyse(reread_after_reelection(sighting_ts, successor), tol_ms=100)
    t1, t2 = r.tenures[:2]
    assert (t1.end_ts, t1.end_reason) == (10000, "resigned")
    assert (t2.end_ts, t2.end_reason) == (20000, "lost")
    assert [(d.broker, d.lost_ts) for d in r.deaths] == [(1, 20000)]


def test_a_sighting_after_a_resignation_with_no_next_term_near_is_of_the_ended_one() -> None:
    """No term of the controller begins within the tolerance after the stamp: the sighting
    is of its latest term begun before, though that had ended (the writer's clock ahead, or
    a read of the /controller a resigned controller left standing)."""
    events = [e for e in reelected() if not (e["broker"] == 2 and e["ts"] >= 10002)]
    events = [e for e in events if e["ts"] < 10004] + [seen(10050, 2, 1), seen(10060, 2, -1)]
    events += [elected(10400, 1, 2), seen(10402, 2, 1), seen(20000, 2, -1)]
    r = control.analyse(events, tol_ms=100)
    t1, t2 = r.tenures
    assert (t1.end_ts, t1.end_reason) == (10000, "resigned")
    assert (t2.end_ts, t2.end_reason) == (20000, "lost")


def test_a_session_end_stamped_just_after_the_controller_saw_the_broker_back_is_that_loss() -> None:
    """A paused broker: its session expired (the controller saw it deregistered), it woke,
    logged its session LOST and registered again, and the controller saw it back. With the
    broker's clock behind, its LOST line is stamped just after the controller's sighting:
    still the loss the sighting closed (its session ended before it registered), not a
    second one. It was a second broker incident ("session lost") before: seen with the
    generator's clocks 20 ms off (2 of 30 seeds)."""
    events = [
        *start(),
        ev(10000, 1, "broker_change", controller_epoch=1, new=[], dead=[2], bounced=[]),
        ev(15000, 1, "broker_change", controller_epoch=1, new=[2], dead=[], bounced=[]),
        ev(15003, 2, "zookeeper_session", state="LOST"),
        ev(15010, 2, "broker_registered"),
    ]
    got = [(i.lost_ts, i.cause, i.back_ts) for i in control.analyse(events, tol_ms=5).incidents]
    assert got == [(10000, "deregistered", 15000)]
    # Beyond the tolerance it is a loss of its own.
    events[-2:] = [
        ev(15020, 2, "zookeeper_session", state="LOST"),
        ev(15030, 2, "broker_registered"),
    ]
    got = [(i.lost_ts, i.cause, i.back_ts) for i in control.analyse(events, tol_ms=5).incidents]
    assert got == [(10000, "deregistered", 15000), (15020, "session lost", 15030)]


@pytest.mark.parametrize(
    ("seed", "brokers", "failovers", "skew_ms"),
    [*((seed, 4, 40, 3.0) for seed in range(11, 17)), (108, 5, 60, 20.0), (113, 5, 60, 20.0)],
)
def test_generated_broker_incidents_have_their_true_causes(
    seed: int, brokers: int, failovers: int, skew_ms: float, tmp_path: Path
) -> None:
    """The generator's logs (each broker's clock off by up to skew_ms), their incidents
    compared with its truth (kind, broker, and a broker incident's cause). Seeds 13 and
    14 had a failed stop's "session closed" taken for "deregistered" by the clocks' order;
    108 and 113 (clocks 20 ms off) a paused broker's loss counted twice."""
    import json
    from collections import Counter

    from pipeline import generate, schema

    out = tmp_path / "logs"
    options = generate.Options(
        brokers=brokers,
        partitions=30,
        failovers=failovers,
        out=out,
        seed=seed,
        skew_ms=skew_ms,
    )
    truth = generate.generate(options)
    events = [
        e
        for f in out.glob("broker-*/data/state-change.log")
        for e in map(json.loads, f.read_text().splitlines())
        if e["event"] in schema.CONTROL_EVENTS
    ]
    result = control.analyse(events, tol_ms=int(2 * skew_ms) + 1)

    def cause(kind: str, cause: str | None) -> str | None:
        return cause if kind == "broker" else None

    want = Counter(
        (i["kind"], i["broker"], cause(i["kind"], i.get("cause"))) for i in truth["incidents"]
    )
    got = Counter((i.kind, i.broker, cause(i.kind, i.cause)) for i in result.incidents)
    assert got == want
