"""admin/cluster_admin.py's own logic: the --bootstrap-server list, and what the CLI
reports of the controller's answers. Its requests are tested against real brokers in
tests/integration/test_admin_wire.py."""

from __future__ import annotations

import pytest

from admin.cluster_admin import parse_bootstrap, report_lines
from admin.errors import InvalidArgumentError
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition


def test_bootstrap_servers_are_host_port_pairs() -> None:
    assert parse_bootstrap("127.0.0.1:9092, b:1,[::1]:2") == [
        ("127.0.0.1", 9092),
        ("b", 1),
        ("::1", 2),
    ]
    assert parse_bootstrap("h:0009092") == [("h", 9092)]
    # "h:\u00b2": '²' passes str.isdigit(), and int() refuses it.
    # "h:1...1": Python's int() refuses more than 4,300 digits with a plain ValueError.
    huge = "h:" + "1" * 5000
    for bad in ("", "h", "h:", ":1", "h:x", "h:0", "h:65536", "h:1,", "h:\u00b2", "h:+1", huge):
        with pytest.raises(InvalidArgumentError, match="is not host:port"):
            parse_bootstrap(bad)


@pytest.mark.parametrize(
    ("servers", "why"),
    [
        ("a..b:9092", "label empty or too long"),
        (".a:1", "label empty or too long"),
        ("a" * 64 + ".com:1", "too long"),
        ("h:1,x\udcff:1", "Invalid character"),  # a byte no UTF-8 (surrogateescape)
    ],
)
def test_a_host_no_lookup_can_take_is_refused(servers: str, why: str) -> None:
    """A host name the resolver cannot be asked about (socket's IDNA encoding refuses it:
    an empty label, one over 63 characters) is the argument's fault, named, not a
    failure to connect."""
    item = servers.rsplit(",", maxsplit=1)[-1]
    host = item.rpartition(":")[0]
    with pytest.raises(InvalidArgumentError) as e:
        parse_bootstrap(servers)
    assert str(e.value).startswith(f"--bootstrap-server: {item!r}: {host!r} is not a host name (")
    assert why in str(e.value)  # the codec's own words


def test_hosts_the_resolver_may_refuse_are_left_to_it() -> None:
    # A trailing dot (the root), IDNA, a label of 63: each a name it can be asked about.
    for host in ("b.", "\u00e9t\u00e9.example", "a" * 63 + ".com", "::1"):
        assert parse_bootstrap(f"{host}:1") == [(host, 1)]


def test_only_the_refused_partitions_are_reported() -> None:
    results = {
        TopicPartition("t", 1): (int(ErrorCode.INVALID_REPLICA_ASSIGNMENT), "broker 9 is down"),
        TopicPartition("t", 0): (0, None),
        TopicPartition("u", 0): (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), None),
    }
    assert report_lines(results) == [
        "t-1: INVALID_REPLICA_ASSIGNMENT (broker 9 is down)",
        "u-0: UNKNOWN_TOPIC_OR_PARTITION",
    ]
    assert report_lines({TopicPartition("t", 0): (9999, "new")}) == ["t-0: error 9999 (new)"]
