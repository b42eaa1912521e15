"""`zkctl report`'s Spark job against logs with known answers.

The generator (pipeline/generate.py) drives the controller's real state machines and keeps
its own record of what happened, in true time; each broker's clock is off by up to
SKEW_MS. The report reads only the logs. Times must agree within the clocks' disagreement;
counts, epochs and final states exactly. Then the same logs, damaged (duplicated lines, a
torn last line, garbage, lines of a newer schema, a clock far off), must give the same
answers, with the damage counted.

One Spark session (local[2], pipeline.testing) serves every test of the run.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline import generate, inputs, job, schema, stats, testing

SKEW_MS = 3.0
TOL = SKEW_MS + 1  # a logged ts is floor(true time + the broker's offset)

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    with testing.shared_session() as session:
        yield session


def report(spark: Any, out: Path, *logs: str, tol_ms: int = 50) -> dict[str, Any]:
    options = job.ReportOptions(
        sources=inputs.parse_log_args(list(logs)), out=str(out), tol_ms=tol_ms
    )
    return job.run(options, lambda _t: None, spark=spark).summary


def table(spark: Any, out: Path, name: str) -> list[dict[str, Any]]:
    return [r.asDict() for r in spark.read.parquet(str(out / name)).collect()]


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("gen")
    truth = generate.generate(
        generate.Options(
            brokers=4, partitions=150, failovers=20, out=root / "logs", seed=7, skew_ms=SKEW_MS
        )
    )
    return root / "logs", truth


@pytest.fixture(scope="module")
def clean(
    spark: Any, generated: tuple[Path, dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    logs, truth = generated
    out = tmp_path_factory.mktemp("report")
    summary = report(spark, out, f"sim={logs}")
    return out, summary, truth


def test_every_line_is_read_and_usable(clean: tuple[Path, dict[str, Any], dict[str, Any]]) -> None:
    _out, summary, truth = clean
    lines = summary["lines"]
    assert lines["ok"] == truth["total_lines"]
    assert sum(v for k, v in lines.items() if k not in ("ok", "duplicate")) == 0
    assert lines["duplicate"] == 0


def test_tenures_match_the_truth(
    spark: Any, clean: tuple[Path, dict[str, Any], dict[str, Any]]
) -> None:
    out, _summary, truth = clean
    got = sorted(table(spark, out, "tenures"), key=lambda t: t["epoch"])
    want = truth["tenures"]
    assert [(t["epoch"], t["broker"]) for t in got] == [(t["epoch"], t["broker"]) for t in want]
    for g, w in zip(got, want, strict=True):
        assert abs(g["start_ts"] - w["start"]) <= TOL, (g, w)
        if w["end"] is None:
            assert g["open"]
            assert g["end_ts"] is None
        else:
            assert abs(g["end_ts"] - w["end"]) <= TOL, (g, w)
            assert g["end_reason"] == w["end_reason"]
        # A paused controller that came back resigned after its successor: a zombie.
        assert (g["overlap_ms"] is not None) == ("resigned" in w), (g, w)
    gaps = table(spark, out, "controller_gaps")
    assert len(gaps) == len(want) - 1
    for gap in gaps:
        before = next(w for w in want if w["epoch"] == gap["before_epoch"])
        after = next(w for w in want if w["epoch"] == gap["after_epoch"])
        assert abs(gap["duration_ms"] - (before["start"] - after["end"])) <= 2 * TOL


def test_incidents_match_the_truth(
    spark: Any, clean: tuple[Path, dict[str, Any], dict[str, Any]]
) -> None:
    out, _summary, truth = clean
    got = sorted(table(spark, out, "incidents"), key=lambda i: i["lost_ts"])
    want = sorted(truth["incidents"], key=lambda i: i["lost"])
    assert [(i["kind"], i["broker"]) for i in got] == [(i["kind"], i["broker"]) for i in want]
    faults = {w["fault"] for w in want}
    assert faults == set(generate.FAULTS), "the scenario should exercise every fault"
    for g, w in zip(got, want, strict=True):
        assert abs(g["lost_ts"] - w["lost"]) <= TOL, (g, w)
        assert g["new_controller"] == w.get("new_controller"), (g, w)
        assert g["new_epoch"] == w.get("new_epoch"), (g, w)
        if w.get("new_controller_ts") is not None:
            assert abs(g["new_controller_ts"] - w["new_controller_ts"]) <= TOL
            assert abs(g["time_to_controller_ms"] - (w["new_controller_ts"] - w["lost"])) <= (
                2 * TOL
            )
        assert g["affected_partitions"] == w["affected"], (g, w)
        assert g["unrecovered"] == w["unrecovered"]
        if w["all_leaders_ts"] is None:
            assert g["all_leaders_ts"] is None
        else:
            assert abs(g["all_leaders_ts"] - w["all_leaders_ts"]) <= TOL, (g, w)
            assert abs(g["time_to_leaders_ms"] - (w["all_leaders_ts"] - w["lost"])) <= 2 * TOL
        if w["kind"] == "broker":
            # Only a stop whose controlled shutdown moved every leadership is graceful, not
            # one whose attempts all failed, nor a later loss of a broker stopped and back
            # since. A failed stop's session close and the controller's notice of it are
            # a few ms apart: whichever clock stamped first names it.
            causes = (
                {w["cause"], "deregistered"} if w["cause"] == "session closed" else {w["cause"]}
            )
            assert g["cause"] in causes, (g, w)
        if w["fault"] == "pause_controller":
            assert "zombie" in g["cause"]
    assert any(w["affected"] for w in want), "some losses should leave partitions leaderless"


def test_partitions_match_the_truth(
    spark: Any, clean: tuple[Path, dict[str, Any], dict[str, Any]]
) -> None:
    out, summary, truth = clean
    got = {f"{r['topic']}-{r['partition']}": r for r in table(spark, out, "partition_stats")}
    want = truth["partitions"]
    assert set(got) == set(want)
    for key, w in want.items():
        g = got[key]
        for f in ("isr_shrinks", "isr_expands", "leader_changes", "unavailable_windows"):
            assert g[f] == w[f], (key, f, g, w)
        assert (g["final_leader"], g["final_leader_epoch"], g["final_isr"]) == (
            w["final_leader"],
            w["final_leader_epoch"],
            w["final_isr"],
        ), key
        assert g["replicas"] == w["replicas"]
        assert abs(g["unavailable_ms"] - w["unavailable_ms"]) <= 2 * TOL * max(
            1, w["unavailable_windows"]
        ), (key, g, w)
    totals = truth["totals"]
    c = summary["clusters"]["sim"]["partitions"]
    assert c["isr_shrinks"] == totals["isr_shrinks"] > 0
    assert c["isr_expands"] == totals["isr_expands"] > 0
    assert c["unclean_elections"] == totals["unclean_elections"] > 0
    windows = table(spark, out, "partition_windows")
    unavailable = [w for w in windows if w["kind"] == "unavailable"]
    assert len(unavailable) == totals["unavailable_windows"]
    assert all(w["end_ts"] >= w["start_ts"] for w in windows)


def test_fencing_is_counted(spark: Any, clean: tuple[Path, dict[str, Any], dict[str, Any]]) -> None:
    out, summary, truth = clean
    fencing = table(spark, out, "fencing")
    requests = [f for f in fencing if f["event"] == "request_rejected"]
    assert len(requests) == truth["totals"]["rejected_requests"] > 0
    assert all(f["error"] == "STALE_CONTROLLER_EPOCH" for f in requests)
    counted = summary["clusters"]["sim"]["fencing"]
    assert counted["total"] == len(fencing)
    # Fencing is the refusals for a stale epoch; a replica not told it is one is not.
    stale = [f for f in fencing if f["error"] in job.STALE_EPOCH_ERRORS]
    assert counted["stale"] == len(stale) >= len(requests)
    others = [f["error"] for f in fencing if f["error"] not in job.STALE_EPOCH_ERRORS]
    assert counted["other_refusals"] == {e: others.count(e) for e in sorted(set(others))}


def test_summary_percentiles_are_the_incidents(
    spark: Any, clean: tuple[Path, dict[str, Any], dict[str, Any]]
) -> None:
    out, summary, _truth = clean
    incidents = table(spark, out, "incidents")
    for key, column in (
        ("to_new_controller", "time_to_controller_ms"),
        ("to_all_leaders", "time_to_leaders_ms"),
    ):
        want = stats.summarize(i[column] for i in incidents)
        assert summary["failover_latency_ms"][key] == want
        assert want["count"] is not None
        assert want["count"] > 0


def test_leader_balance_counts_every_partition(
    spark: Any, clean: tuple[Path, dict[str, Any], dict[str, Any]]
) -> None:
    out, _summary, truth = clean
    rows = table(spark, out, "leader_balance")
    last = max(r["bucket"] for r in rows)
    final = [r for r in rows if r["bucket"] == last]
    # At the end every partition is led by someone (or counted as leaderless, broker -1)...
    assert sum(r["leaders"] for r in final) == len(truth["partitions"])
    # ...and prefers exactly one broker; the leaders match the truth's final leaders.
    assert sum(r["preferred"] for r in final) == len(truth["partitions"])
    by_broker = {r["broker"]: r["leaders"] for r in final}
    for b in {p["final_leader"] for p in truth["partitions"].values()}:
        want = sum(1 for p in truth["partitions"].values() if p["final_leader"] == b)
        assert by_broker.get(b) == want


def test_html_report_shows_the_summary(clean: tuple[Path, dict[str, Any], dict[str, Any]]) -> None:
    out, summary, _truth = clean
    page = (out / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert "<svg" in page
    lat = summary["failover_latency_ms"]["to_new_controller"]
    for p in ("p50", "p99"):
        assert f"{lat[p]:,.0f} ms" in page
    assert "{&#x27;" not in page  # counts by name are "NAME: n", not a Python dict
    assert json.loads((out / "summary.json").read_text()) == json.loads(
        json.dumps(summary, default=str)
    )


# --- damaged input --------------------------------------------------------------------------


def _analysis(spark: Any, out: Path) -> dict[str, Any]:
    """What a report concluded, without timings of its own making."""
    return {
        "tenures": sorted(
            (t["epoch"], t["broker"], t["start_ts"], t["end_ts"], t["end_reason"])
            for t in table(spark, out, "tenures")
        ),
        "incidents": sorted(
            (i["kind"], i["broker"], i["lost_ts"], i["affected_partitions"], i["all_leaders_ts"])
            for i in table(spark, out, "incidents")
        ),
        "partitions": sorted(
            tuple(
                r[k]
                for k in (
                    "topic",
                    "partition",
                    "isr_shrinks",
                    "isr_expands",
                    "leader_changes",
                    "unavailable_ms",
                    "unavailable_windows",
                    "under_replicated_ms",
                    "final_leader",
                    "final_leader_epoch",
                )
            )
            for r in table(spark, out, "partition_stats")
        ),
        "fencing": len(table(spark, out, "fencing")),
    }


def test_damaged_logs_give_the_same_answers_and_the_damage_is_counted(
    spark: Any,
    generated: tuple[Path, dict[str, Any]],
    clean: tuple[Path, dict[str, Any], dict[str, Any]],
    tmp_path: Path,
) -> None:
    logs, _truth = generated
    damaged = tmp_path / "logs"
    shutil.copytree(logs, damaged)
    files = sorted(damaged.rglob("state-change.log"))
    # The same lines twice: one broker's whole file shipped again, and single lines repeated.
    copy = damaged / "again" / "state-change.log.1"
    copy.parent.mkdir()
    shutil.copy(files[0], copy)
    repeated = 0
    for f in files[1:]:
        lines = f.read_text().splitlines(keepends=True)
        out_lines = []
        for i, line in enumerate(lines):
            out_lines.append(line)
            if i % 97 == 0:
                out_lines.append(line)
                repeated += 1
        f.write_text("".join(out_lines))
    duplicates = len(files[0].read_text().splitlines()) + repeated
    # Garbage, a newer schema, an unknown event, a line missing a field, and a torn end.
    extra = [
        "not json at all\n",
        '{"ts": 1, "v": 1, "broker": 1, "event": "partition_state", "topic": "t"}\n',
        '{"ts": 5, "v": 2, "broker": 1, "event": "partition_state", "shape": "new"}\n',
        '{"ts": 5, "v": 3, "broker": 2, "event": "brand_new_event"}\n',
        '{"ts": 6, "v": 1, "broker": 2, "event": "some_future_event"}\n',
        '{"ts": "yesterday", "v": 1, "broker": 2, "event": "controller_seen"}\n',
        # A valid long past year 9999: the page cannot show it (it crashed rendering).
        '{"ts": 1700000000000006, "v": 1, "broker": 2, "event": "controller_seen",'
        ' "controller": 1, "reason": "x"}\n',
        "[1, 2, 3]\n",
        "\n",
    ]
    with files[1].open("a") as log_file:
        log_file.writelines(extra)
        log_file.write('{"ts":1800000000123,"v":1,"broker":2,"event":"leader_and_is')  # no newline
    out = tmp_path / "report"
    summary = report(spark, out, f"sim={damaged}")
    lines = summary["lines"]
    assert lines["duplicate"] == duplicates
    assert lines["torn"] == 1
    assert lines["newer_version"] == 2
    assert lines["unknown_event"] == 1
    assert lines["invalid"] == 2
    assert lines["malformed"] == 3
    assert lines["blank"] == 1
    clean_out, _s, _t = clean
    assert _analysis(spark, out) == _analysis(spark, clean_out)
    rejected = table(spark, out, "rejected_lines")
    assert sorted(r["status"] for r in rejected) == sorted(
        ["malformed"] * 3
        + ["invalid", "invalid", "newer_version", "newer_version", "unknown_event", "torn"]
    )
    assert {r["detail"] for r in rejected if r["status"] == "invalid"} == {"partition", "ts"}
    assert (out / "report.html").exists()
    torn = next(r for r in rejected if r["status"] == "torn")
    assert torn["line"].endswith('"event":"leader_and_is')


def test_clocks_far_apart_change_no_count(spark: Any, tmp_path: Path) -> None:
    """Brokers' clocks 25 ms apart: events of one decision land out of time order across
    logs, yet ordering by epoch gives every ISR change, leader change and final state."""
    truth = generate.generate(
        generate.Options(
            brokers=3, partitions=60, failovers=10, out=tmp_path / "logs", seed=11, skew_ms=25
        )
    )
    out = tmp_path / "report"
    summary = report(spark, out, f"skewed={tmp_path / 'logs'}", tol_ms=100)
    got = {f"{r['topic']}-{r['partition']}": r for r in table(spark, out, "partition_stats")}
    for key, w in truth["partitions"].items():
        g = got[key]
        for f in ("isr_shrinks", "isr_expands", "leader_changes", "unavailable_windows"):
            assert g[f] == w[f], (key, f)
        assert g["final_isr"] == w["final_isr"]
    incidents = sorted(table(spark, out, "incidents"), key=lambda i: i["lost_ts"])
    want = sorted(truth["incidents"], key=lambda i: i["lost"])
    assert [(i["broker"], i["affected_partitions"]) for i in incidents] == [
        (i["broker"], i["affected"]) for i in want
    ]
    assert summary["lines"]["ok"] == truth["total_lines"]


def test_several_clusters_are_kept_apart(
    spark: Any, generated: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    logs, truth = generated
    out = tmp_path / "report"
    summary = report(spark, out, f"east={logs}", f"west={logs}")
    assert set(summary["clusters"]) == {"east", "west"}
    for c in summary["clusters"].values():
        assert c["controller"]["tenures"] == len(truth["tenures"])
        assert c["controller"]["anomalies"] == {}
        assert c["lines"]["duplicate"] == 0


# --- the classifier on Spark agrees with the Python one ---------------------------------------

_SEEN = '{"ts":1,"v":1,"broker":1,"event":"controller_seen","controller":2,"reason":"x"}'
CORPUS = [
    _SEEN,
    # Text after the object (Spark's JSON reader ignores what follows the first value):
    # two lines run together (a file whose last line had no newline, with another
    # appended by cat), garbage, a stray brace, a trailing comma, an array closed early.
    _SEEN + '{"ts":2,"v":1,"broker":1,"event":"controller_seen","controller":3,"reason":"x"}',
    _SEEN + " garbage",
    _SEEN + "}",
    _SEEN + ",",
    _SEEN + '],[{"ts":2}',
    _SEEN + "]x",
    _SEEN + ',1],[{"ts":2}',
    '{"ts":1,"v":2,"broker":1,"event":"controller_seen","controller":2}{"v":3}',
    '{"ts":1,"v":1,"broker":1,"event":"controller_seen"}',
    '{"ts":1,"v":1,"broker":1,"event":"controller_seen","controller":null}',
    '{"ts":1,"v":1,"broker":1,"event":"controller_seen","controller":2.0}',
    '{"ts":1,"v":1,"broker":1,"event":"controller_seen","controller":true}',
    '{"ts":1,"v":1,"broker":1,"event":"controller_seen","controller":"2"}',
    '{"ts":1,"v":1,"broker":1,"event":"controller_seen","controller":4294967296}',
    '{"ts":1.5,"v":1,"broker":1,"event":"controller_seen","controller":1}',
    '{"ts":99999999999999999999,"v":1,"broker":1,"event":"controller_seen","controller":1}',
    '{"ts":1700000000000006,"v":1,"broker":1,"event":"controller_seen","controller":1}',
    '{"ts":253402300800000,"v":1,"broker":1,"event":"controller_seen","controller":1}',
    '{"ts":253402300799999,"v":1,"broker":1,"event":"controller_seen","controller":1}',
    '{"ts":-1,"v":1,"broker":1,"event":"nope"}',
    '{"ts":0,"v":1,"broker":1,"event":"controller_seen","controller":1}',
    '{"ts":1,"v":0,"broker":1,"event":"controller_seen","controller":1}',
    '{"ts":1,"v":2,"broker":1,"event":"controller_seen","controller":"anything"}',
    '{"ts":1,"v":1,"broker":1,"event":"nope"}',
    '{"ts":1,"v":1,"broker":1}',
    '{"ts":1,"v":1,"event":"controller_seen","controller":1}',
    '{"ts":1,"v":1,"broker":1,"event":"isr_change","topic":"t","partition":0,"leader":1,'
    '"leader_epoch":0,"isr":[1,null]}',
    '{"ts":1,"v":1,"broker":1,"event":"isr_change","topic":"t","partition":0,"leader":1,'
    '"leader_epoch":0,"isr":"1,2"}',
    '{"ts":1,"v":1,"broker":1,"event":"isr_change","topic":5,"partition":0,"leader":1,'
    '"leader_epoch":0,"isr":[1]}',
    '{"ts":1,"v":1,"broker":1,"event":"partition_state","topic":"t","partition":0,'
    '"leader":1,"leader_epoch":0,"isr":[1],"controller_epoch":1}',
    '{"ts":1,"v":1,"broker":1,"event":"broker_change","controller_epoch":1,"new":[],'
    '"dead":[2],"extra":{"nested":[1,2]}}',
    '{"ts":1,"v":1,"broker":1,"event":"controller_failover","controller_epoch":1,"total_ms":"NaN"}',
    '{"ts":1,"v":1,"broker":1,"event":"controller_failover","controller_epoch":1,'
    '"total_ms":"fast"}',
    "{}",
    "[]",
    "null",
    '"text"',
    "{bad json",
    "   ",
    "",
]


def test_spark_and_python_classify_alike(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "state-change.log"
    path.write_text("\n".join(CORPUS) + "\n")
    lines = job.read_lines(spark, [inputs.resolve(inputs.LogSource("c", str(path)))])
    got = {
        (r["line"] if r["status"] != "blank" else ""): (r["status"], r["detail"])
        for r in job.classify(lines, []).collect()
        if r["status"] != "ok"
    }
    for text in CORPUS:
        want = schema.classify_line(text)
        if want.status == "ok":
            assert text not in got, text
            continue
        key = "" if want.status == "blank" else text
        status, detail = got[key]
        assert status == want.status, (text, status, want)
        if status in ("invalid", "unknown_event"):
            assert detail == want.detail, (text, detail, want)


def test_a_torn_last_line_after_a_whole_object_is_torn(spark: Any, tmp_path: Path) -> None:
    """A file's last line, without its newline, that holds a whole object and the start of
    another (two lines run together, the second cut off): torn, as schema.classify_line
    says, not the first object read as ok and the rest dropped uncounted."""
    path = tmp_path / "state-change.log"
    tail = _SEEN + '{"ts":2,"v":1,"bro'
    path.write_text(_SEEN + "\n" + tail)
    lines = job.read_lines(spark, [inputs.resolve(inputs.LogSource("c", str(path)))])
    torn = [(f"file:{path}", tail)]
    got = sorted(r["status"] for r in job.classify(lines, torn).collect())
    assert schema.classify_line(tail, torn=True).status == "torn"
    assert got == ["ok", "torn"]


def test_logs_with_nothing_usable_are_an_error(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "state-change.log").write_text("garbage\n{}\n")
    with pytest.raises(job.ReportError, match="no usable state-change log lines"):
        report(spark, tmp_path / "out", str(tmp_path))


def test_logs_under_a_path_a_uri_escapes_are_read_and_a_torn_end_counted(
    spark: Any, tmp_path: Path
) -> None:
    # Spark lists files as percent-encoded URIs (`kafka%20logs`); the torn-line check read
    # them as Hadoop path strings, encoded again: FileNotFoundException, a raw stack trace.
    f = tmp_path / "kafka logs" / "caf\u00e9 #1" / "state-change.log"
    f.parent.mkdir(parents=True)
    elected = {"event": "controller_elected", "controller": 1, "controller_epoch": 1}
    f.write_text(
        json.dumps({"ts": 1_800_000_000_000, "v": 1, "broker": 1, **elected, "epoch_zk_version": 0})
        + "\n"
        + '{"ts":1800000000009,"v":1,"bro'
    )
    summary = report(spark, tmp_path / "report out", str(tmp_path / "kafka logs"))
    assert (summary["lines"]["ok"], summary["lines"]["torn"]) == (1, 1)
    assert summary["lines"]["malformed"] == 0


def test_local_paths_with_glob_characters_are_read_as_they_are(spark: Any, tmp_path: Path) -> None:
    # Spark globs every path it is handed: a directory named `logs[1]` matched nothing.
    for name in ("logs[1]", "a{b,c}", "s*t?", "back\\slash"):
        f = tmp_path / name / "state-change.log"
        f.parent.mkdir()
        f.write_text("{}\n{}\n")
        source = inputs.resolve(inputs.LogSource("c", str(tmp_path / name)))
        assert job.read_lines(spark, [source]).count() == 2, name


def _elected_line(ts: int = 1_800_000_000_000) -> str:
    elected = {"event": "controller_elected", "controller": 1, "controller_epoch": 1}
    return json.dumps({"ts": ts, "v": 1, "broker": 1, **elected, "epoch_zk_version": 0}) + "\n"


def test_an_output_directory_with_glob_characters_is_read_back_as_it_is(
    spark: Any, tmp_path: Path
) -> None:
    # The job reads its partition tables back from --out, and Spark globs every path it
    # is handed: `report[1]/partition_windows` matched nothing ([PATH_NOT_FOUND]).
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "state-change.log").write_text(_elected_line())
    for name in ("report[1]", "a{b,c}", "s*t?", "back\\slash"):
        summary = report(spark, tmp_path / name, str(logs))
        assert summary["lines"]["ok"] == 1, name
        assert (tmp_path / name / "report.html").is_file(), name


def test_relative_paths_with_a_colon_are_read_and_written(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Hadoop takes `logs-10:` of a relative `logs-10:00/state-change.log` for a URI scheme:
    # "java.net.URISyntaxException: Relative path in absolute URI"; --out the same.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "logs-10:00").mkdir()
    (tmp_path / "logs-10:00" / "state-change.log").write_text(_elected_line())
    summary = report(spark, Path("report-10:00"), "logs-10:00")
    assert summary["lines"]["ok"] == 1
    assert (tmp_path / "report-10:00" / "report.html").is_file()
    assert len(table(spark, tmp_path / "report-10:00", "tenures")) == 1


def test_a_log_file_that_cannot_be_read_is_a_one_line_error(spark: Any, tmp_path: Path) -> None:
    missing = (tmp_path / "gone" / "state-change.log").as_uri()
    with pytest.raises(job.ReportError) as e:
        job.torn_lines(spark, [missing])
    assert str(e.value).startswith(f"cannot read {missing}: java.io.FileNotFoundException")
    assert "\n" not in str(e.value)


def _cut_rotated_log(logs: Path) -> Path:
    """A log directory holding a partial copy of a rotated log: its gzip stream ends early."""
    logs.mkdir()
    (logs / "state-change.log").write_text(_elected_line())
    whole = gzip.compress(
        "".join(_elected_line(1_800_000_000_000 - n) for n in range(1, 400)).encode()
    )
    cut = logs / "state-change.log.1.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    return cut


def test_a_compressed_log_cut_short_is_a_one_line_error(spark: Any, tmp_path: Path) -> None:
    # Spark raised it while the job read the lines: a raw Py4JJavaError, never a ReportError.
    cut = _cut_rotated_log(tmp_path / "logs")
    with pytest.raises(job.ReportError) as e:
        report(spark, tmp_path / "out", str(tmp_path / "logs"))
    assert str(e.value) == (
        f"cannot read {inputs.normalize_uri(cut.as_uri())}:"
        " java.io.EOFException: Unexpected end of input stream"
    )


def test_a_java_exception_in_one_line() -> None:
    assert job._java_line("java.io.EOFException: cut\n\tat x.y(Z.java:1)") == (
        "java.io.EOFException: cut"
    )
    # A Python task's traceback (PythonException): the exception it ends with.
    trace = (
        "org.apache.spark.api.python.PythonException: [PYTHON_EXCEPTION] An exception was"
        " thrown from the Python worker: Traceback (most recent call last):\n"
        '  File "w.py", line 1, in f\n    1 / 0\nZeroDivisionError: division by zero\n'
        " SQLSTATE: 38000"
    )
    assert job._java_line(trace) == "ZeroDivisionError: division by zero"
    assert job._java_line("") == ""


def test_a_spark_error_ends_zkctl_report_in_one_line(tmp_path: Path) -> None:
    # In a process of its own, as a user runs it: the report's own Spark session was stopped
    # before zkctl formatted the error, and str() of a Py4J error needs the JVM: a second
    # traceback (ConnectionRefusedError) after the first.
    _cut_rotated_log(tmp_path / "logs")
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "zkctl", "report", "--master", "local[1]"),
            *("--logs", str(tmp_path / "logs"), "--out", str(tmp_path / "out")),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(root)},
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "\tat " not in proc.stderr  # nor a Java stack trace
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("zkctl: error: cannot read file:/"), proc.stderr
    assert last.endswith(
        "state-change.log.1.gz: java.io.EOFException: Unexpected end of input stream"
    )


def test_a_topic_deleted_and_created_again_is_two_generations(spark: Any, tmp_path: Path) -> None:
    """Leader epochs restart at 0 when a topic is created again: each incarnation is walked
    on its own, and a topic being deleted is neither unavailable nor under-replicated."""

    def line(ts: int, broker: int, event: str, **f: Any) -> str:
        return json.dumps({"ts": ts, "v": 1, "broker": broker, "event": event, **f})

    def ps(ts: int, leader: int, epoch: int, isr: list[int], reason: str) -> str:
        return line(
            ts,
            1,
            "partition_state",
            topic="t",
            partition=0,
            leader=leader,
            leader_epoch=epoch,
            isr=isr,
            replicas=[1, 2],
            controller_epoch=1,
            reason=reason,
        )

    lines = [
        line(0, 1, "controller_elected", controller=1, controller_epoch=1),
        ps(10, 1, 0, [1, 2], "new"),
        ps(5000, -1, 1, [2], "deleted"),
        ps(5001, -1, 2, [2], "deleted"),
        line(5100, 1, "topic_deleted", topic="t", controller_epoch=1),
        ps(9000, 2, 0, [2], "new"),
        line(
            9500,
            1,
            "isr_change",
            topic="t",
            partition=0,
            leader=2,
            leader_epoch=0,
            isr=[2, 1],
            zk_version=1,
            why="replica 1 caught up",
        ),
        line(10000, 2, "broker_registered", broker_epoch=5),
    ]
    (tmp_path / "state-change.log").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    report(spark, out, str(tmp_path))
    [st] = table(spark, out, "partition_stats")
    assert st["generations"] == 2
    assert (st["final_leader"], st["final_leader_epoch"], st["final_isr"]) == (2, 0, [2, 1])
    assert st["unavailable_windows"] == 0
    windows = table(spark, out, "partition_windows")
    # Only the new incarnation's start, with one replica of two in its ISR.
    assert [(w["kind"], w["start_ts"], w["end_ts"]) for w in windows] == [
        ("under_replicated", 9000, 9500)
    ]


def test_a_topic_created_again_is_split_at_its_deletion_when_its_first_creation_is_gone(
    spark: Any, tmp_path: Path
) -> None:
    """The first incarnation's `new` states are in a rolled file since deleted, so only the
    `topic_deleted` line separates the incarnations, whose leader epochs overlap (the new
    one's restart at 0). Broker 2's clock runs 30 ms ahead, broker 3's 20 ms behind, so
    lines of each incarnation are stamped on the other side of the deletion (tolerance 50).

    t-0: led by 2 (epoch 3, ISR [2, 3] of [2, 3, 1]: under-replicated from 1000); 2's ISR
    expansion (zkVersion 8) was written just before the deletion but is stamped 4020,
    after it (4005) and after the new incarnation's creation (4010). Created again led
    by 3 (epoch 0, replicas [3, 1]), which applies it and shrinks the ISR to [3] at 4030
    (stamped 3992 and 4010), and expands it again at 5000.
    t-1: leaderless since 1000 (epoch 5), deleted at 4001, created again led by 1.
    """

    def line(ts: int, broker: int, event: str, **f: Any) -> str:
        return json.dumps({"ts": ts, "v": 1, "broker": broker, "event": event, **f})

    def ps(ts: int, p: int, leader: int, epoch: int, isr: list[int], reps: list[int], reason: str,
           zkv: int) -> str:  # fmt: skip
        return line(
            ts, 1, "partition_state", topic="t", partition=p, leader=leader, leader_epoch=epoch,
            isr=isr, replicas=reps, controller_epoch=1, reason=reason, zk_version=zkv,
        )  # fmt: skip

    def applied(ts: int, broker: int, p: int, epoch: int, isr: list[int], reps: list[int]) -> str:
        return line(
            ts, broker, "leader_and_isr", topic="t", partition=p, leader=broker,
            leader_epoch=epoch, isr=isr, replicas=reps, controller_id=1, controller_epoch=1,
            result="applied", error=None,
        )  # fmt: skip

    def isr(ts: int, broker: int, epoch: int, isr_: list[int], zkv: int) -> str:
        return line(
            ts, broker, "isr_change", topic="t", partition=0, leader=broker, leader_epoch=epoch,
            isr=isr_, zk_version=zkv, why="test",
        )  # fmt: skip

    old0, new0, reps1 = [2, 3, 1], [3, 1], [1, 3]
    lines = [
        line(0, 1, "controller_elected", controller=1, controller_epoch=1, epoch_zk_version=0),
        ps(1000, 0, 2, 3, [2, 3], old0, "preferred", 7),
        applied(1031, 2, 0, 3, [2, 3], old0),
        ps(1000, 1, -1, 5, [1], reps1, "offline", 4),
        isr(4020, 2, 3, [2, 3, 1], 8),
        ps(4000, 0, -1, 4, [2, 3, 1], old0, "deleted", 9),
        ps(4001, 1, -1, 6, [1], reps1, "deleted", 5),
        line(4005, 1, "topic_deleted", topic="t", controller_epoch=1),
        ps(4010, 0, 3, 0, [3, 1], new0, "new", 0),
        ps(4011, 1, 1, 0, [1, 3], reps1, "new", 0),
        applied(3992, 3, 0, 0, [3, 1], new0),
        applied(4012, 1, 1, 0, [1, 3], reps1),
        isr(4010, 3, 0, [3], 1),
        isr(5000, 3, 0, [3, 1], 2),
        line(10000, 2, "broker_registered", broker_epoch=5, host="h", port=1),
    ]
    (tmp_path / "state-change.log").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    report(spark, out, str(tmp_path))
    got = {st["partition"]: st for st in table(spark, out, "partition_stats")}
    fields = (
        "generations", "states", "leader_changes", "isr_shrinks", "isr_expands",
        "unavailable_windows", "unavailable_ms", "open_unavailable", "under_replicated_windows",
        "under_replicated_ms", "final_leader", "final_leader_epoch", "final_isr", "replicas",
        "first_ts", "last_ts", "orphan_applied",
    )  # fmt: skip
    assert {p: tuple(st[f] for f in fields) for p, st in got.items()} == {
        # Old: preferred, its expansion (4020), deleted; new: new, shrink, expansion.
        0: (2, 6, 0, 1, 2, 0, 0, False, 2, 3020 + 990, 3, 0, [3, 1], [3, 1], 1000, 5000, 0),
        # Old: leaderless from 1000 to its deletion; new: led by 1 to the end.
        1: (2, 3, 0, 0, 0, 1, 3001, False, 1, 3001, 1, 0, [1, 3], [1, 3], 1000, 4011, 0),
    }
    windows = table(spark, out, "partition_windows")
    assert sorted((w["partition"], w["kind"], w["start_ts"], w["end_ts"]) for w in windows) == [
        (0, "under_replicated", 1000, 4020),
        (0, "under_replicated", 4010, 5000),
        (1, "unavailable", 1000, 4001),
        (1, "under_replicated", 1000, 4001),
    ]


def test_a_partition_whose_only_window_lasted_0_ms_counts_as_unavailable(
    spark: Any, tmp_path: Path
) -> None:
    """A leader lost and its successor applied within the same millisecond: a 0 ms window
    (it happened), so the partition was once without a leader."""

    def line(ts: int, broker: int, event: str, **f: Any) -> str:
        return json.dumps({"ts": ts, "v": 1, "broker": broker, "event": event, **f})

    def lai(ts: int, broker: int, leader: int, epoch: int, isr: list[int], **f: Any) -> str:
        return line(
            ts,
            broker,
            f.pop("event", "leader_and_isr"),
            topic="t",
            partition=0,
            leader=leader,
            leader_epoch=epoch,
            isr=isr,
            replicas=[2, 3, 1],
            **f,
        )

    def ps(ts: int, leader: int, epoch: int, isr: list[int], reason: str) -> str:
        return lai(
            ts,
            1,
            leader,
            epoch,
            isr,
            event="partition_state",
            controller_epoch=1,
            reason=reason,
            zk_version=epoch,
        )

    def ap(ts: int, broker: int, epoch: int, isr: list[int]) -> str:
        return lai(
            ts, broker, broker, epoch, isr, controller_id=1, controller_epoch=1, result="applied"
        )

    lines = [
        *(
            line(b, b, "broker_registered", broker_epoch=10 + b, host="h", port=1)
            for b in (1, 2, 3)
        ),
        line(5, 1, "controller_elected", controller=1, controller_epoch=1, epoch_zk_version=1),
        ps(10, 2, 0, [2, 3, 1], "new"),
        ap(12, 2, 0, [2, 3, 1]),
        line(
            1000, 1, "broker_change", controller_epoch=1, new=[], dead=[2], bounced=[], live=[1, 3]
        ),
        ps(1000, 3, 1, [3, 1], "offline"),
        ap(999, 3, 1, [3, 1]),
        line(5000, 1, "controller_seen", controller=1, reason="x"),
    ]
    (tmp_path / "state-change.log").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    summary = report(spark, out, f"c={tmp_path}")
    [st] = table(spark, out, "partition_stats")
    assert (st["unavailable_windows"], st["unavailable_ms"]) == (1, 0)
    assert summary["clusters"]["c"]["partitions"]["partitions_unavailable"] == 1


def test_a_leader_that_refused_its_leadership_does_not_end_the_window(
    spark: Any, tmp_path: Path
) -> None:
    """Broker 2 lost; the controller elects 3, which refuses (REPLICA_NOT_AVAILABLE) while
    follower 1 applies; the partition has a leader once 1 applied the next decision."""

    def line(ts: int, broker: int, event: str, **f: Any) -> str:
        return json.dumps({"ts": ts, "v": 1, "broker": broker, "event": event, **f})

    def part(ts: int, broker: int, event: str, leader: int, epoch: int, **f: Any) -> str:
        return line(
            ts,
            broker,
            event,
            topic="t",
            partition=0,
            leader=leader,
            leader_epoch=epoch,
            isr=[leader, 1] if leader != 1 else [1],
            replicas=[2, 3, 1],
            controller_epoch=1,
            **f,
        )

    def ps(ts: int, leader: int, epoch: int, reason: str) -> str:
        return part(ts, 1, "partition_state", leader, epoch, reason=reason, zk_version=epoch)

    def lai(ts: int, broker: int, leader: int, epoch: int, **f: Any) -> str:
        return part(ts, broker, "leader_and_isr", leader, epoch, controller_id=1, **f)

    lines = [
        *(
            line(b, b, "broker_registered", broker_epoch=10 + b, host="h", port=1)
            for b in (1, 2, 3)
        ),
        line(5, 1, "controller_elected", controller=1, controller_epoch=1, epoch_zk_version=1),
        ps(10, 2, 0, "new"),
        lai(12, 2, 2, 0, result="applied"),
        line(
            1000, 1, "broker_change", controller_epoch=1, new=[], dead=[2], bounced=[], live=[1, 3]
        ),
        ps(1001, 3, 1, "offline"),
        lai(1002, 3, 3, 1, result="rejected", error="REPLICA_NOT_AVAILABLE"),
        lai(1002, 1, 3, 1, result="applied"),
        ps(1500, 1, 2, "offline"),
        lai(1502, 1, 1, 2, result="applied"),
    ]
    (tmp_path / "state-change.log").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    report(spark, out, f"c={tmp_path}")
    windows = table(spark, out, "partition_windows")
    assert [
        (w["start_ts"], w["end_ts"], w["recovered_leader"])
        for w in windows
        if w["kind"] == "unavailable"
    ] == [(1000, 1502, 1)]
    [st] = table(spark, out, "partition_stats")
    assert st["orphan_applied"] == 0


def test_a_partition_whose_only_window_lasted_0_ms_is_listed_among_the_top_partitions(
    spark: Any, tmp_path: Path
) -> None:
    """The page's partitions without a leader the longest are those the summary counts in
    partitions_unavailable: ranked by milliseconds, then windows, so a 0 ms window (it
    happened) is listed after the longer ones, not left out."""

    def line(ts: int, broker: int, event: str, **f: Any) -> str:
        return json.dumps({"ts": ts, "v": 1, "broker": broker, "event": event, **f})

    def lai(ts: int, p: int, broker: int, leader: int, epoch: int, isr: list[int], **f: Any) -> str:
        return line(
            ts,
            broker,
            f.pop("event", "leader_and_isr"),
            topic="t",
            partition=p,
            leader=leader,
            leader_epoch=epoch,
            isr=isr,
            replicas=[2, 3, 1],
            **f,
        )

    def ps(ts: int, p: int, leader: int, epoch: int, isr: list[int], reason: str) -> str:
        return lai(
            ts,
            p,
            1,
            leader,
            epoch,
            isr,
            event="partition_state",
            controller_epoch=1,
            reason=reason,
            zk_version=epoch,
        )

    def ap(ts: int, p: int, broker: int, epoch: int, isr: list[int]) -> str:
        return lai(
            ts, p, broker, broker, epoch, isr, controller_id=1, controller_epoch=1, result="applied"
        )

    lines = [
        *(
            line(b, b, "broker_registered", broker_epoch=10 + b, host="h", port=1)
            for b in (1, 2, 3)
        ),
        line(5, 1, "controller_elected", controller=1, controller_epoch=1, epoch_zk_version=1),
        *(ps(10, p, 2, 0, [2, 3, 1], "new") for p in (0, 1)),
        *(ap(12, p, 2, 0, [2, 3, 1]) for p in (0, 1)),
        line(
            1000, 1, "broker_change", controller_epoch=1, new=[], dead=[2], bounced=[], live=[1, 3]
        ),
        # t-0's new leader applied within the millisecond, t-1's 500 ms later.
        *(ps(1000, p, 3, 1, [3, 1], "offline") for p in (0, 1)),
        ap(999, 0, 3, 1, [3, 1]),
        ap(1500, 1, 3, 1, [3, 1]),
        line(5000, 1, "controller_seen", controller=1, reason="x"),
    ]
    (tmp_path / "state-change.log").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    summary = report(spark, out, f"c={tmp_path}")
    got = {
        r["partition"]: (r["unavailable_windows"], r["unavailable_ms"])
        for r in table(spark, out, "partition_stats")
    }
    assert got == {0: (1, 0), 1: (1, 500)}
    assert summary["clusters"]["c"]["partitions"]["partitions_unavailable"] == 2
    page = (out / "report.html").read_text()
    assert "No partition was ever without a leader" not in page
    listed = page.index("c: t-1"), page.index("c: t-0")
    assert listed[0] < listed[1]
