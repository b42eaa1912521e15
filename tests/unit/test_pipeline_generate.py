"""The log generator: realistic lines, made by the controller's own decisions (no Spark)."""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from pipeline import generate, schema

DOC = Path(__file__).resolve().parents[2] / "docs" / "state-change-log.md"


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("gen") / "logs"
    truth = generate.generate(
        generate.Options(brokers=4, partitions=90, failovers=25, out=out, seed=3)
    )
    return out, truth


def read(out: Path) -> dict[int, list[dict[str, Any]]]:
    by_broker = {}
    for f in sorted(out.glob("broker-*/data/state-change.log")):
        b = int(f.parent.parent.name.split("-")[1])
        by_broker[b] = [json.loads(line) for line in f.read_text().splitlines()]
    return by_broker


def test_the_same_seed_writes_the_same_logs(tmp_path: Path) -> None:
    a = generate.generate(
        generate.Options(brokers=3, partitions=20, failovers=5, out=tmp_path / "a", seed=9)
    )
    b = generate.generate(
        generate.Options(brokers=3, partitions=20, failovers=5, out=tmp_path / "b", seed=9)
    )
    assert a == b
    for f in (tmp_path / "a").rglob("state-change.log"):
        assert f.read_bytes() == (tmp_path / "b" / f.relative_to(tmp_path / "a")).read_bytes()


def test_every_line_is_a_valid_line_of_its_broker_in_time_order(
    logs: tuple[Path, dict[str, Any]],
) -> None:
    out, truth = logs
    total = 0
    for f in sorted(out.glob("broker-*/data/state-change.log")):
        b = int(f.parent.parent.name.split("-")[1])
        last = 0
        text = f.read_text()
        assert text.endswith("\n")
        for line in text.splitlines():
            c = schema.classify_line(line)
            assert c.status == "ok", (line, c)
            assert c.record is not None
            assert c.record["broker"] == b
            assert c.record["ts"] >= last
            last = c.record["ts"]
            total += 1
    assert total == truth["total_lines"]


def test_lines_carry_the_documented_fields(logs: tuple[Path, dict[str, Any]]) -> None:
    documented: dict[str, set[str]] = {}
    for m in re.finditer(r"^\| `(\w+)` \| ([^|]*) \|", DOC.read_text(), re.MULTILINE):
        documented[m.group(1)] = set(re.findall(r"`(\w+)`", m.group(2)))
    seen: Counter[str] = Counter()
    for rows in read(logs[0]).values():
        for r in rows:
            event = r["event"]
            seen[event] += 1
            extra = set(r) - {"ts", "v", "broker", "event"}
            assert extra <= documented[event], (event, extra - documented[event])
    # Every event the brokers write appears, except a deletion's and a follower's
    # truncation (the generator keeps no logs to cut).
    assert set(seen) == set(schema.EVENTS) - {"topic_deleted", "truncated"}
    reasons = Counter(
        r["reason"]
        for rows in read(logs[0]).values()
        for r in rows
        if r["event"] == "partition_state"
    )
    assert {"new", "offline", "unclean", "preferred", "controlled_shutdown"} <= set(reasons)


def test_decisions_follow_kafkas_rules(logs: tuple[Path, dict[str, Any]]) -> None:
    """They are the controller's own: a leader is a replica; a clean leader is in the ISR;
    each decision of a partition has a leader epoch of its own; a broker applies a state
    only for a partition it replicates, and never an older leader epoch."""
    out, truth = logs
    epochs: dict[tuple[str, int], list[int]] = defaultdict(list)
    for rows in read(out).values():
        for r in rows:
            if r["event"] == "partition_state":
                if r["leader"] >= 0:
                    assert r["leader"] in r["replicas"]
                    if r["reason"] != "unclean":
                        assert r["leader"] in r["isr"]
                    else:
                        assert r["isr"] == [r["leader"]]
                epochs[(r["topic"], r["partition"])].append(r["leader_epoch"])
    for key, es in epochs.items():
        assert len(es) == len(set(es)), key
    for b, rows in read(out).items():
        held: dict[tuple[str, int], int] = {}
        for r in rows:
            if r["event"] == "broker_registered":
                held.clear()  # a new incarnation
            if r["event"] == "leader_and_isr" and r["result"] == "applied":
                assert b in r["replicas"]
                key = (r["topic"], r["partition"])
                assert r["leader_epoch"] > held.get(key, -1)
                held[key] = r["leader_epoch"]
    assert truth["totals"]["unclean_elections"] > 0
    assert truth["totals"]["rejected_requests"] > 0


