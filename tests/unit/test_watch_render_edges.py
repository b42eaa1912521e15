"""The full-screen view of `zkctl watch` drawn on a fake curses window (no terminal): each
line at its row, cut to the width curses can write, in its style's attributes; the styles
with and without colours; the loop's keys, stop and duration; the fall back to plain lines."""

from __future__ import annotations

import curses
import os
import threading
import types
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest

from watch import render_curses, render_plain
from watch.model import Event
from watch.screen import Line


class FakeScreen:
    """A curses window that records what is done to it; getch returns `keys` in turn,
    then -1 (no key)."""

    def __init__(self, rows: int = 5, cols: int = 20, keys: list[int] | None = None) -> None:
        self.rows = rows
        self.cols = cols
        self.keys = list(keys or [])
        self.calls: list[tuple[Any, ...]] = []

    def getmaxyx(self) -> tuple[int, int]:
        return (self.rows, self.cols)

    def erase(self) -> None:
        self.calls.append(("erase",))

    def clear(self) -> None:
        self.calls.append(("clear",))

    def addnstr(self, y: int, x: int, text: str, n: int, attr: int) -> None:
        self.calls.append(("addnstr", y, x, text, n, attr))

    def noutrefresh(self) -> None:
        self.calls.append(("noutrefresh",))

    def nodelay(self, flag: bool) -> None:
        self.calls.append(("nodelay", flag))

    def keypad(self, flag: bool) -> None:
        self.calls.append(("keypad", flag))

    def getch(self) -> int:
        self.calls.append(("getch",))
        if len(self.calls) > 1000:  # a view that never ends
            raise AssertionError("still running")
        return self.keys.pop(0) if self.keys else -1

    def drawn(self) -> list[tuple[Any, ...]]:
        return [c[1:] for c in self.calls if c[0] == "addnstr"]


