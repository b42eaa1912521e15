"""Boundaries of the control-plane analysis (pure): clock tolerance at its edges, and
where a loss, a gap or an incident falls when stamps are within the tolerance."""

from __future__ import annotations

from typing import Any

from pipeline import control


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
