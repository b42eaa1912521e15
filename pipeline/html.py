"""The one-page HTML report: the summary's numbers and inline SVG plots (pure; no Spark, no
plotting library). Opened from disk in any browser; nothing is fetched."""

from __future__ import annotations

import datetime as dt
import html
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pipeline import stats

PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#b07aa1",
    "#76b7b2",
    "#edc948",
    "#9c755f",
    "#ff9da7",
    "#bab0ac",
    "#e15759",
)
NO_LEADER = "#e15759"
MAX_INCIDENT_ROWS = 200

CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1100px;
       color: #222; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ddd; }
h3 { font-size: 1.05em; margin-top: 1.4em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { padding: 3px 10px; border-bottom: 1px solid #eee; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f6f6f6; }
.headline { display: flex; flex-wrap: wrap; gap: 12px; margin: 1em 0; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 8px 14px; min-width: 150px; }
.card .v { font-size: 1.5em; font-weight: 600; }
.card .k { color: #666; font-size: 0.9em; }
.note { color: #666; font-size: 0.9em; }
svg text { font: 11px system-ui, sans-serif; }
.scroll { max-height: 420px; overflow-y: auto; }
"""


def esc(x: Any) -> str:
    return html.escape("" if x is None else str(x))


def fmt_ms(v: float | None) -> str:
    if v is None:
        return "-"
    if v >= 10_000:
        return f"{v / 1000:,.1f} s"
    return f"{v:,.0f} ms"


def fmt_counts(counts: Mapping[str, int]) -> str:
    """Counts by name as "NAME: n" pairs ("0" for none), never a Python dict."""
    return ", ".join(f"{k}: {v:,}" for k, v in counts.items()) or "0"


def fmt_ts(ts: int | None) -> str:
    if ts is None:
        return "-"
    try:
        t = dt.datetime.fromtimestamp(ts / 1000, dt.UTC)
    except (ValueError, OverflowError, OSError):
        return str(ts)  # past what a calendar shows: the number, rather than no page
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{ts % 1000:03d}"


def color(broker: int) -> str:
    return NO_LEADER if broker < 0 else PALETTE[broker % len(PALETTE)]


def _card(value: str, label: str) -> str:
    return (
        f'<div class="card"><div class="v">{esc(value)}</div>'
        f'<div class="k">{esc(label)}</div></div>'
    )


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _latency_rows(lat: Mapping[str, Mapping[str, Any]]) -> list[list[Any]]:
    names = {
        "to_new_controller": "loss → new controller elected",
        "to_failover_done": "loss → new controller's failover done",
        "to_all_leaders": "loss → every affected partition led again",
    }
    rows = []
    for key, label in names.items():
        s = lat.get(key, {})
        rows.append(
            [label, s.get("count", 0)] + [fmt_ms(s.get(k)) for k in ("p50", "p90", "p99", "max")]
        )
    return rows


# --- plots --------------------------------------------------------------------------------


def timeline_svg(
    tenures: Sequence[tuple[int, int, int, int]],
    gaps: Sequence[tuple[int, int]],
    width: int = 1040,
) -> str:
    """Controller epochs over time: one bar per tenure, coloured by broker; gaps in red."""
    if not tenures:
        return '<p class="note">No controller elections in these logs.</p>'
    t0 = min(t[2] for t in tenures)
    t1 = max(*(t[3] for t in tenures), t0 + 1)
    left, right, top, bar = 10, 10, 18, 34
    scale = (width - left - right) / (t1 - t0)
    parts = [f'<svg width="{width}" height="{top + bar + 40}" role="img">']
    parts.append(
        f'<text x="{left}" y="12">controller epochs, {fmt_ts(t0)} to {fmt_ts(t1)} UTC</text>'
    )
    for epoch, broker, start, end in tenures:
        x = left + (start - t0) * scale
        w = max((end - start) * scale, 0.8)
        parts.append(
            f'<rect x="{x:.1f}" y="{top}" width="{w:.1f}" height="{bar}" fill="{color(broker)}">'
            f"<title>epoch {epoch}: broker {broker}, {fmt_ts(start)} - {fmt_ts(end)}"
            f" ({fmt_ms(end - start)})</title></rect>"
        )
        if w > 28:
            parts.append(
                f'<text x="{x + 3:.1f}" y="{top + bar / 2 + 4}" fill="#fff">{epoch}</text>'
            )
    for start, end in gaps:
        x = left + (start - t0) * scale
        w = max((end - start) * scale, 1.5)
        parts.append(
            f'<rect x="{x:.1f}" y="{top + bar + 2}" width="{w:.1f}" height="8" fill="{NO_LEADER}">'
            f"<title>no controller for {fmt_ms(end - start)} from {fmt_ts(start)}</title></rect>"
        )
    brokers = sorted({t[1] for t in tenures})
    x = left
    for b in brokers:
        parts.append(
            f'<rect x="{x}" y="{top + bar + 18}" width="10" height="10" fill="{color(b)}"/>'
        )
        parts.append(f'<text x="{x + 14}" y="{top + bar + 27}">broker {b}</text>')
        x += 80
    parts.append(
        f'<rect x="{x}" y="{top + bar + 18}" width="10" height="10" fill="{NO_LEADER}"/>'
        f'<text x="{x + 14}" y="{top + bar + 27}">no controller</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


def histogram_svg(values: Sequence[float], title: str, width: int = 500, height: int = 220) -> str:
    """A histogram with its p50/p90/p99 marked."""
    if not values:
        return f'<p class="note">{esc(title)}: no values.</p>'
    bins = stats.histogram(values, 24)
    peak = max(c for *_, c in bins)
    left, bottom, top = 40, 30, 22
    plot_w, plot_h = width - left - 10, height - bottom - top
    lo, hi = bins[0][0], bins[-1][1]
    span = (hi - lo) or 1
    parts = [f'<svg width="{width}" height="{height}" role="img">']
    parts.append(f'<text x="{left}" y="14">{esc(title)} (n={len(values)})</text>')
    bw = plot_w / len(bins)
    for i, (a, b, c) in enumerate(bins):
        h = plot_h * c / peak
        parts.append(
            f'<rect x="{left + i * bw:.1f}" y="{top + plot_h - h:.1f}" width="{max(bw - 1, 1):.1f}"'
            f' height="{h:.1f}" fill="{PALETTE[0]}"><title>{fmt_ms(a)} - {fmt_ms(b)}: {c}'
            "</title></rect>"
        )
    s = sorted(values)
    for p, dash in ((50, "4,2"), (90, "6,3"), (99, "2,2")):
        v = stats.percentile(s, p)
        x = left + (v - lo) / span * plot_w
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + plot_h}" stroke="#e15759"'
            f' stroke-dasharray="{dash}"><title>p{p} {fmt_ms(v)}</title></line>'
            f'<text x="{x + 2:.1f}" y="{top + 10}" fill="#e15759">p{p}</text>'
        )
    parts.append(
        f'<text x="{left}" y="{height - 8}">{fmt_ms(lo)}</text>'
        f'<text x="{width - 10}" y="{height - 8}" text-anchor="end">{fmt_ms(hi)}</text>'
        f'<text x="4" y="{top + 8}">{peak}</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


def bars_svg(rows: Sequence[Mapping[str, Any]], width: int = 1040) -> str:
    """Unavailability per partition: the partitions without a leader the longest."""
    if not rows:
        return '<p class="note">No partition was ever without a leader.</p>'
    label_w, bar_h = 230, 16
    peak = max(r["unavailable_ms"] for r in rows) or 1
    height = len(rows) * (bar_h + 4) + 10
    parts = [f'<svg width="{width}" height="{height}" role="img">']
    for i, r in enumerate(rows):
        y = 4 + i * (bar_h + 4)
        w = (width - label_w - 90) * r["unavailable_ms"] / peak
        name = f"{r['cluster']}: {r['topic']}-{r['partition']}"
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 12}" text-anchor="end">{esc(name)}</text>'
            f'<rect x="{label_w}" y="{y}" width="{max(w, 1):.1f}" height="{bar_h}"'
            f' fill="{NO_LEADER}"><title>{esc(name)}: {fmt_ms(r["unavailable_ms"])} in'
            f" {r['unavailable_windows']} window(s)</title></rect>"
            f'<text x="{label_w + w + 6:.1f}" y="{y + 12}">{fmt_ms(r["unavailable_ms"])}'
            f" ({r['unavailable_windows']})</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def balance_svg(rows: Sequence[Sequence[Any]], width: int = 1040, height: int = 260) -> str:
    """Leaders per broker over time (solid) against each broker's preferred share (dotted);
    partitions without a leader in red."""
    if not rows:
        return '<p class="note">No leadership data.</p>'
    series: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for r in rows:
        series[r[3]].append((r[2], r[4], r[5]))
    t0 = min(p[0] for s in series.values() for p in s)
    t1 = max(*(p[0] for s in series.values() for p in s), t0 + 1)
    peak = max(max(p[1], p[2]) for s in series.values() for p in s) or 1
    left, bottom, top = 40, 24, 20
    plot_w, plot_h = width - left - 110, height - bottom - top

    def xy(t: int, v: int) -> str:
        return f"{left + (t - t0) / (t1 - t0) * plot_w:.1f},{top + plot_h - v / peak * plot_h:.1f}"

    parts = [f'<svg width="{width}" height="{height}" role="img">']
    parts.append(f'<text x="{left}" y="12">partitions led per broker (max {peak})</text>')
    for i, (broker, pts) in enumerate(sorted(series.items())):
        pts.sort()
        c = color(broker)
        parts.append(
            f'<polyline fill="none" stroke="{c}" stroke-width="1.6" points="'
            + " ".join(xy(t, v) for t, v, _ in pts)
            + '"/>'
        )
        if broker >= 0:
            parts.append(
                f'<polyline fill="none" stroke="{c}" stroke-dasharray="2,3" points="'
                + " ".join(xy(t, p) for t, _, p in pts)
                + '"/>'
            )
        label = "no leader" if broker < 0 else f"broker {broker}"
        parts.append(
            f'<rect x="{width - 100}" y="{top + i * 16}" width="10" height="10" fill="{c}"/>'
            f'<text x="{width - 86}" y="{top + i * 16 + 9}">{label}</text>'
        )
    parts.append(
        f'<text x="{left}" y="{height - 6}">{fmt_ts(t0)}</text>'
        f'<text x="{left + plot_w}" y="{height - 6}" text-anchor="end">{fmt_ts(t1)}</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


# --- the page -----------------------------------------------------------------------------


def render(summary: Mapping[str, Any], plots: Mapping[str, Any]) -> str:
    lat = summary.get("failover_latency_ms", {})
    clusters: Mapping[str, Any] = summary.get("clusters", {})
    lines = summary.get("lines", {})
    incidents: list[Mapping[str, Any]] = list(plots.get("incidents", []))
    body: list[str] = []
    title = summary.get("title", "Failover report")
    body.append(f"<h1>{esc(title)}</h1>")
    body.append(
        f'<p class="note">Generated {esc(summary.get("generated_at"))} from '
        + ", ".join(f"{esc(i['cluster'])} ({esc(i['path'])})" for i in summary.get("inputs", []))
        + f" in {esc(summary.get('seconds'))} s. Times are UTC; durations are from brokers'"
        " clocks, which may disagree by a few milliseconds.</p>"
    )
    tot = {
        k: sum(c["partitions"].get(k, 0) for c in clusters.values())
        for k in ("isr_shrinks", "isr_expands", "unclean_elections", "partitions_unavailable")
    }
    gaps = sum(c["controller"]["no_controller_ms"]["total"] for c in clusters.values())
    fencing = sum(c["fencing"]["stale"] for c in clusters.values())
    p = lat.get("to_new_controller", {})
    q = lat.get("to_all_leaders", {})
    body.append('<div class="headline">')
    body.append(_card(str(len(incidents)), "incidents (lost controllers and brokers)"))
    body.append(_card(fmt_ms(p.get("p50")), "p50 loss → new controller"))
    body.append(_card(fmt_ms(p.get("p99")), "p99 loss → new controller"))
    body.append(_card(fmt_ms(q.get("p50")), "p50 loss → all partitions led"))
    body.append(_card(fmt_ms(q.get("p99")), "p99 loss → all partitions led"))
    body.append(_card(fmt_ms(gaps), "total time without a controller"))
    body.append(_card(f"{tot['partitions_unavailable']:,}", "partitions ever without a leader"))
    body.append(_card(f"{tot['isr_shrinks']:,} / {tot['isr_expands']:,}", "ISR shrinks / expands"))
    body.append(_card(f"{tot['unclean_elections']:,}", "unclean elections"))
    body.append(_card(f"{fencing:,}", "stale requests rejected (fencing)"))
    body.append("</div>")
    body.append("<h2>Failover latency</h2>")
    body.append(_table(["", "incidents", "p50", "p90", "p99", "max"], _latency_rows(lat)))
    to_ctl = [
        i["time_to_controller_ms"] for i in incidents if i["time_to_controller_ms"] is not None
    ]
    to_led = [i["time_to_leaders_ms"] for i in incidents if i["time_to_leaders_ms"] is not None]
    body.append(histogram_svg(to_ctl, "loss → new controller"))
    body.append(histogram_svg(to_led, "loss → every affected partition led again"))
    body.append("<h2>Lines read</h2>")
    body.append(
        _table(["status", "lines"], [(k, f"{v:,}") for k, v in lines.items()])
        + '<p class="note">torn: a file\'s last line cut short; malformed: not JSON or a field'
        " of the wrong type; invalid: a field its event needs is missing; newer_version:"
        " written by a newer schema (kept aside in rejected_lines, not interpreted);"
        " duplicate: the same line seen again (counted once).</p>"
    )
    for name, c in clusters.items():
        body.append(f"<h2>Cluster {esc(name)}</h2>")
        ctl = c["controller"]
        body.append(
            _table(
                ["", ""],
                [
                    ("time span", f"{fmt_ts(c['first_ts'])} - {fmt_ts(c['last_ts'])}"),
                    ("controller tenures", ctl["tenures"]),
                    ("epochs", ctl["epochs"]),
                    ("how tenures ended", fmt_counts(ctl["end_reasons"])),
                    ("zombie controllers (resigned after a successor)", ctl["zombies"]),
                    (
                        "without a controller: total / p50 / max",
                        f"{fmt_ms(ctl['no_controller_ms']['total'])} / "
                        f"{fmt_ms(ctl['no_controller_ms']['p50'])} / "
                        f"{fmt_ms(ctl['no_controller_ms']['max'])}",
                    ),
                    (
                        "incidents (controller / broker)",
                        f"{c['incidents']['controller']} / {c['incidents']['broker']}",
                    ),
                    ("partitions", c["partitions"]["count"]),
                    ("leader changes", c["partitions"]["leader_changes"]),
                    (
                        "ISR shrinks / expands",
                        f"{c['partitions']['isr_shrinks']} / {c['partitions']['isr_expands']}",
                    ),
                    ("unclean elections", c["partitions"]["unclean_elections"]),
                    ("partition time without a leader", fmt_ms(c["partitions"]["unavailable_ms"])),
                    (
                        "partition time under-replicated",
                        fmt_ms(c["partitions"]["under_replicated_ms"]),
                    ),
                    (
                        "stale requests rejected (fencing)",
                        fmt_counts(c["fencing"]["request_rejected"]),
                    ),
                    (
                        "stale partition states rejected (fencing: an older leader epoch)",
                        # The refused partition states that are not other_refusals.
                        fmt_counts(
                            {
                                k: v
                                for k, v in c["fencing"]["leader_and_isr_rejected"].items()
                                if k not in c["fencing"]["other_refusals"]
                            }
                        ),
                    ),
                    (
                        "partition states refused for another reason",
                        fmt_counts(c["fencing"]["other_refusals"]),
                    ),
                    ("anomalies", fmt_counts(ctl["anomalies"]) if ctl["anomalies"] else "none"),
                ],
            )
        )
        body.append("<h3>Controller epochs</h3>")
        body.append(
            timeline_svg(
                plots.get("tenures", {}).get(name, []), plots.get("gaps", {}).get(name, [])
            )
        )
        balance = [r for r in plots.get("balance", []) if r[0] == name]
        body.append("<h3>Leader balance</h3>")
        body.append(balance_svg(balance))
    body.append("<h2>Unavailability per partition</h2>")
    body.append(
        '<p class="note">The partitions that were without a live leader the longest'
        " (number of windows in brackets).</p>"
    )
    body.append(bars_svg(plots.get("top_partitions", [])))
    body.append("<h2>Incidents</h2>")
    shown = sorted(incidents, key=lambda i: (i["cluster"], i["lost_ts"]))[:MAX_INCIDENT_ROWS]
    body.append(
        '<div class="scroll">'
        + _table(
            [
                "cluster",
                "#",
                "lost",
                "kind",
                "broker",
                "cause",
                "new controller",
                "→ controller",
                "partitions",
                "→ all led",
            ],
            [
                (
                    i["cluster"],
                    i["incident_id"],
                    fmt_ts(i["lost_ts"]),
                    i["kind"],
                    i["broker"],
                    i["cause"],
                    "-"
                    if i["new_controller"] is None
                    else f"{i['new_controller']} (epoch {i['new_epoch']})",
                    fmt_ms(i["time_to_controller_ms"]),
                    i["affected_partitions"],
                    "never" if i["unrecovered"] else fmt_ms(i["time_to_leaders_ms"]),
                )
                for i in shown
            ],
        )
        + "</div>"
    )
    if len(incidents) > len(shown):
        body.append(
            f'<p class="note">{len(incidents) - len(shown)} more in the incidents table.</p>'
        )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
        + "\n".join(body)
        + "</body></html>\n"
    )
