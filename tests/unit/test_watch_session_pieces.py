"""The watch session's own pieces (watch/session.py): a note keeps the time, source and
severity it was given, the per-partition watch limit reaches the source, the banner keeps
its running clock's start, and the view starts at the session's clock."""

from __future__ import annotations

from tests.unit.fake_zk import FakeZk
from watch import model
from watch.session import Watcher

T0 = 1_800_000_000.0


def a_watcher(**kwargs: int) -> Watcher:
    return Watcher(FakeZk(), clock=lambda: T0, **kwargs)  # type: ignore[arg-type]


def test_a_note_keeps_its_time_source_and_severity() -> None:
    w = a_watcher()
    w.note("broker 2 says: log directory failed", ts=T0 - 5, source="log", severity="bad")
    w.note("killing broker 2")
    events = w.pump(0)
    assert [(e.ts, e.kind, e.severity) for e in events] == [
        (T0 - 5, "log", "bad"),
        (T0, "demo", "info"),
    ]


def test_the_session_s_settings_reach_the_source_the_banner_and_the_view() -> None:
    w = a_watcher(per_partition_watches=7)
    assert w.source.per_partition_watches == 7
    assert w.state == model.initial_state(T0)
    w.set_banner("broker 2 was SIGKILLed {elapsed} ago", since=T0 - 2)
    assert (w.banner, w.banner_since) == ("broker 2 was SIGKILLed {elapsed} ago", T0 - 2)