@pytest.fixture
def no_terminal(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """curses' module-level calls made harmless; what was called is recorded."""
    called: list[str] = []
    monkeypatch.setattr(curses, "doupdate", lambda: called.append("doupdate"))
    monkeypatch.setattr(curses, "curs_set", lambda n: called.append(f"curs_set {n}"))
    monkeypatch.setattr(curses, "has_colors", lambda: False)
    monkeypatch.setattr(curses, "update_lines_cols", lambda: called.append("update_lines_cols"))
    return called


STYLES = {"title": 1 << 20, "bad": 2 << 20, "normal": 0}


def test_each_line_is_drawn_at_its_row_cut_before_the_last_column_in_its_style(
    no_terminal: list[str],
) -> None:
    screen = FakeScreen(rows=3, cols=20)
    lines: list[Line] = [("title", "title"), ("bad one", "bad"), ("plain", "no such style")]
    render_curses._draw(screen, lines, STYLES)  # type: ignore[arg-type]
    # The screen is erased first (what the last frame drew and this one does not is
    # gone), and refreshed at the end.
    assert screen.calls[0] == ("erase",)
    assert screen.calls[-1] == ("noutrefresh",)
    assert no_terminal == ["doupdate"]
    # curses cannot write the last cell of the screen: at most cols - 1 characters.
    assert screen.drawn() == [
        (0, 0, "title", 19, 1 << 20),
        (1, 0, "bad one", 19, 2 << 20),
        (2, 0, "plain", 19, curses.A_NORMAL),  # a style it does not know: normal
    ]


def test_no_more_lines_than_rows_are_drawn(no_terminal: list[str]) -> None:
    screen = FakeScreen(rows=2, cols=10)
    lines: list[Line] = [(f"line {i}", "normal") for i in range(4)]
    render_curses._draw(screen, lines, STYLES)  # type: ignore[arg-type]
    assert [d[:3] for d in screen.drawn()] == [(0, 0, "line 0"), (1, 0, "line 1")]


def test_a_screen_with_no_columns_draws_nothing_of_a_line(no_terminal: list[str]) -> None:
    screen = FakeScreen(rows=1, cols=0)
    render_curses._draw(screen, [("x", "normal")], STYLES)  # type: ignore[arg-type]
    assert screen.drawn() == [(0, 0, "x", 0, 0)]


class ErrorScreen(FakeScreen):
    """curses refuses the second line (a terminal being resized)."""

    def addnstr(self, y: int, x: int, text: str, n: int, attr: int) -> None:
        if y == 1:
            raise curses.error("addnstr() returned ERR")
        super().addnstr(y, x, text, n, attr)


def test_a_line_that_does_not_fit_is_left_out_and_the_others_drawn(
    no_terminal: list[str],
) -> None:
    screen = ErrorScreen(rows=3, cols=10)
    lines: list[Line] = [("a", "normal"), ("b", "normal"), ("c", "normal")]
    render_curses._draw(screen, lines, STYLES)  # type: ignore[arg-type]
    assert [d[2] for d in screen.drawn()] == ["a", "c"]
    assert screen.calls[-1] == ("noutrefresh",)


def test_without_colours_the_styles_are_attributes(no_terminal: list[str]) -> None:
    styles = render_curses._styles()
    assert styles["title"] == curses.A_REVERSE
    assert styles["alert"] == curses.A_REVERSE | curses.A_BOLD
    assert styles["heading"] == curses.A_BOLD | curses.A_UNDERLINE
    assert styles["columns"] == curses.A_DIM
    assert styles["normal"] == curses.A_NORMAL
    assert styles["bold"] == curses.A_BOLD
    assert styles["good"] == curses.A_NORMAL
    assert styles["warn"] == curses.A_BOLD
    assert styles["bad"] == curses.A_BOLD
    assert styles["note"] == curses.A_NORMAL
    assert styles["dim"] == curses.A_DIM


class Colours:
    """curses' colour calls, recorded; color_pair(i) is i << 8 as in ncurses."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, *, default_colours: bool, pairs: int
    ) -> None:
        self.pairs: dict[int, tuple[int, int]] = {}
        self.started = False
        monkeypatch.setattr(curses, "has_colors", lambda: True)
        monkeypatch.setattr(curses, "start_color", self.start_color)
        monkeypatch.setattr(curses, "use_default_colors", self.use_default_colors)
        monkeypatch.setattr(curses, "init_pair", self.init_pair)
        monkeypatch.setattr(curses, "color_pair", lambda i: i << 8)
        self.default_colours = default_colours
        self.max_pairs = pairs

    def start_color(self) -> None:
        self.started = True

    def use_default_colors(self) -> None:
        if not self.default_colours:
            raise curses.error("use_default_colors() returned ERR")

    def init_pair(self, i: int, fg: int, bg: int) -> None:
        if i > self.max_pairs:
            raise curses.error("init_pair() returned ERR")
        self.pairs[i] = (fg, bg)

    def style_colours(self, styles: dict[str, int], name: str) -> tuple[tuple[int, int], int]:
        """The (foreground, background) of the pair a style uses, and its other bits."""
        pair = (styles[name] & curses.A_COLOR) >> 8
        return self.pairs[pair], styles[name] & ~curses.A_COLOR


def test_with_colours_problems_are_coloured_and_bold_on_the_terminal_background(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    colours = Colours(monkeypatch, default_colours=True, pairs=64)
    styles = render_curses._styles()
    assert colours.started
    # The terminal's own background (-1) under the coloured text.
    assert colours.style_colours(styles, "good") == ((curses.COLOR_GREEN, -1), 0)
    assert colours.style_colours(styles, "warn") == ((curses.COLOR_YELLOW, -1), curses.A_BOLD)
    assert colours.style_colours(styles, "bad") == ((curses.COLOR_RED, -1), curses.A_BOLD)
    assert colours.style_colours(styles, "note") == ((curses.COLOR_CYAN, -1), 0)
    assert colours.style_colours(styles, "title") == (
        (curses.COLOR_BLACK, curses.COLOR_CYAN),
        0,
    )
    assert colours.style_colours(styles, "alert") == (
        (curses.COLOR_WHITE, curses.COLOR_RED),
        curses.A_BOLD,
    )
    # The styles without a colour keep their attributes.
    assert styles["heading"] == curses.A_BOLD | curses.A_UNDERLINE
    assert styles["dim"] == curses.A_DIM


def test_a_terminal_without_default_colours_gets_a_black_background(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    colours = Colours(monkeypatch, default_colours=False, pairs=64)
    styles = render_curses._styles()
    assert colours.style_colours(styles, "bad") == (
        (curses.COLOR_RED, curses.COLOR_BLACK),
        curses.A_BOLD,
    )


def test_a_terminal_with_fewer_colour_pairs_keeps_attributes_for_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    colours = Colours(monkeypatch, default_colours=True, pairs=2)
    styles = render_curses._styles()
    assert colours.style_colours(styles, "title")[0] == (curses.COLOR_BLACK, curses.COLOR_CYAN)
    assert colours.style_colours(styles, "alert")[0] == (curses.COLOR_WHITE, curses.COLOR_RED)
    # The pairs curses refused: the attributes of a terminal without colours.
    assert styles["good"] == curses.A_NORMAL
    assert styles["bad"] == curses.A_BOLD


class FakeWatcher:
    def __init__(self, *, stop_after: int | None = None, stop: threading.Event | None = None):
        self.state = object()
        self.title = "zk:2181/c"
        self.banner = "--- failover 1 ---"
        self.banner_since = 1_700_000_000.0
        self.pumps = 0
        self.stop_after = stop_after
        self.stop = stop

    def pump(self, timeout: float) -> list[Event]:
        self.pumps += 1
        if self.stop is not None and self.stop_after is not None and self.pumps >= self.stop_after:
            self.stop.set()
        return []


@contextmanager
def fake_curses_run(
    monkeypatch: pytest.MonkeyPatch, screen: FakeScreen
) -> Iterator[list[dict[str, Any]]]:
    """render_curses.run on `screen`: curses.wrapper calls the loop with it, the terminal
    size is the screen's, and screen_lines records what it was asked for."""
    asked: list[dict[str, Any]] = []

    def screen_lines(state: object, now: float, rows: int, cols: int, **kw: Any) -> list[Line]:
        asked.append({"state": state, "rows": rows, "cols": cols, **kw})
        return [("frame", "normal")]

    monkeypatch.setattr(render_curses, "screen_lines", screen_lines)
    monkeypatch.setattr(curses, "wrapper", lambda loop: loop(screen))
    monkeypatch.setattr(
        os, "get_terminal_size", lambda fd: os.terminal_size((screen.cols, screen.rows))
    )
    yield asked


@pytest.mark.parametrize("key", ["q", "Q"])
def test_q_quits_the_full_screen_view(
    monkeypatch: pytest.MonkeyPatch, no_terminal: list[str], key: str
) -> None:
    # No stop, no duration: only the key ends it (after two frames with no key).
    screen = FakeScreen(rows=30, cols=100, keys=[-1, -1, ord("x"), ord(key)])
    watcher = FakeWatcher()
    with fake_curses_run(monkeypatch, screen) as asked:
        assert render_curses.run(watcher) == "quit"  # type: ignore[arg-type]
    assert watcher.pumps == 3
    assert len(asked) == 3
    # A frame for the terminal's size, with the watcher's title and banner.
    assert asked[0] == {
        "state": watcher.state,
        "rows": 30,
        "cols": 100,
        "title": "zk:2181/c",
        "banner": "--- failover 1 ---",
        "banner_since": 1_700_000_000.0,
    }
    assert ("addnstr", 0, 0, "frame", 99, curses.A_NORMAL) in screen.calls
    # The keyboard is read without waiting (the clocks keep running), the cursor hidden.
    assert ("nodelay", True) in screen.calls
    assert "curs_set 0" in no_terminal


def test_a_stop_set_ends_the_full_screen_view(
    monkeypatch: pytest.MonkeyPatch, no_terminal: list[str]
) -> None:
    stop = threading.Event()
    screen = FakeScreen()
    watcher = FakeWatcher(stop_after=3, stop=stop)
    with fake_curses_run(monkeypatch, screen):
        assert render_curses.run(watcher, stop=stop) == "stopped"  # type: ignore[arg-type]
    assert watcher.pumps == 3


def test_a_stop_not_set_and_a_duration_not_passed_keep_it_running(
    monkeypatch: pytest.MonkeyPatch, no_terminal: list[str]
) -> None:
    screen = FakeScreen(keys=[-1, -1, -1, ord("q")])
    watcher = FakeWatcher()
    with fake_curses_run(monkeypatch, screen):
        result = render_curses.run(
            watcher,  # type: ignore[arg-type]
            stop=threading.Event(),
            duration_s=3600,
        )
    assert result == "quit"
    assert watcher.pumps == 4


def test_a_duration_passed_ends_the_full_screen_view(
    monkeypatch: pytest.MonkeyPatch, no_terminal: list[str]
) -> None:
    screen = FakeScreen()
    watcher = FakeWatcher()
    with fake_curses_run(monkeypatch, screen):
        assert render_curses.run(watcher, duration_s=0) == "stopped"  # type: ignore[arg-type]
    assert watcher.pumps == 1


def test_stale_lines_and_columns_are_not_believed(
    monkeypatch: pytest.MonkeyPatch, no_terminal: list[str]
) -> None:
    monkeypatch.setenv("LINES", "7")
    monkeypatch.setenv("COLUMNS", "9")
    seen: list[tuple[str | None, str | None]] = []
    screen = FakeScreen(keys=[ord("q")])

    def wrapper(loop: object) -> str:
        seen.append((os.environ.get("LINES"), os.environ.get("COLUMNS")))
        return "quit"

    with fake_curses_run(monkeypatch, screen):
        monkeypatch.setattr(curses, "wrapper", wrapper)
        render_curses.run(FakeWatcher())  # type: ignore[arg-type]
    assert seen == [(None, None)]


def test_a_terminal_resized_is_followed_and_repainted(monkeypatch: pytest.MonkeyPatch) -> None:
    screen = FakeScreen(rows=24, cols=80)
    resized: list[tuple[int, int]] = []
    monkeypatch.setattr(
        os, "get_terminal_size", lambda fd: os.terminal_size((132, 50))
    )  # (columns, lines)

    def resizeterm(lines: int, columns: int) -> None:
        resized.append((lines, columns))
        screen.rows, screen.cols = lines, columns

    monkeypatch.setattr(curses, "resizeterm", resizeterm)
    render_curses._follow_terminal_size(screen)  # type: ignore[arg-type]
    assert resized == [(50, 132)]
    assert screen.calls == [("clear",)]
    # The same size again: nothing to do.
    render_curses._follow_terminal_size(screen)  # type: ignore[arg-type]
    assert resized == [(50, 132)]
    assert screen.calls == [("clear",)]


def test_a_terminal_of_the_screen_size_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    screen = FakeScreen(rows=24, cols=80)
    monkeypatch.setattr(os, "get_terminal_size", lambda fd: os.terminal_size((80, 24)))
    monkeypatch.setattr(curses, "resizeterm", lambda lines, columns: pytest.fail("resized"))
    render_curses._follow_terminal_size(screen)  # type: ignore[arg-type]
    assert screen.calls == []


def no_signals() -> AbstractContextManager[object]:
    raise AssertionError("not expected")


def test_run_or_plain_passes_stop_and_duration_to_the_full_screen_view(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    got: list[tuple[object, object]] = []

    def run(watcher: object, *, stop: object = None, duration_s: object = None) -> str:
        got.append((stop, duration_s))
        return "quit"

    monkeypatch.setattr(render_curses, "run", run)
    stop = threading.Event()
    result = render_curses.run_or_plain(
        FakeWatcher(),  # type: ignore[arg-type]
        lambda text: None,
        fell_back=lambda e: pytest.fail("fell back"),
        stop=stop,
        duration_s=12.5,
        plain_signals=no_signals,
    )
    assert result == "quit"
    assert got == [(stop, 12.5)]


def test_run_or_plain_falls_back_to_plain_lines_for_what_is_left_of_the_duration(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    error = curses.error("setupterm: could not find terminal")

    def run(watcher: object, *, stop: object = None, duration_s: object = None) -> str:
        raise error

    plain: list[tuple[object, object, object, float | None, bool]] = []
    in_signals: list[bool] = []

    @contextmanager
    def plain_signals() -> Iterator[None]:
        in_signals.append(True)
        yield
        in_signals.append(False)

    def plain_run(
        watcher: object,
        write: Callable[[str], None],
        *,
        stop: object = None,
        duration_s: float | None = None,
    ) -> None:
        plain.append((watcher, write, stop, duration_s, in_signals == [True]))

    # Four seconds go by in the full-screen view before it fails.
    clock = iter([1000.0, 1004.0])
    monkeypatch.setattr(render_curses, "time", types.SimpleNamespace(monotonic=lambda: next(clock)))
    monkeypatch.setattr(render_curses, "run", run)
    monkeypatch.setattr(render_plain, "run", plain_run)
    told: list[curses.error] = []
    watcher = FakeWatcher()
    stop = threading.Event()

    def write(text: str) -> None:
        pass

    result = render_curses.run_or_plain(
        watcher,  # type: ignore[arg-type]
        write,
        fell_back=told.append,
        stop=stop,
        duration_s=600,
        plain_signals=plain_signals,
    )
    assert result == "plain"
    assert told == [error]
    assert in_signals == [True, False]
    assert len(plain) == 1
    p_watcher, p_write, p_stop, left, under_signals = plain[0]
    assert (p_watcher, p_write, p_stop, under_signals) == (watcher, write, stop, True)
    assert left == 596


def test_run_or_plain_without_a_duration_falls_back_to_plain_lines_without_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def run(watcher: object, *, stop: object = None, duration_s: object = None) -> str:
        raise curses.error("setupterm")

    durations: list[float | None] = []
    monkeypatch.setattr(render_curses, "run", run)
    monkeypatch.setattr(
        render_plain,
        "run",
        lambda w, write, *, stop=None, duration_s=None: durations.append(duration_s),
    )
    render_curses.run_or_plain(
        FakeWatcher(),  # type: ignore[arg-type]
        lambda text: None,
        fell_back=lambda e: None,
    )
    assert durations == [None]


def test_a_resize_key_and_a_resized_terminal_are_followed_in_the_loop(
    monkeypatch: pytest.MonkeyPatch, no_terminal: list[str]
) -> None:
    screen = FakeScreen(rows=24, cols=80, keys=[curses.KEY_RESIZE, ord("q")])
    resized: list[tuple[int, int]] = []

    def resizeterm(lines: int, columns: int) -> None:
        resized.append((lines, columns))
        screen.rows, screen.cols = lines, columns

    with fake_curses_run(monkeypatch, screen) as asked:
        monkeypatch.setattr(os, "get_terminal_size", lambda fd: os.terminal_size((132, 50)))
        monkeypatch.setattr(curses, "resizeterm", resizeterm)
        assert render_curses.run(FakeWatcher()) == "quit"  # type: ignore[arg-type]
    assert "update_lines_cols" in no_terminal
    assert resized == [(50, 132)]
    assert (asked[0]["rows"], asked[0]["cols"]) == (50, 132)  # the frame for the new size
