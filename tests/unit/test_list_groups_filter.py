"""ListGroups' states filter (broker/group_apis.py), against Kafka 2.8's
GroupCoordinator.handleListGroups."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from broker.group_apis import GroupApis
from broker.metadata_cache import MetadataCache
from wire.errors import ErrorCode


def listed(states: list[str] | None) -> list[str]:
    groups = [("a", "consumer", "Stable"), ("b", "consumer", "Empty"), ("c", "", "Dead")]
    coordinator = SimpleNamespace(list_groups=lambda: (ErrorCode.NONE, groups))
    apis = GroupApis(
        cast(Any, coordinator), MetadataCache(1, "CLIENT"), None, offsets_replication_factor=1
    )
    body = {} if states is None else {"states_filter": states}
    answer = apis.list_groups(4, body, {})
    assert answer["error_code"] == ErrorCode.NONE
    return [g["group_id"] for g in answer["groups"]]


def test_no_filter_lists_every_group() -> None:
    assert listed(None) == ["a", "b", "c"]
    assert listed([]) == ["a", "b", "c"]


def test_the_filter_names_states_exactly() -> None:
    """Kafka 2.8 keeps the groups whose state's name is in the filter
    (states.contains(g.summary.state)): a name in another case matches none, as a Java
    AdminClient asking for "stable" finds no group there."""
    assert listed(["Stable", "Dead"]) == ["a", "c"]
    assert listed(["Empty"]) == ["b"]
    assert listed(["stable", "EMPTY"]) == []
