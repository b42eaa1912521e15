"""Percentiles, incidents, leader balance (pipeline.stats) and the HTML page (pipeline.html)."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline import html, job, stats
from zkctl.report_command import text_summary


def test_nearest_rank_percentiles() -> None:
    values = list(range(1, 11))
    assert [stats.percentile(values, p) for p in (10, 50, 90, 99, 100)] == [1, 5, 9, 10, 10]
    assert stats.percentile([7], 50) == 7
    with pytest.raises(ValueError, match="no values"):
        stats.percentile([], 50)
    with pytest.raises(ValueError, match="not in"):
        stats.percentile([1], 0)


@given(st.lists(st.integers(-1000, 1000), min_size=1, max_size=60), st.integers(1, 100))
def test_a_percentile_is_a_value_with_p_percent_at_or_below_it(values: list[int], p: int) -> None:
    s = sorted(values)
    v = stats.percentile(s, p)
    assert v in values
    assert sum(1 for x in values if x <= v) >= math.ceil(p / 100 * len(values))
    assert sum(1 for x in values if x < v) < math.ceil(p / 100 * len(values))


def test_summarize_skips_missing_values() -> None:
    assert stats.summarize([None, 30, 10, None, 20]) == {
        "count": 3,
        "p50": 20,
        "p90": 30,
        "p99": 30,
        "max": 30,
        "mean": 20.0,
    }
    assert stats.summarize([]) == {
        "count": 0,
        "p50": None,
        "p90": None,
        "p99": None,
        "max": None,
        "mean": None,
    }


def test_histogram_bins_cover_every_value() -> None:
    h = stats.histogram([0, 1, 2, 10], bins=5)
    assert len(h) == 5
    assert sum(c for *_, c in h) == 4
    assert h[0][0] == 0
    assert h[-1][1] == 10
    assert stats.histogram([]) == []
    assert stats.histogram([3, 3]) == [(3, 3, 2)]


def incident(**kw: Any) -> dict[str, Any]:
    base = {
        "cluster": "c",
        "incident_id": 1,
        "kind": "controller",
        "broker": 1,
        "cause": "lost",
        "controller_epoch": 4,
        "lost_ts": 1000,
        "back_ts": None,
        "new_controller": 2,
        "new_epoch": 5,
        "new_controller_ts": 1004,
        "failover_done_ts": 1030,
    }
    return {**base, **kw}


def test_an_incident_is_completed_with_its_partitions_recovery() -> None:
    done = stats.complete_incident(incident(), stats.IncidentWindows(3, 1045, False, 90))
    assert (done["time_to_controller_ms"], done["time_to_failover_done_ms"]) == (4, 30)
    assert (done["affected_partitions"], done["all_leaders_ts"], done["time_to_leaders_ms"]) == (
        3,
        1045,
        45,
    )
    assert list(done) == list(stats.INCIDENT_FIELDS)
    never = stats.complete_incident(incident(), stats.IncidentWindows(2, 1100, True, 10))
    assert (never["unrecovered"], never["time_to_leaders_ms"], never["all_leaders_ts"]) == (
        True,
        None,
        None,
    )
    calm = stats.complete_incident(incident(kind="broker", new_controller_ts=None), None)
    assert (calm["affected_partitions"], calm["time_to_leaders_ms"]) == (0, None)
    assert calm["time_to_controller_ms"] is None


def test_leader_balance_accumulates_deltas_over_buckets() -> None:
    buckets = {"c": (0, 1000, 3)}
    sums = [
        ("c", 1, 0, 2, 2, 2),  # two partitions created, led by their preferred broker 1
        ("c", 1, 1, -1, 0, -1),  # one moves away (half of them from another map task)
        ("c", 2, 1, 1, 0, 0),
        ("c", 1, 2, 1, 0, 1),  # and back
        ("c", 2, 2, -1, 0, 0),
    ]
    rows = stats.leader_balance(sums, buckets)
    got = {(r[1], r[3]): (r[4], r[5], r[6], r[7]) for r in rows}
    assert got[(0, 1)] == (2, 2, 2, 0.0)
    assert got[(1, 1)] == (1, 2, 1, 50.0)
    assert got[(1, 2)][0] == 1
    assert got[(2, 1)] == (2, 2, 2, 0.0)
    assert got[(2, 2)][0] == 0
    assert [r[2] for r in rows if r[3] == 1] == [1000, 2000, 3000]


def test_bucket_plans_cover_the_span_in_whole_seconds() -> None:
    t0, width, n = stats.bucket_plan(1000, 1000 + 3_600_000, 200)
    assert (t0, width % 1000) == (1000, 0)
    assert n <= 200
    assert t0 + width * n > 1000 + 3_600_000
    assert stats.bucket_plan(5, 5, 200) == (5, 1000, 1)


# --- the page ---------------------------------------------------------------------------------


def summary() -> dict[str, Any]:
    lat = {"count": 2, "p50": 12, "p90": 48, "p99": 48, "max": 48, "mean": 30.0}
    none = {"count": 0, "p50": None, "p90": None, "p99": None, "max": None, "mean": None}
    return {
        "title": "Failover report",
        "generated_at": "2026-11-22T00:00:00+00:00",
        "seconds": 3.5,
        "inputs": [{"cluster": "<east>", "path": "/logs"}],
        "lines": {"ok": 1000, "torn": 1},
        "failover_latency_ms": {
            "to_new_controller": lat,
            "to_failover_done": lat,
            "to_all_leaders": none,
        },
        "clusters": {
            "<east>": {
                "first_ts": 1_800_000_000_000,
                "last_ts": 1_800_000_060_000,
                "controller": {
                    "tenures": 3,
                    "epochs": [1, 3],
                    "end_reasons": {"lost": 2, "open": 1},
                    "no_controller_ms": {"total": 9, "p50": 4, "max": 5},
                    "zombies": 1,
                    "anomalies": {},
                },
                "incidents": {"controller": 2, "broker": 0},
                "partitions": {
                    "count": 6,
                    "leader_changes": 4,
                    "isr_shrinks": 7,
                    "isr_expands": 6,
                    "unclean_elections": 1,
                    "partitions_unavailable": 2,
                    "unavailable_ms": 77,
                    "under_replicated_ms": 5000,
                },
                "fencing": {
                    "request_rejected": {"LeaderAndIsr STALE": 2},
                    "leader_and_isr_rejected": {},
                    "total": 2,
                    "stale": 2,
                    "other_refusals": {},
                },
            }
        },
    }


def plots() -> dict[str, Any]:
    t0 = 1_800_000_000_000
    return {
        "tenures": {
            "<east>": [
                (1, 1, t0, t0 + 20_000),
                (2, 2, t0 + 20_004, t0 + 40_000),
                (3, 3, t0 + 40_005, t0 + 60_000),
            ]
        },
        "gaps": {"<east>": [(t0 + 20_000, t0 + 20_004), (t0 + 40_000, t0 + 40_005)]},
        "incidents": [
            {
                "cluster": "<east>",
                "incident_id": i,
                "lost_ts": t0 + 20_000 * i,
                "kind": "controller",
                "broker": i,
                "cause": "lost <script>",
                "new_controller": 2,
                "new_epoch": 2,
                "time_to_controller_ms": ms,
                "affected_partitions": 2,
                "unrecovered": False,
                "time_to_leaders_ms": None,
            }
            for i, ms in ((1, 12), (2, 48))
        ],
        "top_partitions": [
            {
                "cluster": "<east>",
                "topic": "t",
                "partition": 0,
                "unavailable_ms": 50,
                "unavailable_windows": 2,
            }
        ],
        "balance": [
            ("<east>", k, t0 + 1000 * (k + 1), b, 3 - b + k % 2, 2, 1, 50.0, 0)
            for k in range(5)
            for b in (1, 2)
        ],
    }


def test_the_page_shows_the_summary_and_escapes_what_it_quotes() -> None:
    page = html.render(summary(), plots())
    assert page.startswith("<!DOCTYPE html>")
    for text in ("12 ms", "48 ms", "1,000", "7 / 6", "incidents"):
        assert text in page
    assert "<script>" not in page
    assert "&lt;east&gt;" in page
    svgs = re.findall(r"<svg.*?</svg>", page, re.DOTALL)
    assert len(svgs) >= 4  # epochs, two latency histograms, partitions, balance
    for svg in svgs:
        ET.fromstring(svg)  # well-formed


def test_the_page_copes_with_no_data() -> None:
    s = summary()
    s["clusters"] = {}
    page = html.render(s, {"incidents": [], "top_partitions": [], "balance": []})
    assert "No partition was ever without a leader" in page
    assert html.timeline_svg([], []).startswith("<p")
    assert html.histogram_svg([], "x").startswith("<p")


def test_a_time_no_calendar_can_show_is_shown_as_its_number() -> None:
    assert html.fmt_ts(1_700_000_000_123) == "2023-11-14 22:13:20.123"
    assert html.fmt_ts(1_700_000_000_000_006) == "1700000000000006"
    assert html.fmt_ts(-(10**17)) == "-100000000000000000"


# --- fencing ----------------------------------------------------------------------------------


def fencing_row(event: str, error: str, n: int, api: str | None = None) -> dict[str, Any]:
    """A row of the job's count of the fencing table (by cluster, event, api and error)."""
    return {
        "cluster": "c",
        "event": event,
        "api": api,
        "error": error,
        "n": n,
        "min_epoch": 3,
        "max_epoch": 3,
    }


