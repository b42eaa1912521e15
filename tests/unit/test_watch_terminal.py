"""`zkctl watch` on a real terminal (a pty): the full-screen view survives what ZooKeeper
holds, and a terminal curses cannot drive gets the plain lines instead of an error."""

from __future__ import annotations

import curses
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from watch import render_curses

ROOT = Path(__file__).resolve().parents[2]

# `zkctl watch --duration 2` over an in-memory ZooKeeper with brokers 1 and 2, broker 2's
# host argv[2] (a repr); the exit code and stderr go to the file argv[1].
CHILD = r"""
import ast, contextlib, io, sys
from tests.unit.fake_zk import FakeZk
from zkdata import paths
from zkdata.znodes import (
    BrokerRegistration, EndPoint, encode_broker, encode_controller, encode_controller_epoch,
)
import zkctl.common

class Fake(FakeZk):
    connected = True

zk = Fake()
for p in (paths.BROKER_IDS, paths.BROKER_TOPICS):
    zk.put(p, b"")
for b, host in ((1, "127.0.0.1"), (2, ast.literal_eval(sys.argv[2]))):
    reg = BrokerRegistration(b, (EndPoint("PLAINTEXT", host, 9090 + b),))
    zk.put(paths.broker(b), encode_broker(reg))
zk.put(paths.CONTROLLER, encode_controller(1))
zk.put(paths.CONTROLLER_EPOCH, encode_controller_epoch(5))

@contextlib.contextmanager
def fake_session(args):
    yield zk

zkctl.common.zk_session = fake_session
err = io.StringIO()
sys.stderr = err
from zkctl.cli import main
try:
    code = main(["watch", "--zookeeper", "127.0.0.1:1", "--duration", "2"])
except BaseException as e:
    code = f"raised {type(e).__name__}: {e}"
with open(sys.argv[1], "w") as f:
    f.write(f"exit {code}\n{err.getvalue()}")
"""


def watch_in_a_pty(tmp_path: Path, term: str | None, host: str) -> tuple[str, str]:
    """What the child wrote to its file, and what it showed on the terminal."""
    result = tmp_path / "result.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in ("TERM", "LINES", "COLUMNS"):
        env.pop(name, None)
    if term is not None:
        env["TERM"] = term
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(result), repr(host)],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            cwd=ROOT,
        )
    finally:
        os.close(slave)
    shown = bytearray()
    # poll, not select: the whole unit suite may have descriptors past select's 1024.
    poller = select.poll()
    poller.register(master, select.POLLIN)
    try:
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            if poller.poll(100):
                try:
                    shown += os.read(master, 65536)
                except OSError:  # the child closed the terminal
                    break
        proc.wait(max(deadline - time.monotonic(), 1))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        os.close(master)
    assert result.exists(), shown.decode(errors="replace")
    return result.read_text(), shown.decode(errors="replace")


def test_a_nul_in_a_broker_host_does_not_end_the_full_screen_view(tmp_path: Path) -> None:
    # curses' addnstr raised ValueError("embedded null character"), and the view ended in
    # an internal error.
    result, shown = watch_in_a_pty(tmp_path, "xterm", "a\x00b")
    assert result.startswith("exit 0"), result
    assert "a\\x00b:9092" in shown, shown


def test_a_terminal_curses_cannot_drive_gets_the_plain_lines(tmp_path: Path) -> None:
    # TERM unset (`kubectl exec -it`, a minimal container): setupterm failed and the
    # command ended in an internal error, showing nothing.
    result, shown = watch_in_a_pty(tmp_path, None, "127.0.0.2")
    assert result.startswith("exit 0"), result
    assert "the full-screen view failed" in result, result
    assert "plain lines instead" in result, result
    assert "2 brokers registered: [1, 2]" in shown, shown  # the plain lines, on the terminal


class RefusingScreen:
    """A curses window whose addnstr refuses the text as curses refuses a NUL."""

    def getmaxyx(self) -> tuple[int, int]:
        return (24, 80)

    def erase(self) -> None:
        pass

    def addnstr(self, *args: object) -> None:
        raise ValueError("embedded null character")

    def noutrefresh(self) -> None:
        pass


def test_a_line_curses_refuses_is_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    # The model escapes control characters; this is the net under it (the title comes
    # from the command line, the banner from the demo).
    monkeypatch.setattr(curses, "doupdate", lambda: None)
    render_curses._draw(RefusingScreen(), [("a\x00b", "normal")], {})  # type: ignore[arg-type]
