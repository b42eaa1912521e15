"""Boundaries of the control-plane analysis (pure): clock tolerance at its edges, and
where a loss, a gap or an incident falls when stamps are within the tolerance."""

from __future__ import annotations

from typing import Any

from pipeline import control
from tests.unit.test_pipeline_control import elected, ev, seen, start


def test_elections_out_of_order_within_the_tolerance_are_no_anomaly() -> None:
    """Epoch 2's election stamped by a clock behind epoch 1's: an anomaly only when it is
    more than the tolerance earlier."""
    skewed = [elected(1000, 1, 1), elected(950, 2, 2)]
    assert "epoch_order" not in control.analyse(skewed, tol_ms=50).anomalies
    assert control.analyse(skewed, tol_ms=49).anomalies["epoch_order"] == 1


def test_a_sighting_stamped_the_tolerance_before_a_reelection_is_of_the_new_term() -> None:
    """Controller 1 resigns and wins epoch 2 at 10004; broker 2, having seen /controller
    go, sees controller 1 at 10003 with a 1 ms tolerance: it saw epoch 2, so its -1 at
    20000 ends epoch 2 (not a term it never saw)."""
    events = [
        ev(0, 1, "broker_registered"),
        ev(1, 2, "broker_registered"),
        elected(5, 1, 1),
        seen(7, 2, 1),
        ev(10000, 1, "controller_resigned", controller=1, controller_epoch=1, reason="r"),
        seen(10002, 2, -1),
        seen(10003, 2, 1),
        elected(10004, 1, 2),
        seen(20000, 2, -1),
        elected(20004, 2, 3),
    ]
    r = control.analyse(events, tol_ms=1)
    t1, t2, _t3 = r.tenures
    assert (t1.end_ts, t1.end_reason) == (10000, "resigned")
    assert (t2.end_ts, t2.end_reason) == (20000, "lost")


def test_after_seeing_a_controller_go_a_broker_never_sights_that_term_again() -> None:
    """Broker 2 saw epoch 1 go at 6000; controller 1, elected again (epoch 2) at 6050, is
    seen by broker 2's clock behind at 6020, while epoch 1 still looks live by the stamps:
    that sighting is of epoch 2 (the -1 put its writer past epoch 1), so broker 2's -1 at
    20000 ends epoch 2 there."""
    events = [
        *start(),
        seen(6000, 2, -1),
        seen(6020, 2, 1),
        elected(6050, 1, 2),
        seen(20000, 2, -1),
        seen(20500, 3, -1),
        elected(20504, 3, 3),
    ]
    r = control.analyse(events, tol_ms=100)
    t1, t2, _t3 = r.tenures
    assert (t1.end_ts, t1.end_reason) == (6000, "lost")
    assert (t2.end_ts, t2.end_reason) == (20000, "lost")


def test_a_loss_seen_by_a_clock_behind_before_the_tenure_began_ends_it_at_its_start() -> None:
    """Broker 3's clock is behind: it sees controller 2 (elected at 6004) at 5990 and its
    loss at 5995, before the election by the stamps but within the tolerance. That -1
    ends epoch 2, at its start (a tenure never ends before it began), not the next
    election."""
    events = [
        *start(),
        seen(5950, 2, -1),
        seen(5990, 3, 2),
        seen(5995, 3, -1),
        elected(6004, 2, 2),
        elected(9000, 3, 3),
    ]
    r = control.analyse(events, tol_ms=100)
    t2 = r.tenures[1]
    assert (t2.end_ts, t2.end_reason) == (6004, "lost")
    gap = r.gaps[1]
    assert (gap.start_ts, gap.end_ts, gap.duration_ms) == (6004, 9000, 2996)


def test_a_resignation_within_the_tolerance_after_the_successor_is_no_zombie() -> None:
    for resigned_ts, overlap in ((5100, None), (5101, 101)):
        events = [
            *start(),
            elected(5000, 2, 2),
            ev(
                resigned_ts,
                1,
                "controller_resigned",
                controller=1,
                controller_epoch=1,
                reason="controller moved",
            ),
        ]
        r = control.analyse(events, tol_ms=100)
        assert r.tenures[0].overlap_ms == overlap
        assert ("zombie" in r.incidents[0].cause) == (overlap is not None)


def test_a_gap_whose_successor_was_stamped_before_the_end_is_empty() -> None:
    a = control.Tenure(1, 1, 5, end_ts=6010, end_reason="lost")
    b = control.Tenure(2, 2, 6004)
    assert control.gaps_of([a, b]) == [control.Gap(1, 2, 6010, 6010, 0)]