def summary_of(fencing_counts: list[dict[str, Any]]) -> dict[str, Any]:
    lines = {"lines": {"ok": 10}, "first_ts": 1_800_000_000_000, "last_ts": 1_800_000_001_000}
    return job.build_summary(
        job.ReportOptions([], "report"), [], {"c": lines}, {}, [], {}, {}, fencing_counts, 1.0
    )


def card(page: str, label: str) -> str:
    found = re.search(r'<div class="v">([^<]*)</div><div class="k">' + re.escape(label), page)
    assert found, label
    return found.group(1)


def cell(page: str, label: str) -> str:
    found = re.search(r"<td>" + re.escape(html.esc(label)) + r"</td><td>([^<]*)</td>", page)
    assert found, label
    return found.group(1)


def test_a_partition_state_refused_for_another_reason_than_its_epoch_is_no_fencing() -> None:
    # A `make demo` run with no controller fenced: three brokers told to lead partitions
    # whose logs they do not have refused (item 34), one broker not a replica.
    s = summary_of(
        [
            fencing_row("leader_and_isr", "REPLICA_NOT_AVAILABLE", 3),
            fencing_row("leader_and_isr", "UNKNOWN_TOPIC_OR_PARTITION", 1),
        ]
    )
    assert s["clusters"]["c"]["fencing"] == {
        "request_rejected": {},
        "leader_and_isr_rejected": {"REPLICA_NOT_AVAILABLE": 3, "UNKNOWN_TOPIC_OR_PARTITION": 1},
        "total": 4,
        "stale": 0,
        "other_refusals": {"REPLICA_NOT_AVAILABLE": 3, "UNKNOWN_TOPIC_OR_PARTITION": 1},
    }
    line = text_summary(s)[-1]
    assert line.endswith(
        "0 stale requests rejected (fencing), 4 partition states refused for another reason"
        " (REPLICA_NOT_AVAILABLE: 3, UNKNOWN_TOPIC_OR_PARTITION: 1)"
    )
    page = html.render(s, {})
    assert card(page, "stale requests rejected (fencing)") == "0"
    assert cell(page, "stale requests rejected (fencing)") == "0"
    assert cell(page, "stale partition states rejected (fencing: an older leader epoch)") == "0"
    assert (
        cell(page, "partition states refused for another reason")
        == "REPLICA_NOT_AVAILABLE: 3, UNKNOWN_TOPIC_OR_PARTITION: 1"
    )
    assert "{&#x27;" not in page  # no Python dict anywhere


