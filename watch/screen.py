"""The watch view laid out as lines of text, for a screen of a given size (pure).

What a frame costs does not grow with the cluster: counts and problem partitions come
precomputed from the model, and only as many rows are built as fit. With more partitions
than rows, the healthy ones are counted, not listed: offline partitions come first (the
longest-leaderless first), then under-replicated ones, then "and N more".
"""

from __future__ import annotations

from watch.model import (
    CONNECTED,
    LOST,
    Event,
    PartitionView,
    WatchState,
    broker_ids,
    fmt_clock,
    fmt_count,
    fmt_duration,
    running_clocks,
)
from zkdata.znodes import TopicPartition

Line = tuple[str, str]  # (text, style)
# Styles: title, alert, heading, columns, normal, bold, good, warn, bad, note, dim.

MAX_BROKER_ROWS = 12
MIN_TIMELINE_ROWS = 5

SOURCE_TAGS = {"demo": "demo", "log": "log"}


def event_tag(event: Event) -> str:
    """Where a timeline line comes from: zk (a watch), demo (what the demo did), log (a
    broker's state-change log)."""
    return SOURCE_TAGS.get(event.kind, "zk")


def event_style(event: Event) -> str:
    if event.severity in ("bad", "warn", "good"):
        return event.severity
    if event.kind == "demo":
        return "note"
    if event.kind == "log":
        return "dim"
    return "normal"


def format_event(event: Event) -> str:
    return f"{fmt_clock(event.ts)}  {event_tag(event):<4}  {event.text}"


def _fit(text: str, cols: int) -> str:
    return text if len(text) <= cols else text[: max(cols - 1, 0)] + "~"


def _connection_text(state: WatchState, now: float) -> str:
    if state.connection == CONNECTED:
        return "ZooKeeper connected"
    what = "session expired" if state.connection == LOST else "connection lost"
    return f"ZooKeeper {what} {fmt_duration(now - state.connection_since)} ago; reconnecting"


def _controller_lines(state: WatchState, now: float) -> list[Line]:
    c = state.controller
    if not state.seen_controller:
        return [("CONTROLLER  (reading ZooKeeper ...)", "bold")]
    if c is None:
        since = state.no_controller_since
        for_how_long = f" for {fmt_duration(now - since)}" if since is not None else ""
        lines: list[Line] = [(f"CONTROLLER  none{for_how_long}", "bad")]
    else:
        text = (
            f"CONTROLLER  broker {c.broker}   epoch {'?' if c.epoch is None else c.epoch}"
            f"   since {fmt_clock(c.since, millis=False)} ({fmt_duration(now - c.since)})"
        )
        if c.gap_before is not None:
            text += f"; elected after {fmt_duration(c.gap_before)} without a controller"
        elif not c.seen_elected:
            text += " (already controller when the watch began)"
        lines = [(text, "bold")]
    if state.history:
        parts = []
        for t in state.history:
            span = (
                f"{fmt_clock(t.since, millis=False)}-{fmt_clock(t.until, millis=False)}"
                f" ({fmt_duration(t.until - t.since)})"
                if t.until is not None
                else ""
            )
            parts.append(f"{'?' if t.epoch is None else t.epoch}: broker {t.broker} {span}")
        lines.append(("  earlier epochs  " + "  |  ".join(parts), "dim"))
    return lines


def _broker_lines(state: WatchState, now: float) -> list[Line]:
    ids = broker_ids(state)
    alive = sum(1 for v in state.brokers.values() if v.alive)
    down = len(ids) - alive
    heading = f"BROKERS  {alive} registered" + (f", {down} not registered" if down else "")
    lines: list[Line] = [
        ("", "normal"),
        (heading, "heading"),
        (
            f"  {'ID':>5}  {'ADDRESS':<24} {'BROKER EPOCH':>14}  {'STATE':<24} {'LEADS':>7}",
            "columns",
        ),
    ]
    controller = state.controller.broker if state.controller is not None else None
    for b in ids[:MAX_BROKER_ROWS]:
        v = state.brokers.get(b)
        if v is None or v.info is None:
            address, epoch = "-", "-"
        else:
            address, epoch = v.info.address, str(v.info.broker_epoch)
        if v is not None and v.alive:
            status, style = "alive", "normal"
        elif v is not None and v.info is not None:
            status, style = f"LOST for {fmt_duration(now - v.since)}", "bad"
        else:
            status, style = "not registered", "bad"
        leads = state.summary.leaders.get(b, 0)
        role = "  controller" if b == controller else ""
        lines.append(
            (
                f"  {b:>5}  {address:<24} {epoch:>14}  {status:<24} {leads:>7,}{role}",
                "bold" if role and style == "normal" else style,
            )
        )
    if len(ids) > MAX_BROKER_ROWS:
        lines.append((f"  ... and {len(ids) - MAX_BROKER_ROWS} more brokers", "dim"))
    return lines