def test_truth_is_consistent_with_the_final_partition_states(
    logs: tuple[Path, dict[str, Any]],
) -> None:
    out, truth = logs
    last: dict[str, dict[str, Any]] = {}
    for rows in read(out).values():
        for r in rows:
            if r["event"] in ("partition_state", "isr_change"):
                key = f"{r['topic']}-{r['partition']}"
                order = (r["leader_epoch"], r["event"] == "isr_change", r.get("zk_version", 0))
                if key not in last or order > last[key]["order"]:
                    last[key] = {"order": order, "leader": r["leader"], "isr": r["isr"]}
    for key, p in truth["partitions"].items():
        assert (p["final_leader"], p["final_isr"]) == (last[key]["leader"], last[key]["isr"])
    kinds = Counter(i["fault"] for i in truth["incidents"])
    assert set(kinds) == set(generate.FAULTS)


def test_a_stopping_broker_retries_its_controlled_shutdown_as_a_broker_does(
    logs: tuple[Path, dict[str, Any]],
) -> None:
    """Attempts numbered from 1, each a backoff after the last, while one leaves partitions
    led (no other ISR member to take them), up to controlled.shutdown.max.retries
    (broker/server.py); the truth's stop is graceful only if the last one moved them all."""
    out, truth = logs
    runs: dict[int, list[list[dict[str, Any]]]] = defaultdict(list)  # each stop's attempts
    for b, rows in read(out).items():
        for r in rows:
            if r["event"] == "controlled_shutdown":
                if r["attempt"] == 1:
                    runs[b].append([])
                runs[b][-1].append(r)
    for run in itertools.chain.from_iterable(runs.values()):
        assert [r["attempt"] for r in run] == list(range(1, len(run) + 1)), run
        assert all(r["remaining"] != 0 for r in run[:-1]), run
        assert run[-1]["remaining"] == 0 or len(run) == generate.SHUTDOWN_ATTEMPTS, run
        for a, z in itertools.pairwise(run):
            assert z["ts"] - a["ts"] >= generate.SHUTDOWN_BACKOFF_MS, run
    causes = []
    for inc in truth["incidents"]:
        if inc["fault"] == "stop_broker":
            # Its stop: the broker's latest attempts before its loss.
            run = max(
                (r for r in runs[inc["broker"]] if r[-1]["ts"] < inc["lost"] + 10),
                key=lambda r: r[-1]["ts"],
            )
            moved = run[-1]["remaining"] == 0
            assert inc["cause"] == ("controlled shutdown" if moved else "session closed"), inc
            causes.append(inc["cause"])
    assert set(causes) == {"controlled shutdown", "session closed"}


def test_a_line_target_stops_the_run_early(tmp_path: Path) -> None:
    truth = generate.generate(
        generate.Options(brokers=3, partitions=30, failovers=1000, out=tmp_path, target_lines=2000)
    )
    assert 2000 <= truth["total_lines"] < 20_000
    assert len(truth["incidents"]) < 1000


def test_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        generate.main(
            ["--brokers", "3", "--partitions", "12", "--failovers", "2", "--out", str(tmp_path)]
        )
        == 0
    )
    assert "lines for 3 brokers" in capsys.readouterr().err
    assert (tmp_path / "truth.json").exists()
    with pytest.raises(SystemExit):
        generate.main(["--brokers", "1", "--out", str(tmp_path)])
