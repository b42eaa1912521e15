"""`zkctl report`'s command line without Spark: what reaches the pipeline's options, the
errors' exit codes, --json, and every figure of the text summary (docs/analytics.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline import inputs, job
from tests.unit.test_pipeline_cli import run
from zkctl.report_command import text_summary

LAT = {"count": 3, "p50": 1500, "p90": 2600, "p99": 3700, "max": 4800}
NONE = {"count": 0, "p50": None, "p90": None, "p99": None, "max": None}
SUMMARY: dict[str, Any] = {
    "lines": {"ok": 0, "torn": 2, "blank": 0},
    "failover_latency_ms": {"to_new_controller": LAT, "to_all_leaders": NONE},
    "clusters": {
        "east": {
            "controller": {"tenures": 3, "no_controller_ms": {"total": 1234}},
            "incidents": {"total": 2},
            "partitions": {
                "count": 6,
                "partitions_unavailable": 2,
                "unavailable_ms": 50,
                "isr_shrinks": 4,
                "isr_expands": 5,
                "unclean_elections": 1,
            },
            "fencing": {"total": 7, "stale": 7, "other_refusals": {}},
        }
    },
}


def _capture(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[job.ReportOptions]:
    seen: list[job.ReportOptions] = []

    def fake_run(options: job.ReportOptions, _progress: object) -> job.Report:
        seen.append(options)
        return job.Report(str(tmp_path / "o"), SUMMARY, 1.0)

    monkeypatch.setattr(job, "run", fake_run)
    return seen


def test_the_options_reach_the_pipeline(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    seen = _capture(monkeypatch, tmp_path)
    argv = ["report", "--logs", f"prod={tmp_path}", "--out", str(tmp_path / "o")]
    code, _out, err = run(capsys, *argv)
    assert code == 0, err
    [defaults] = seen
    assert (defaults.master, defaults.tol_ms, defaults.buckets, defaults.conf) == (
        job.DEFAULT_MASTER,
        100,
        200,
        {},
    )
    assert defaults.out == str(tmp_path / "o")
    assert [(s.cluster, s.path) for s in defaults.sources] == [("prod", str(tmp_path))]
    code, _out, err = run(
        capsys,
        *argv,
        *("--master", "spark://h:7077", "--skew-ms", "250", "--buckets", "40"),
        *("--conf", "spark.driver.memory=8g", "--conf", "spark.x=a=b", "--conf", "spark.y="),
    )
    assert code == 0, err
    given = seen[-1]
    assert (given.master, given.tol_ms, given.buckets) == ("spark://h:7077", 250, 40)
    # VALUE is everything after the first '=', empty included.
    assert given.conf == {"spark.driver.memory": "8g", "spark.x": "a=b", "spark.y": ""}


def test_a_conf_without_an_equals_sign_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _out, err = run(
        capsys, "report", "--logs", str(tmp_path), "--out", "x", "--conf", "spark.driver.memory"
    )
    assert code == 2
    assert "not spark.KEY=VALUE" in err


def test_a_logs_argument_without_a_path_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _out, err = run(capsys, "report", "--logs", "prod=", "--out", "x")
    assert code == 2
    assert "--logs 'prod=': no path" in err


def test_logs_not_found_by_the_pipeline_are_an_operational_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def fake_run(options: job.ReportOptions, _progress: object) -> job.Report:
        raise inputs.InputError("cannot read /l/state-change.log: permission denied")

    monkeypatch.setattr(job, "run", fake_run)
    code, _out, err = run(capsys, "report", "--logs", str(tmp_path), "--out", "x")
    assert code == 1
    assert err.splitlines()[-1] == (
        "zkctl: error: cannot read /l/state-change.log: permission denied"
    )
    assert "Traceback" not in err


def test_json_prints_the_summary_and_text_names_the_report(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _capture(monkeypatch, tmp_path)
    argv = ["report", "--logs", str(tmp_path), "--out", str(tmp_path / "o")]
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    assert json.loads(out) == SUMMARY
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[:-1] == text_summary(SUMMARY)
    o = tmp_path / "o"
    assert lines[-1] == f"report: {o}/report.html (tables: {o}/*/, summary.json)"


def test_every_figure_of_the_text_summary() -> None:
    assert text_summary(SUMMARY) == [
        "lines: 0 ok, 2 torn",  # ok always shown, even 0; other kinds when seen
        "loss -> new controller: 3 incidents, p50 1,500 ms, p90 2,600 ms, p99 3,700 ms,"
        " max 4,800 ms",
        "loss -> all partitions led: 0 incidents, p50 -, p90 -, p99 -, max -",
        "cluster east: 3 controller tenures, 2 incidents, no controller for 1,234 ms in all;"
        " 6 partitions, 2 ever leaderless (50 ms in all), ISR 4 shrinks / 5 expands,"
        " 1 unclean elections, 7 stale requests rejected (fencing)",
    ]