def _partition_row(tp: TopicPartition, pv: PartitionView, now: float) -> Line:
    if not pv.has_state:
        leader, epoch, isr = "-", "-", "-"
        status, style = ("being deleted", "dim") if pv.deleting else ("no state yet", "dim")
    else:
        leader = "none" if pv.leader == -1 else ("deleting" if pv.leader < -1 else str(pv.leader))
        epoch = str(pv.leader_epoch)
        isr = ",".join(map(str, pv.isr))
        if pv.deleting or pv.leader < -1:
            status, style = "being deleted", "dim"
        elif pv.leaderless_since is not None:
            why = "no leader" if pv.leader < 0 else f"leader {pv.leader} is down"
            status = f"OFFLINE for {fmt_duration(now - pv.leaderless_since)} ({why})"
            style = "bad"
        elif pv.under_replicated:
            status, style = "under-replicated", "warn"
        else:
            status, style = "", "normal"
    replicas = ",".join(map(str, pv.replicas))
    name = _fit(str(tp), 28)
    return (
        f"  {name:<28} {leader:>8} {epoch:>6}  {replicas:<16} {isr:<16} {status}".rstrip(),
        style,
    )


def _partition_rows(state: WatchState, now: float, budget: int) -> list[Line]:
    s = state.summary
    if budget <= 0:
        return []
    if s.total <= budget:
        return [_partition_row(tp, state.partitions[tp], now) for tp in sorted(state.partitions)]
    problems = [*s.offline, *s.under_replicated]
    listed = problems[: max(budget - 1, 0)]
    rows = [
        _partition_row(tp, state.partitions[tp], now) for tp in listed if tp in state.partitions
    ]
    unlisted_problems = s.offline_count + s.under_replicated_count - len(listed)
    healthy = s.total - s.offline_count - s.under_replicated_count - s.deleting
    more = []
    if unlisted_problems > 0:
        more.append(f"{unlisted_problems:,} more offline or under-replicated")
    if healthy > 0:
        more.append(f"{healthy:,} healthy partitions not listed")
    if s.deleting:
        more.append(f"{s.deleting:,} being deleted")
    if more:
        rows.append(("  ... " + "; ".join(more), "dim"))
    return rows[:budget]


def screen_lines(
    state: WatchState,
    now: float,
    rows: int,
    cols: int,
    *,
    title: str = "",
    banner: str = "",
    banner_since: float | None = None,
) -> list[Line]:
    """At most `rows` lines of at most `cols - 1` characters (curses cannot write the last
    cell of the screen)."""
    width = max(cols - 1, 1)
    right = f"{_connection_text(state, now)}   {fmt_clock(now, millis=False)}   q quits"
    left = f"zkctl watch  {title}".rstrip()
    gap = max(width - len(left) - len(right), 2)
    top: list[Line] = [(left + " " * gap + right, "title")]
    if banner:
        if banner_since is not None:
            elapsed = fmt_duration(now - banner_since)
            if "{elapsed}" in banner:
                banner = banner.replace("{elapsed}", elapsed)
            else:
                banner = f"{banner} {elapsed} ago"
        top.append((banner, "note"))
    top.extend((f"!! {text}", "alert") for text in running_clocks(state, now))
    top.extend(_controller_lines(state, now))
    brokers = _broker_lines(state, now)

    s = state.summary
    if not state.seen_partitions:
        overview = "(reading ZooKeeper ...)"
    elif s.total == 0:
        overview = "no topics yet"
    else:
        overview = (
            f"{s.total:,} in {fmt_count(s.topics, 'topic')}: {s.online:,} online,"
            f" {s.offline_count:,} offline, {s.under_replicated_count:,} under-replicated"
        )
        if s.no_state:
            overview += f", {s.no_state:,} without state yet"
        if s.deleting:
            overview += f", {s.deleting:,} being deleted"
    leaders = ", ".join(f"{b}: {n:,}" for b, n in sorted(s.leaders.items()))
    part_head: list[Line] = [
        ("", "normal"),
        (f"PARTITIONS  {overview}", "bad" if s.offline_count else "heading"),
    ]
    if leaders:
        part_head.append((f"  leaders by broker  {leaders}", "dim"))
    if s.total:
        part_head.append(
            (
                f"  {'PARTITION':<28} {'LEADER':>8} {'EPOCH':>6}  {'REPLICAS':<16} {'ISR':<16}"
                " STATUS",
                "columns",
            )
        )

    fixed = len(top) + len(brokers) + len(part_head) + 2  # + blank and timeline heading
    timeline_min = min(max(MIN_TIMELINE_ROWS, (rows - len(top)) // 3), len(state.timeline))
    part_rows = _partition_rows(state, now, rows - fixed - timeline_min)
    timeline_rows = max(rows - fixed - len(part_rows), 0)
    events = state.timeline[-timeline_rows:] if timeline_rows else ()
    bottom: list[Line] = [("", "normal"), ("TIMELINE", "heading")]
    bottom.extend((format_event(e), event_style(e)) for e in events)

    lines = [*top, *brokers, *part_head, *part_rows, *bottom][:rows]
    return [(_fit(text, width), style) for text, style in lines]
