"""The live terminal view (stdlib curses): the screen of screen.py, redrawn as events come.

The loop waits up to a tenth of a second for observations (so the running clocks tick),
applies them, redraws (curses sends only what changed), and reads the keyboard: q quits.
"""

from __future__ import annotations

import contextlib
import curses
import os
import sys
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

from watch import render_plain
from watch.screen import Line, screen_lines
from watch.session import Watcher

FRAME_S = 0.1


def _styles() -> dict[str, int]:
    styles = {
        "title": curses.A_REVERSE,
        "alert": curses.A_REVERSE | curses.A_BOLD,
        "heading": curses.A_BOLD | curses.A_UNDERLINE,
        "columns": curses.A_DIM,
        "normal": curses.A_NORMAL,
        "bold": curses.A_BOLD,
        "good": curses.A_NORMAL,
        "warn": curses.A_BOLD,
        "bad": curses.A_BOLD,
        "note": curses.A_NORMAL,
        "dim": curses.A_DIM,
    }
    if not curses.has_colors():
        return styles
    try:
        curses.start_color()
        curses.use_default_colors()
        background = -1
    except curses.error:
        background = curses.COLOR_BLACK
    colors = {
        "title": (curses.COLOR_BLACK, curses.COLOR_CYAN),
        "alert": (curses.COLOR_WHITE, curses.COLOR_RED),
        "good": (curses.COLOR_GREEN, background),
        "warn": (curses.COLOR_YELLOW, background),
        "bad": (curses.COLOR_RED, background),
        "note": (curses.COLOR_CYAN, background),
    }
    try:
        for i, (name, (fg, bg)) in enumerate(colors.items(), start=1):
            curses.init_pair(i, fg, bg)
            bold = curses.A_BOLD if name in ("alert", "bad", "warn") else 0
            styles[name] = curses.color_pair(i) | bold
    except curses.error:
        pass  # a terminal with fewer colour pairs: attributes only
    return styles


def _draw(screen: curses.window, lines: list[Line], styles: dict[str, int]) -> None:
    rows, cols = screen.getmaxyx()
    screen.erase()
    for y, (text, style) in enumerate(lines[:rows]):
        try:
            screen.addnstr(y, 0, text, max(cols - 1, 0), styles.get(style, curses.A_NORMAL))
        except curses.error:
            pass  # a line that does not fit a terminal being resized
        except ValueError:
            # A NUL, which curses refuses: the model escapes what it takes from outside,
            # this is the net under it. One line left out, not the view ended.
            pass
    screen.noutrefresh()
    curses.doupdate()


def _follow_terminal_size(screen: curses.window) -> None:
    """Keep the screen the terminal's size: a resize reaches curses through SIGWINCH, which
    a view running on another thread than the main one may not see."""
    try:
        size = os.get_terminal_size(sys.__stdout__.fileno() if sys.__stdout__ else 1)
    except (OSError, ValueError):
        return
    if screen.getmaxyx() != (size.lines, size.columns):
        try:
            curses.resizeterm(size.lines, size.columns)
        except curses.error:
            return
        # What curses believes is on the terminal was drawn for the wrong size: repaint all.
        screen.clear()


def run(
    watcher: Watcher,
    *,
    stop: threading.Event | None = None,
    duration_s: float | None = None,
) -> str:
    """Show the view until q ("quit"), `stop` is set or `duration_s` passes ("stopped")."""
    deadline = None if duration_s is None else time.monotonic() + duration_s

    def loop(screen: curses.window) -> str:
        try:
            curses.curs_set(0)
        except curses.error:
            pass
        screen.nodelay(True)
        screen.keypad(True)
        styles = _styles()
        while True:
            watcher.pump(FRAME_S)
            _follow_terminal_size(screen)
            rows, cols = screen.getmaxyx()
            lines = screen_lines(
                watcher.state,
                time.time(),
                rows,
                cols,
                title=watcher.title,
                banner=watcher.banner,
                banner_since=watcher.banner_since,
            )
            _draw(screen, lines, styles)
            key = screen.getch()
            while key != -1:
                if key in (ord("q"), ord("Q")):
                    return "quit"
                if key == curses.KEY_RESIZE:
                    curses.update_lines_cols()
                key = screen.getch()
            if (stop is not None and stop.is_set()) or (
                deadline is not None and time.monotonic() >= deadline
            ):
                return "stopped"

    # curses believes LINES and COLUMNS over the terminal when they are exported, and they
    # are often stale (copied from another terminal, or set by a test runner).
    for name in ("LINES", "COLUMNS"):
        os.environ.pop(name, None)
    return curses.wrapper(loop)


def run_or_plain(
    watcher: Watcher,
    write: render_plain.Write,
    *,
    fell_back: Callable[[curses.error], None],
    stop: threading.Event | None = None,
    duration_s: float | None = None,
    plain_signals: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext,
) -> str:
    """The full-screen view, or the plain lines (render_plain) where curses cannot drive
    the terminal: TERM unset or unknown (`kubectl exec -it`, a minimal container, a serial
    console) fails in setupterm before anything is drawn. `fell_back` is told why; the
    plain lines run under `plain_signals` (the full-screen view is ended by Ctrl-C, the
    plain lines stopped by it) for what is left of `duration_s`. "quit" or "stopped" from
    the full-screen view, "plain" after the plain lines."""
    deadline = None if duration_s is None else time.monotonic() + duration_s
    try:
        return run(watcher, stop=stop, duration_s=duration_s)
    except curses.error as e:
        fell_back(e)
    left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
    with plain_signals():
        render_plain.run(watcher, write, stop=stop, duration_s=left)
    return "plain"
