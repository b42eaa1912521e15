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
from controller.controller import ControllerConfig, KafkaController
from tests.unit.fake_cluster import drain, empty_cluster, process, register

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
    config = ControllerConfig(broker_id=1, auto_leader_rebalance_enable=False)
    c = KafkaController(config, zk, scl, lambda: 123)  # type: ignore[arg-type]
    process(c, ev.Startup())
    drain(c)
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
