"""Config change notifications (/config/changes): their names, order and entities."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.config_changes import notification_sequence, pending_notifications, topic_of
from zkdata.znodes import MalformedZnode, decode_config_change, encode_config_change

PATH = "/config/changes/config_change_0000000007"


def test_a_notification_name_gives_its_sequence_number() -> None:
    assert notification_sequence("config_change_0000000012") == 12
    assert notification_sequence("config_change_2147483648") == 2_147_483_648
    for other in ("config_change_", "config_change_12a", "x_0000000001", "config_change_-1"):
        assert notification_sequence(other) is None
    assert notification_sequence("config_change_\u0661") is None  # a digit, not ASCII


@given(st.lists(st.integers(0, 10**9), unique=True), st.integers(-1, 10**9))
def test_pending_notifications_are_those_after_the_last_processed_in_order(
    sequences: list[int], last: int
) -> None:
    names = [f"config_change_{n:010d}" for n in sequences] + ["stray"]
    pending = pending_notifications(reversed(names), last)
    assert [seq for seq, _ in pending] == sorted(n for n in sequences if n > last)
    assert all(notification_sequence(name) == seq for seq, name in pending)


def test_only_topic_entities_name_a_topic() -> None:
    assert topic_of("topics/orders") == "orders"
    for other in ("brokers/1", "users/alice/clients/c", "topics/", "topics/a/b", "topics"):
        assert topic_of(other) is None


def test_both_versions_of_a_notification_decode() -> None:
    assert decode_config_change(PATH, encode_config_change("topics/t")) == "topics/t"
    v1 = b'{"version":1,"entity_type":"topics","entity_name":"t"}'
    assert decode_config_change(PATH, v1) == "topics/t"


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"[]",
        b"{",
        b'{"version":3,"entity_path":"topics/t"}',
        b'{"version":2}',
        b'{"version":2,"entity_path":7}',
        b'{"version":1,"entity_type":"topics"}',
    ],
)
def test_a_malformed_notification_is_reported_with_its_path(data: bytes) -> None:
    with pytest.raises(MalformedZnode) as e:
        decode_config_change(PATH, data)
    assert e.value.path == PATH
