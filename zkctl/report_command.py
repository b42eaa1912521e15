"""``zkctl report``: failover analytics over state-change logs, on Spark (pipeline/)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from zkctl.common import CommandError, UsageError, out, positive_int, print_json, progress

if TYPE_CHECKING:
    from zkctl.common import Subparsers


def _master(text: str) -> str:
    from pipeline.job import valid_master

    if not valid_master(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a Spark master URL (local, local[N], local[*], spark://HOST:PORT,"
            " yarn, k8s://..., mesos://...)"
        )
    return text


def _conf(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.startswith("spark."):
        raise argparse.ArgumentTypeError(f"{text!r} is not spark.KEY=VALUE")
    return key, value


def register(subparsers: Subparsers, common: argparse.ArgumentParser) -> None:
    report = subparsers.add_parser(
        "report",
        parents=[common],
        help="failover analytics over state-change logs (PySpark): tenures, incidents, SLOs",
        description=(
            "Read brokers' state-change logs and write failover analytics: controller"
            " tenures and the gaps without a controller, failover incidents (loss to new"
            " controller, loss to every affected partition led again), partition"
            " unavailability and under-replication windows, ISR shrinks and expands, unclean"
            " elections, requests rejected by fencing, leader balance over time, and latency"
            " percentiles. Writes Parquet tables, summary.json and report.html into --out."
            " Runs on Spark: local mode by default, --master for a cluster."
        ),
    )
    report.add_argument(
        "--logs",
        nargs="+",
        # Repeated, its arguments add to the others' (as --conf's): one cluster each.
        action="extend",
        required=True,
        metavar="[NAME=]PATH",
        help=(
            "a cluster's logs: a directory (searched for state-change.log* files), a file, a"
            " glob, or a URI Spark reads (hdfs://, s3a://); one cluster per argument, named"
            " NAME or after the path (give the same NAME to join several paths); repeatable"
        ),
    )
    report.add_argument("--out", required=True, metavar="DIR", help="where to write the report")
    report.add_argument(
        "--master",
        type=_master,
        default=None,
        metavar="URL",
        help="Spark master (default local[*]: this machine)",
    )
    report.add_argument(
        "--skew-ms",
        type=positive_int,
        default=100,
        metavar="MS",
        help="how far brokers' clocks may disagree (default 100)",
    )
    report.add_argument(
        "--buckets",
        type=positive_int,
        default=200,
        metavar="N",
        help="time buckets for leader balance over time (default 200)",
    )
    report.add_argument(
        "--conf",
        type=_conf,
        action="append",
        default=[],
        metavar="spark.KEY=VALUE",
        help="a Spark setting (repeatable), e.g. spark.driver.memory=8g",
    )
    report.add_argument(
        "--json", action="store_true", help="print the summary as JSON instead of text"
    )
    report.set_defaults(handler=run, parser=report)


def run(args: argparse.Namespace) -> int:
    from pipeline import inputs
    from pipeline.job import DEFAULT_MASTER, ReportError, ReportOptions
    from pipeline.job import run as run_report

    try:
        sources = inputs.parse_log_args(list(args.logs))
    except inputs.InputError as e:
        raise UsageError(str(e)) from e
    options = ReportOptions(
        sources=sources,
        out=args.out,
        master=args.master or DEFAULT_MASTER,
        tol_ms=args.skew_ms,
        buckets=args.buckets,
        conf=dict(args.conf),
    )
    try:
        report = run_report(options, lambda text: progress(f"report: {text}"))
    except (inputs.InputError, ReportError) as e:
        raise CommandError(str(e)) from e
    if args.json:
        print_json(report.summary)
    else:
        for line in text_summary(report.summary):
            out(line)
        out(f"report: {report.out}/report.html (tables: {report.out}/*/, summary.json)")
    return 0


def _ms(v: Any) -> str:
    return "-" if v is None else f"{v:,.0f} ms"


def text_summary(summary: dict[str, Any]) -> list[str]:
    from pipeline.html import fmt_counts

    lat = summary["failover_latency_ms"]
    lines = summary["lines"]
    text = [
        "lines: " + ", ".join(f"{v:,} {k}" for k, v in lines.items() if v or k == "ok"),
    ]
    for key, label in (
        ("to_new_controller", "loss -> new controller"),
        ("to_all_leaders", "loss -> all partitions led"),
    ):
        s = lat[key]
        text.append(
            f"{label}: {s['count']} incidents, p50 {_ms(s['p50'])}, p90 {_ms(s['p90'])},"
            f" p99 {_ms(s['p99'])}, max {_ms(s['max'])}"
        )
    for name, c in summary["clusters"].items():
        p = c["partitions"]
        ctl = c["controller"]
        fencing = c["fencing"]
        other = fencing["other_refusals"]
        refused = (
            f", {sum(other.values())} partition states refused for another reason"
            f" ({fmt_counts(other)})"
            if other
            else ""
        )
        text.append(
            f"cluster {name}: {ctl['tenures']} controller tenures,"
            f" {c['incidents']['total']} incidents, no controller for"
            f" {_ms(ctl['no_controller_ms']['total'])} in all; {p['count']} partitions,"
            f" {p['partitions_unavailable']} ever leaderless ({_ms(p['unavailable_ms'])} in all),"
            f" ISR {p['isr_shrinks']} shrinks / {p['isr_expands']} expands,"
            f" {p['unclean_elections']} unclean elections, {fencing['stale']} stale"
            f" requests rejected (fencing){refused}"
        )
    return text