def test_a_controllers_own_session_end_just_before_its_tenure_ended_is_its_incident() -> None:
    """The controller's clock is behind: its session LOST at 5995 by its stamp, the others
    see /controller go at 6000. One controller incident, not a broker incident too."""
    events = [
        *start(),
        ev(5995, 1, "zookeeper_session", state="LOST"),
        seen(6000, 2, -1),
        seen(6001, 3, -1),
        elected(6004, 2, 2),
        ev(9000, 1, "broker_registered"),
    ]
    r = control.analyse(events, tol_ms=100)
    [inc] = r.incidents
    assert (inc.kind, inc.lost_ts, inc.back_ts) == ("controller", 6000, 9000)
    assert r.deaths == [control.Death(1, 5995, 9000, inc.incident_id)]


def test_a_controllers_session_end_before_its_successor_is_its_incident() -> None:
    """A graceful stop: the controller resigns at 1000, its session closes at 1150 (more
    than the tolerance after), the successor is elected at 1160. The loss is part of the
    controller incident (it came before the failover ended), not an incident of its own."""
    events = [
        *start(),
        ev(900, 1, "controlled_shutdown", attempt=1, remaining=0),
        ev(1000, 1, "controller_resigned", controller=1, controller_epoch=1, reason="shutdown"),
        ev(1150, 1, "zookeeper_session", state="CLOSED"),
        seen(1152, 2, -1),
        seen(1153, 3, -1),
        elected(1160, 2, 2),
        ev(5000, 1, "broker_registered"),
    ]
    r = control.analyse(events, tol_ms=100)
    [inc] = r.incidents
    assert (inc.kind, inc.lost_ts, inc.back_ts) == ("controller", 1000, 5000)
    assert r.deaths == [control.Death(1, 1150, 5000, inc.incident_id)]


def test_a_broker_lost_at_an_elections_stamp_is_lost_under_the_new_epoch() -> None:
    events = [
        *start(),
        seen(6000, 2, -1),
        seen(6002, 3, -1),
        elected(6004, 2, 2),
        ev(6004, 2, "broker_change", controller_epoch=2, new=[], dead=[3], bounced=[]),
    ]
    r = control.analyse(events, tol_ms=100)
    [lost3] = [i for i in r.incidents if i.kind == "broker" and i.broker == 3]
    assert lost3.controller_epoch == 2


def resigned(ts: int, broker: int, epoch: int, reason: str) -> dict[str, Any]:
    return ev(
        ts, broker, "controller_resigned", controller=broker, controller_epoch=epoch, reason=reason
    )


def test_a_sighting_stamped_at_the_resignation_is_of_the_controllers_next_term() -> None:
    """Controller 1 resigns at 10000 and wins epoch 2 at 10004; broker 2's read, stamped
    at the resignation's very millisecond, is of epoch 2 (epoch 1 was no longer in force),
    so its -1 at 20000 ends epoch 2."""
    events = [
        ev(0, 1, "broker_registered"),
        ev(1, 2, "broker_registered"),
        elected(5, 1, 1),
        seen(7, 2, 1),
        resigned(10000, 1, 1, "ZooKeeper error: ConnectionLoss"),
        seen(10000, 2, 1),
        elected(10004, 1, 2),
        seen(20000, 2, -1),
        elected(20004, 2, 3),
    ]
    r = control.analyse(events, tol_ms=100)
    t1, t2, _t3 = r.tenures
    assert (t1.end_ts, t1.end_reason) == (10000, "resigned")
    assert (t2.end_ts, t2.end_reason) == (20000, "lost")


def test_a_controllers_sighting_of_itself_and_its_own_none_end_nothing() -> None:
    """The controller logs itself seen, then /controller absent a millisecond before its
    resignation: its own -1 is no other broker's notice of a loss; the resignation ends
    the tenure."""
    events = [
        *start(),
        seen(10, 1, 1),
        seen(3000, 1, -1),
        resigned(3001, 1, 1, "broker shutting down"),
        seen(3006, 2, -1),
        elected(3012, 3, 2),
    ]
    t1 = control.analyse(events, tol_ms=100).tenures[0]
    assert (t1.end_ts, t1.end_reason) == (3001, "resigned")


def test_the_first_resignation_of_a_term_is_the_one_kept() -> None:
    events = [
        *start(),
        resigned(3001, 1, 1, "controller moved"),
        resigned(3500, 1, 1, "broker shutting down"),
        elected(3012, 3, 2),
    ]
    t1 = control.analyse(events, tol_ms=100).tenures[0]
    assert (t1.resigned_ts, t1.resign_reason, t1.end_ts) == (3001, "controller moved", 3001)


def test_a_failover_line_counts_only_from_the_terms_own_controller() -> None:
    events = [
        *start(),
        seen(6000, 2, -1),
        elected(6004, 2, 2),
        ev(6020, 3, "controller_failover", controller_epoch=2, total_ms=9.0),
    ]
    t2 = control.analyse(events, tol_ms=100).tenures[1]
    assert (t2.failover_done_ts, t2.failover_ms) == (None, None)
    events.append(ev(6030, 2, "controller_failover", controller_epoch=2, total_ms=25.0))
    t2 = control.analyse(events, tol_ms=100).tenures[1]
    assert (t2.failover_done_ts, t2.failover_ms) == (6030, 25.0)


