"""`zkctl watch`: which view it runs (plain lines with --plain or without a terminal, the
full-screen view on one) and with what; its bad flags; the plain timeline's hold and
final lines; what text.printable escapes."""

from __future__ import annotations

import argparse
import contextlib
import io
import signal
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import watch.session
import zkctl.common
from watch import render_curses, render_plain
from watch.model import Event
from watch.screen import format_event
from watch.text import printable
from zkctl import watch_command
from zkctl.cli import main


class Tty(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


class FakeWatcher:
    made: list[FakeWatcher] = []

    def __init__(self, zk: object, *, title: str, per_partition_watches: int) -> None:
        self.zk = zk
        self.title = title
        self.per_partition_watches = per_partition_watches
        self.started = self.stopped = False
        FakeWatcher.made.append(self)

    def start(self) -> None:
        self.started = True

    def stop(self) -> None:
        self.stopped = True


SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def signal_handlers() -> dict[signal.Signals, Any]:
    return {sig: signal.getsignal(sig) for sig in SIGNALS}


def run_watch(
    monkeypatch: pytest.MonkeyPatch,
    *,
    tty: bool,
    plain: bool,
    duration: float | None = 7.0,
    per_partition_watches: int = 1000,
    raise_in_view: BaseException | None = None,
) -> dict[str, Any]:
    """watch_command.run with the views, the session and the Watcher replaced: which view
    ran, with what."""
    seen: dict[str, Any] = {}
    FakeWatcher.made = []
    monkeypatch.setattr(zkctl.common, "resolve_connect", lambda args: "zk:2181/c")

    @contextlib.contextmanager
    def zk_session(args: argparse.Namespace) -> Iterator[object]:
        seen["session_connect"] = args.zookeeper
        yield "zk"

    monkeypatch.setattr(zkctl.common, "zk_session", zk_session)
    monkeypatch.setattr(watch.session, "Watcher", FakeWatcher)
    stdout = Tty(tty)
    monkeypatch.setattr("sys.stdout", stdout)

    def plain_run(w: object, write: object, **kw: Any) -> None:
        seen["view"] = "plain"
        seen["signals"] = signal_handlers()
        seen["kw"] = kw
        seen["write"] = write
        if raise_in_view is not None:
            raise raise_in_view

    def curses_run(w: object, write: object, **kw: Any) -> str:
        seen["view"] = "curses"
        seen["signals"] = signal_handlers()
        seen["kw"] = kw
        seen["write"] = write
        if raise_in_view is not None:
            raise raise_in_view
        return "quit"

    monkeypatch.setattr(render_plain, "run", plain_run)
    monkeypatch.setattr(render_curses, "run_or_plain", curses_run)
    args = argparse.Namespace(
        plain=plain,
        duration=duration,
        per_partition_watches=per_partition_watches,
        zookeeper=None,
    )
    seen["code"] = watch_command.run(args)
    seen["watcher"] = FakeWatcher.made[0]
    seen["stdout"] = stdout
    return seen


def test_on_a_terminal_it_is_the_full_screen_view(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = run_watch(monkeypatch, tty=True, plain=False, per_partition_watches=5)
    assert seen["view"] == "curses"
    assert seen["code"] == 0
    assert seen["write"] is zkctl.common.out
    kw = seen["kw"]
    assert kw["duration_s"] == 7.0
    assert isinstance(kw["stop"], threading.Event)
    # The plain lines it may fall back to stop on Ctrl-C, not interrupt.
    assert isinstance(kw["plain_signals"](), type(watch_command.stop_on_signals(kw["stop"])))
    watcher = seen["watcher"]
    assert (watcher.title, watcher.per_partition_watches) == ("zk:2181/c", 5)
    assert watcher.started
    assert watcher.stopped
    assert seen["session_connect"] == "zk:2181/c"


@pytest.mark.parametrize(("tty", "plain"), [(False, False), (True, True), (False, True)])
def test_plain_lines_with_plain_or_without_a_terminal(
    monkeypatch: pytest.MonkeyPatch, tty: bool, plain: bool
) -> None:
    before = signal_handlers()
    seen = run_watch(monkeypatch, tty=tty, plain=plain, duration=3.5)
    assert seen["view"] == "plain"
    kw = seen["kw"]
    assert kw["duration_s"] == 3.5
    # Ctrl-C, SIGTERM and SIGHUP set the stop (a line is not cut in half); put back after.
    for sig in SIGNALS:
        assert seen["signals"][sig] is not before[sig], sig
        assert not kw["stop"].is_set()
        seen["signals"][sig](sig, None)
        assert kw["stop"].is_set(), sig
        kw["stop"].clear()
    assert signal_handlers() == before
    # The reader of stdout going away is watched for.
    assert kw["stdout"] is seen["stdout"]
    assert isinstance(kw["stop"], threading.Event)
    assert seen["watcher"].stopped


def test_in_the_full_screen_view_sigterm_and_sighup_interrupt_as_ctrl_c_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = signal_handlers()
    seen = run_watch(monkeypatch, tty=True, plain=False)
    handlers = seen["signals"]
    assert handlers[signal.SIGINT] is before[signal.SIGINT]
    for sig in (signal.SIGTERM, signal.SIGHUP):
        with pytest.raises(KeyboardInterrupt):
            handlers[sig](sig, None)
    assert not seen["kw"]["stop"].is_set()
    assert signal_handlers() == before


def test_ctrl_c_in_the_full_screen_view_ends_it_cleanly(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = run_watch(monkeypatch, tty=True, plain=False, raise_in_view=KeyboardInterrupt())
    assert seen["code"] == 0
    assert seen["watcher"].stopped


def test_the_watcher_is_stopped_when_the_view_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(BrokenPipeError):
        run_watch(monkeypatch, tty=False, plain=True, raise_in_view=BrokenPipeError())
    assert FakeWatcher.made[0].stopped


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--per-partition-watches", "-1"], "-1 is negative"),
        (["--per-partition-watches", "x"], "'x' is not an integer"),
        (["--duration", "-1"], "--duration"),
    ],
)
def test_bad_watch_flags_exit_2(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        main(["watch", *argv])
    assert e.value.code == 2
    assert expected in capsys.readouterr().err


def test_the_per_partition_watches_default_is_1000() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    watch_command.register(sub, argparse.ArgumentParser(add_help=False))
    args = parser.parse_args(["watch"])
    assert args.per_partition_watches == 1000
    assert args.plain is False
    assert args.duration is None


class Pumps:
    def __init__(self, batches: list[list[Event]], stop: threading.Event | None = None) -> None:
        self.batches = batches
        self.timeouts: list[float] = []
        self.stop = stop

    def pump(self, timeout: float) -> list[Event]:
        self.timeouts.append(timeout)
        if self.stop is not None and len(self.timeouts) >= 3:
            self.stop.set()
        return self.batches.pop(0) if self.batches else []


def test_a_line_exactly_half_a_second_old_is_printed_at_once() -> None:
    t = 1_700_000_000.0
    event = Event(t + 0.5, "zk", "broker 1 registered")
    stop = threading.Event()
    watcher = Pumps([[event]])
    written: list[tuple[int, str]] = []

    def pump(timeout: float) -> list[Event]:
        stop.set()
        return Pumps.pump(watcher, timeout)

    watcher.pump = pump  # type: ignore[method-assign]
    render_plain.run(
        watcher,  # type: ignore[arg-type]
        lambda text: written.append((len(watcher.timeouts), text)),
        stop=stop,
        clock=lambda: t + 1.0,
    )
    assert written == [(1, format_event(event))]  # in the loop, not by the final pump


def test_what_the_last_pump_brings_is_printed() -> None:
    stop = threading.Event()
    stop.set()
    event = Event(1_700_000_000.0, "zk", "broker 1 registered")
    watcher = Pumps([[event]])
    written: list[str] = []
    render_plain.run(watcher, written.append, stop=stop)  # type: ignore[arg-type]
    assert written == [format_event(event)]
    assert watcher.timeouts == [0]


def test_it_waits_at_most_a_quarter_of_a_second_at_a_time() -> None:
    # The reader of a pipe going away is seen within a quarter of a second (README).
    stop = threading.Event()
    watcher = Pumps([], stop=stop)
    render_plain.run(watcher, lambda text: None, stop=stop)  # type: ignore[arg-type]
    assert watcher.timeouts[:3] == [0.25, 0.25, 0.25]


def test_printable_escapes_c0_del_and_c1_and_nothing_else() -> None:
    controls = [*range(0x00, 0x20), *range(0x7F, 0xA0)]
    for c in controls:
        assert printable(f"a{chr(c)}b") == f"a\\x{c:02x}b", hex(c)
    kept = "".join(chr(c) for c in [*range(0x20, 0x7F), 0xA0, 0xFF, 0x100, 0x2713])
    assert printable(kept) == kept


def test_off_the_main_thread_the_signals_are_left_alone() -> None:
    # signal.signal raises ValueError off the main thread: the view runs without them.
    errors: list[BaseException] = []
    before = signal_handlers()

    def body() -> None:
        try:
            with watch_command.stop_on_signals(threading.Event()):
                pass
            with watch_command.interrupt_on_signals():
                pass
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(30)
    assert errors == []
    assert signal_handlers() == before
