"""zkctl up's argument checks at their bounds (cluster/local.py up): what is refused before
anything starts, and what is let through to the start (stopped here before it starts)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from cluster import local


class _Through(Exception):
    """Raised where up would begin to start things: the arguments were accepted."""


def _stop_before_starting(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, str]]:
    """up is stopped at its first step past the checks; the broker properties it
    validated are returned (one dict per broker)."""
    seen: list[dict[str, str]] = []
    validate = local.validate_properties

    def spy(props: Mapping[str, str]) -> None:
        seen.append(dict(props))
        validate(props)

    def through() -> None:
        raise _Through

    monkeypatch.setattr(local, "validate_properties", spy)
    monkeypatch.setattr(local, "_project_root", through)
    monkeypatch.delenv("ZKCTL_ZOOKEEPER", raising=False)
    return seen


@pytest.mark.parametrize("brokers", [0, -1, local.MAX_BROKERS + 1])
def test_up_refuses_a_broker_count_out_of_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, brokers: int
) -> None:
    _stop_before_starting(monkeypatch)
    with pytest.raises(local.ClusterArgumentError, match=f"between 1 and {local.MAX_BROKERS}"):
        local.up(tmp_path / "c", brokers)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("brokers", [1, local.MAX_BROKERS])
def test_up_takes_a_broker_count_at_either_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, brokers: int
) -> None:
    seen = _stop_before_starting(monkeypatch)
    with pytest.raises(_Through):
        local.up(tmp_path / "c", brokers)
    assert sorted(int(p["broker.id"]) for p in seen) == list(range(1, brokers + 1))


def test_up_takes_a_session_timeout_of_1000_ms_and_refuses_less(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _stop_before_starting(monkeypatch)
    with pytest.raises(local.ClusterArgumentError, match="at least 1000, not 999"):
        local.up(tmp_path / "c", 1, session_timeout_ms=999)
    assert seen == []
    with pytest.raises(_Through):
        local.up(tmp_path / "c", 1, session_timeout_ms=1000)
    assert seen[0]["zookeeper.session.timeout.ms"] == "1000"


@pytest.mark.parametrize(("brokers", "expected"), [(1, "1"), (2, "2"), (3, None), (4, None)])
def test_offsets_topic_replication_follows_a_cluster_smaller_than_three(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, brokers: int, expected: str | None
) -> None:
    """As Kafka's quickstart: offsets.topic.replication.factor (default 3) cannot exceed
    the brokers there are; from 3 brokers on Kafka's default stays."""
    seen = _stop_before_starting(monkeypatch)
    with pytest.raises(_Through):
        local.up(tmp_path / "c", brokers)
    assert len(seen) == brokers
    assert {p.get("offsets.topic.replication.factor") for p in seen} == {expected}


def test_an_offsets_topic_replication_override_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _stop_before_starting(monkeypatch)
    with pytest.raises(_Through):
        local.up(tmp_path / "c", 2, overrides=["offsets.topic.replication.factor=1"])
    assert {p["offsets.topic.replication.factor"] for p in seen} == {"1"}