def test_at_one_stamp_the_controller_incident_comes_first() -> None:
    """Controller 3 and broker 1 are lost at the same millisecond: the controller
    incident is numbered first, whatever the brokers' ids."""
    events = [
        ev(0, 1, "broker_registered"),
        ev(1, 2, "broker_registered"),
        ev(2, 3, "broker_registered"),
        elected(5, 3, 1),
        seen(6, 1, 3),
        seen(7, 2, 3),
        ev(6000, 1, "zookeeper_session", state="LOST"),
        seen(6000, 2, -1),
        elected(6004, 2, 2),
    ]
    r = control.analyse(events, tol_ms=100)
    assert [(i.incident_id, i.kind, i.broker) for i in r.incidents] == [
        (1, "controller", 3),
        (2, "broker", 1),
    ]


def test_a_controller_incident_owns_one_loss_of_its_broker() -> None:
    """Controller 1 vanishes at 6000, registers again at 6010 and loses its session again
    at 6020, all before the next election: the second loss is an incident of its own."""
    events = [
        *start(),
        seen(6000, 2, -1),
        seen(6001, 3, -1),
        ev(6010, 1, "broker_registered"),
        ev(6020, 1, "zookeeper_session", state="LOST"),
        elected(6100, 2, 2),
    ]
    r = control.analyse(events, tol_ms=100)
    assert [(i.kind, i.lost_ts, i.back_ts) for i in r.incidents] == [
        ("controller", 6000, 6010),
        ("broker", 6020, None),
    ]
    assert [(d.lost_ts, d.back_ts) for d in r.deaths] == [(6000, 6010), (6020, None)]


def test_a_controllers_notice_within_the_tolerance_after_a_shutdown_is_no_return() -> None:
    """The controller's notice of broker 2's registration, by a clock ahead, is stamped 4 ms
    after the broker's controlled shutdown (within the tolerance): it came before the
    shutdown, so the loss 20 ms later is still that shutdown's."""
    events = [
        *start(),
        ev(12000, 2, "controlled_shutdown", attempt=1, remaining=0),
        ev(12004, 1, "broker_change", controller_epoch=1, new=[2], dead=[], bounced=[]),
        ev(12020, 2, "zookeeper_session", state="LOST"),
    ]
    got = [(i.lost_ts, i.cause) for i in control.analyse(events, tol_ms=5).incidents]
    assert got == [(12020, "controlled shutdown")]


def test_a_bounce_after_a_loss_the_controller_saw_is_a_loss_of_its_own() -> None:
    """The controller saw broker 2's registration go (1000); broker 2 logged its session's
    end later (1200) and registered again (2000). That loss was not only the broker's own,
    so a bounce after its registration is no late notice of it: another loss."""
    events = [
        *start(),
        ev(1000, 1, "broker_change", controller_epoch=1, new=[], dead=[2], bounced=[]),
        ev(1200, 2, "zookeeper_session", state="LOST"),
        ev(2000, 2, "broker_registered"),
        ev(2005, 1, "broker_change", controller_epoch=1, new=[], dead=[], bounced=[2]),
    ]
    r = control.analyse(events, tol_ms=100)
    assert [(i.lost_ts, i.cause, i.back_ts) for i in r.incidents] == [
        (1000, "deregistered", 2000),
        (2005, "bounced", 2005),
    ]


def test_a_controller_with_broker_id_0_is_seen_and_lost_like_any_other() -> None:
    events = [
        ev(0, 0, "broker_registered"),
        ev(1, 1, "broker_registered"),
        elected(5, 0, 1),
        seen(6, 1, 0),
        seen(6000, 1, -1),
        elected(6004, 1, 2),
    ]
    t1 = control.analyse(events, tol_ms=100).tenures[0]
    assert (t1.broker, t1.end_ts, t1.end_reason) == (0, 6000, "lost")


def test_a_resignation_by_another_broker_than_the_epochs_controller_is_an_anomaly() -> None:
    events = [*start(), resigned(3000, 2, 1, "controller moved")]
    r = control.analyse(events, tol_ms=100)
    assert r.anomalies == {"resignation_without_election": 1}
    assert (r.tenures[0].resigned_ts, r.tenures[0].end_reason) == (None, "open")


def test_a_controlled_shutdown_exactly_the_window_before_the_loss_makes_it_graceful() -> None:
    window = control.GRACEFUL_WINDOW_MS
    for shutdown_ts, cause in ((12000, "controlled shutdown"), (11999, "deregistered")):
        events = [
            *start(),
            ev(shutdown_ts, 2, "controlled_shutdown", attempt=1, remaining=0),
            ev(
                12000 + window, 1, "broker_change", controller_epoch=1, new=[], dead=[2], bounced=[]
            ),
        ]
        [inc] = control.analyse(events, tol_ms=5).incidents
        assert (inc.lost_ts, inc.cause) == (12000 + window, cause)
