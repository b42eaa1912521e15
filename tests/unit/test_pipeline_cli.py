"""`zkctl report`'s arguments and errors: the ones caught before Spark starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline import inputs, job
from zkctl import cli
from zkctl.report_command import text_summary


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = cli.main(list(argv))
    except SystemExit as e:
        code = int(e.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run(capsys, "report", "--help")
    assert code == 0
    for option in ("--logs", "--out", "--master", "--skew-ms", "--conf"):
        assert option in out


def test_missing_logs_are_an_operational_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _out, err = run(capsys, "report", "--logs", str(tmp_path / "nope"), "--out", "x")
    assert code == 1
    assert "no such file or directory" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _out, err = run(capsys, "report", "--logs", str(empty), "--out", "x")
    assert code == 1
    assert "no state-change logs" in err
    assert err.count("\n") == 1  # one line, no traceback


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--master", "localhost:7077"], "not a Spark master URL"),
        (["--master", "local[0]"], "not a Spark master URL"),
        (["--conf", "driver.memory=2g"], "not spark.KEY=VALUE"),
        (["--skew-ms", "-3"], "--skew-ms"),
    ],
)
def test_bad_arguments_are_usage_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], message: str
) -> None:
    code, _out, err = run(capsys, "report", "--logs", str(tmp_path), "--out", "x", *args)
    assert code == 2
    assert message in err


def test_masters() -> None:
    for good in (
        "local",
        "local[2]",
        "local[*]",
        "local[4,2]",
        "spark://h:7077",
        "spark://a:7077,b:7077",
        "yarn",
        "k8s://https://h:443",
    ):
        assert job.valid_master(good), good
    for bad in ("", "local[]", "spark://", "h:7077", "local[*] ", "mesos"):
        assert not job.valid_master(bad), bad


def test_without_java_spark_is_not_started(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(job.ReportError, match="needs a Java runtime"):
        job.start_session("local[1]")


def test_a_cluster_master_needs_an_output_every_executor_reaches(tmp_path: Path) -> None:
    (tmp_path / "state-change.log").write_text("{}\n")
    options = job.ReportOptions(
        sources=[inputs.LogSource("c", str(tmp_path))],
        out=str(tmp_path / "out"),
        master="spark://h:7077",
    )
    with pytest.raises(job.ReportError, match="--out must be a URI"):
        job.run(options, lambda _t: None)
    for out in ("file:///shared/reports", "hdfs://nn:8020/reports", "s3a://bucket/reports"):
        job.check_out("spark://h:7077", out)
        job.check_out("yarn", out)
    for out in ("report", "/tmp/report", "./file:/x"):
        job.check_out("local[2]", out)
        with pytest.raises(job.ReportError, match="--out must be a URI"):
            job.check_out("yarn", out)


def test_an_output_under_a_file_is_refused_before_spark_starts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Spark found it only when it wrote the first table, after the whole job, and zkctl
    # ended in two tracebacks (the Py4J error's text asked of a JVM already stopped).
    (tmp_path / "state-change.log").write_text("{}\n")
    afile = tmp_path / "afile"
    afile.write_text("x")
    for out in (afile, afile / "sub", afile / "sub" / "deeper"):
        with pytest.raises(job.ReportError, match=f"{afile} is not a directory"):
            job.check_out("local[2]", str(out))
    with pytest.raises(job.ReportError, match="is not a directory"):
        job.check_out("local[2]", (afile / "sub").as_uri())
    code, _out, err = run(capsys, "report", "--logs", str(tmp_path), "--out", str(afile / "sub"))
    assert code == 1
    assert err.splitlines()[-1] == (
        f"zkctl: error: cannot write the report to {afile / 'sub'}: {afile} is not a directory"
    )
    assert "Traceback" not in err
    assert "starting Spark" not in err
    job.check_out("local[2]", str(tmp_path / "new" / "dir"))  # made when written


def test_the_text_summary() -> None:
    lat = {"count": 2, "p50": 5, "p90": 9, "p99": 9, "max": 9}
    none = {"count": 0, "p50": None, "p90": None, "p99": None, "max": None}
    summary = {
        "lines": {"ok": 10, "torn": 1, "blank": 0},
        "failover_latency_ms": {"to_new_controller": lat, "to_all_leaders": none},
        "clusters": {
            "east": {
                "controller": {"tenures": 3, "no_controller_ms": {"total": 14}},
                "incidents": {"total": 2},
                "partitions": {
                    "count": 6,
                    "partitions_unavailable": 2,
                    "unavailable_ms": 50,
                    "isr_shrinks": 4,
                    "isr_expands": 4,
                    "unclean_elections": 0,
                },
                "fencing": {"total": 1, "stale": 1, "other_refusals": {}},
            }
        },
    }
    text = "\n".join(text_summary(summary))
    assert "10 ok, 1 torn" in text
    assert "blank" not in text
    assert "p50 5 ms" in text
    assert "loss -> all partitions led: 0 incidents, p50 -" in text
    assert "cluster east: 3 controller tenures" in text


def test_every_logs_flag_is_reported(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """--logs repeated adds its clusters to the others' (as --conf does): a second --logs
    replaced the first, and a cluster was left out of the report with nothing said."""
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
    seen: list[list[tuple[str, str]]] = []

    def fake_run(options: job.ReportOptions, _progress: object) -> job.Report:
        seen.append([(s.cluster, s.path) for s in options.sources])
        raise job.ReportError("stop here")

    monkeypatch.setattr(job, "run", fake_run)
    a, b, c = (str(tmp_path / name) for name in ("a", "b", "c"))
    for argv in (["--logs", a, "--logs", b, c], ["--logs", a, b, "--logs", c], ["--logs", a, b, c]):
        code, _out, err = run(capsys, "report", *argv, "--out", str(tmp_path / "o"))
        assert code == 1
        assert "stop here" in err
    assert seen == [[("a", a), ("b", b), ("c", c)]] * 3