def test_stale_epochs_are_fencing() -> None:
    s = summary_of(
        [
            fencing_row("request_rejected", "STALE_CONTROLLER_EPOCH", 2, api="LeaderAndIsr"),
            fencing_row("request_rejected", "STALE_BROKER_EPOCH", 1, api="UpdateMetadata"),
            fencing_row("leader_and_isr", "STALE_CONTROLLER_EPOCH", 4),
            fencing_row("leader_and_isr", "REPLICA_NOT_AVAILABLE", 3),
        ]
    )
    f = s["clusters"]["c"]["fencing"]
    assert (f["total"], f["stale"], f["other_refusals"]) == (10, 7, {"REPLICA_NOT_AVAILABLE": 3})
    assert text_summary(s)[-1].endswith(
        "7 stale requests rejected (fencing), 3 partition states refused for another reason"
        " (REPLICA_NOT_AVAILABLE: 3)"
    )
    page = html.render(s, {})
    assert card(page, "stale requests rejected (fencing)") == "7"
    assert (
        cell(page, "stale requests rejected (fencing)")
        == "LeaderAndIsr STALE_CONTROLLER_EPOCH: 2, UpdateMetadata STALE_BROKER_EPOCH: 1"
    )
    assert (
        cell(page, "stale partition states rejected (fencing: an older leader epoch)")
        == "STALE_CONTROLLER_EPOCH: 4"
    )
    assert cell(page, "partition states refused for another reason") == "REPLICA_NOT_AVAILABLE: 3"
    no_refusal = summary_of([])
    assert text_summary(no_refusal)[-1].endswith("0 stale requests rejected (fencing)")
