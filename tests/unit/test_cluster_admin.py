"""admin/cluster_admin.py's own logic: the --bootstrap-server list, and what the CLI
reports of the controller's answers. Its requests are tested against real brokers in
tests/integration/test_admin_wire.py."""

from __future__ import annotations

from typing import Any, cast

import pytest

from admin.cluster_admin import ClusterAdmin, parse_bootstrap, report_lines
from admin.errors import InvalidArgumentError
from broker.admin_apis import AdminApis
from broker.apis import KafkaApis
from broker.config import load_broker_config
from broker.metadata_cache import MetadataCache
from broker.state_change_log import StateChangeLog
from tests.unit.fake_cluster import empty_cluster, register
from tests.unit.test_metadata_cache import request, state
from wire.errors import ErrorCode
from wire.protocol import request_codec, response_codec
from zkdata import paths
from zkdata.client import ZkClient
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


class _Wire:
    """A connection whose requests go, through the wire's codecs, to a broker's KafkaApis."""

    def __init__(self, apis: Any) -> None:
        self.apis = apis

    def __enter__(self) -> _Wire:
        return self

    def __exit__(self, *_exc: object) -> None:
        pass

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        codec = request_codec(api_key, version)
        answer = self.apis.handle(api_key, version, {}, codec.decode(bytes(codec.encode(body))))
        out = response_codec(api_key, version)
        decoded: dict[str, Any] = out.decode(bytes(out.encode(answer)))
        return decoded


def test_looking_topics_up_creates_none_on_a_broker_that_auto_creates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The replicas zkctl reassign reads (--generate, --verify, --execute) of a topic that
    does not exist: it is left out, and not made. Metadata before v4 has no
    allow_auto_topic_creation (true, by the schema's default), so a broker with
    auto.create.topics.enable created every absent topic a reassignment file named, a
    typo's included; Kafka 2.8's AdminClient.describeTopics asks with it false."""
    zk = empty_cluster()
    for b in (1, 2, 3):
        register(zk, b)
    cache = MetadataCache(1)
    cache.update(request(("t", [state(0, 1)])))
    config = load_broker_config(
        overrides=["broker.id=1", "zookeeper.connect=z:2181", "auto.create.topics.enable=true"]
    )
    admin_apis = AdminApis(cast(ZkClient, zk), cache, lambda: False, config)
    none = cast(Any, None)
    apis = KafkaApis(
        1, cache, none, none, StateChangeLog(None, 1), lambda: 10,
        metadata_wait_s=0, admin=admin_apis,
    )  # fmt: skip
    admin = ClusterAdmin([("b1", 9092)])
    monkeypatch.setattr(admin, "_connect", lambda _endpoint: _Wire(apis))
    assert admin.replicas(["t", "absent"]) == {TopicPartition("t", 0): (1, 2, 3)}
    assert zk.exists(paths.topic("absent")) is None
