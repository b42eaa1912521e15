"""The job's pure summary of one cluster: controller section, incidents and tenure rows,
from a hand-made control analysis (no Spark)."""

from __future__ import annotations

from dataclasses import asdict

from pipeline import control, job, stats
from tests.unit.test_pipeline_control import elected, ev, seen


def analysed() -> control.ControlResult:
    """Controller 1 paused (a zombie, 8042), controller 2 elected at 6004; broker 3 lost
    at 7000 (the controller saw its registration go), back at 7500."""
    return control.analyse(
        [
            ev(0, 1, "broker_registered"),
            ev(1, 2, "broker_registered"),
            ev(2, 3, "broker_registered"),
            elected(5, 1, 1),
            seen(6, 2, 1),
            seen(7, 3, 1),
            seen(6000, 2, -1),
            seen(6001, 3, -1),
            elected(6004, 2, 2),
            seen(6005, 3, 2),
            ev(6030, 2, "controller_failover", controller_epoch=2, total_ms=25.0),
            ev(7000, 2, "broker_change", controller_epoch=2, new=[], dead=[3], bounced=[]),
            ev(7500, 2, "broker_change", controller_epoch=2, new=[3], dead=[], bounced=[]),
            ev(
                8042,
                1,
                "controller_resigned",
                controller=1,
                controller_epoch=1,
                reason="ZooKeeper error: SessionExpiredError",
            ),
        ],
        tol_ms=100,
    )


def test_the_summary_counts_tenures_zombies_and_incidents_with_leaderless_partitions() -> None:
    r = analysed()
    controller_inc, broker_inc = r.incidents
    incidents = [
        stats.complete_incident({"cluster": "c", **asdict(controller_inc)}, None),
        stats.complete_incident(
            {"cluster": "c", **asdict(broker_inc)}, stats.IncidentWindows(2, 7020, False, 35)
        ),
    ]
    by_cluster = {"c": {"lines": {"ok": 14}, "first_ts": 0, "last_ts": 8042}}
    s = job.build_summary(
        job.ReportOptions([], "report"), [], by_cluster, {"c": r}, incidents, {}, {}, [], 1.0
    )
    c = s["clusters"]["c"]
    assert c["span_s"] == 8.042
    ctl = c["controller"]
    assert (ctl["tenures"], ctl["epochs"], ctl["end_reasons"], ctl["zombies"]) == (
        2,
        [1, 2],
        {"lost": 1, "open": 1},
        1,
    )
    assert ctl["no_controller_ms"]["total"] == 4
    assert c["incidents"] == {
        "total": 2,
        "controller": 1,
        "broker": 1,
        "with_leaderless_partitions": 1,
        "unrecovered": 0,
        "causes": {
            "lost; came back as a zombie (ZooKeeper error: SessionExpiredError)": 1,
            "deregistered": 1,
        },
    }
    assert c["failover_latency_ms"]["to_all_leaders"]["max"] == 20


def test_tenure_rows_give_each_ended_tenures_duration() -> None:
    rows = job._tenure_rows({"c": analysed()})
    got = [dict(zip(job.TENURE_FIELDS, row, strict=True)) for row in rows]
    assert [(t["epoch"], t["duration_ms"], t["open"], t["overlap_ms"]) for t in got] == [
        (1, 5995, False, 2038),
        (2, None, True, None),
    ]
    assert job._gap_rows({"c": analysed()}) == [("c", 1, 2, 6000, 6004, 4)]


def test_an_incident_whose_partitions_never_got_a_leader_back_is_unrecovered() -> None:
    r = analysed()
    incidents = [
        stats.complete_incident({"cluster": "c", **asdict(i)}, stats.IncidentWindows(1, 9000, w, 5))
        for i, w in zip(r.incidents, (False, True), strict=True)
    ]
    by_cluster = {"c": {"lines": {"ok": 14}, "first_ts": 0, "last_ts": 8042}}
    s = job.build_summary(
        job.ReportOptions([], "report"), [], by_cluster, {"c": r}, incidents, {}, {}, [], 1.0
    )
    inc = s["clusters"]["c"]["incidents"]
    assert (inc["with_leaderless_partitions"], inc["unrecovered"]) == (2, 1)
    assert s["failover_latency_ms"]["to_all_leaders"]["count"] == 1
