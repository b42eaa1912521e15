"""docs/state-change-log.md lists controller_resigned's reasons: the one the bug path of
process() resigns with ("error processing <event>: <type>") was missing."""

from __future__ import annotations

import json
import re
from pathlib import Path
from unittest.mock import MagicMock

import pytest

from broker.state_change_log import StateChangeLog
from controller import events as ev
from tests.unit.fake_cluster import empty_cluster, process, register, start_controller

DOC = Path(__file__).resolve().parents[2] / "docs" / "state-change-log.md"


def documented_reasons() -> list[str]:
    row = next(
        line for line in DOC.read_text().splitlines() if line.startswith("| `controller_resigned`")
    )
    return [r.rstrip("…").strip() for r in re.findall(r"`([^`]+)`", row.split("|")[3])]


def test_the_bug_resignation_reason_is_documented(tmp_path: Path) -> None:
    zk = empty_cluster()
    for b in (1, 2):
        register(zk, b)
    scl = StateChangeLog(tmp_path, 1)
    c = start_controller(zk, state_log=scl)
    assert c.is_active
    c._on_TopicChange = MagicMock(side_effect=KeyError("bug"))  # type: ignore[method-assign]
    with pytest.raises(KeyError):
        process(c, ev.TopicChange())
    scl.close()
    rows = [json.loads(line) for line in (tmp_path / "state-change.log").read_text().splitlines()]
    (resigned,) = [r for r in rows if r["event"] == "controller_resigned"]
    assert resigned["reason"] == "error processing TopicChange: KeyError"
    doc = documented_reasons()
    assert any(resigned["reason"].startswith(d) for d in doc), (resigned["reason"], doc)
