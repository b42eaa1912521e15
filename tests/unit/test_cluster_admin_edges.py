"""admin/cluster_admin.py against scripted brokers: the requests it builds, and how it
finds the controller again (Kafka's AdminClient: NOT_CONTROLLER and an unreachable
controller are retried with a fresh Metadata until the deadline; any other error ends it)."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from admin import cluster_admin
from admin.cluster_admin import ClusterAdmin, report_lines
from admin.errors import AdminError
from wire.api import ApiKey
from wire.client import KafkaConnectionError
from wire.errors import ErrorCode
from zkdata.znodes import TopicPartition

Body = dict[str, Any]
BOOT = ("boot", 1)
BROKERS = [{"node_id": 1, "host": "h1", "port": 11}, {"node_id": 2, "host": "h2", "port": 12}]


class Scripted(ClusterAdmin):
    """Metadata from the bootstrap broker names `controllers` in turn (the last one
    repeated); a request to a controller is answered by `answer`."""

    def __init__(
        self, timeout_s: float, controllers: list[int], answer: Callable[[Body], Body]
    ) -> None:
        super().__init__([BOOT], timeout_s=timeout_s)
        self.controllers = controllers
        self.answer = answer
        self.sent: list[tuple[tuple[str, int], ApiKey, Body]] = []

    def _connect(self, endpoint: tuple[str, int]) -> Any:
        admin = self

        class Conn:
            def __enter__(self) -> Conn:
                return self

            def __exit__(self, *exc: object) -> None:
                return None

            def request(self, api: ApiKey, version: int, body: Body) -> Body:
                admin.sent.append((endpoint, api, body))
                if api == ApiKey.METADATA:
                    controller = admin.controllers[0]
                    if len(admin.controllers) > 1:
                        admin.controllers.pop(0)
                    return {"controller_id": controller, "brokers": BROKERS, "topics": []}
                return admin.answer(body)

        return Conn()

    def to_controllers(self) -> list[tuple[str, int]]:
        return [e for e, api, _ in self.sent if api != ApiKey.METADATA]


@pytest.fixture(autouse=True)
def fake_clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [0.0]

    def sleep(s: float) -> None:
        now[0] += s

    monkeypatch.setattr(
        cluster_admin, "time", SimpleNamespace(monotonic=lambda: now[0], sleep=sleep)
    )
    return now


def test_not_controller_and_an_unreachable_controller_are_asked_again() -> None:
    answers: list[Body | Exception] = [
        {"error_code": ErrorCode.NOT_CONTROLLER, "error_message": None},
        KafkaConnectionError("h2:12: connection refused"),
        {"error_code": 0, "responses": []},
    ]

    def answer(body: Body) -> Body:
        got = answers.pop(0)
        if isinstance(got, Exception):
            raise got
        return got

    # Controller 1, then one no broker knows (-1), then 2, then 2 again.
    admin = Scripted(30.0, [1, -1, 2, 2], answer)
    assert admin.alter_partition_reassignments({}) == {}
    assert admin.to_controllers() == [("h1", 11), ("h2", 12), ("h2", 12)]


def test_a_controller_id_no_broker_is_registered_for_is_asked_again() -> None:
    admin = Scripted(30.0, [7, 1], lambda body: {"error_code": 0, "topics": []})
    assert admin.list_partition_reassignments() == {}
    assert admin.to_controllers() == [("h1", 11)]


def test_another_error_ends_at_once_naming_it() -> None:
    admin = Scripted(30.0, [1], lambda body: {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED})
    with pytest.raises(
        AdminError,
        match=r"^ALTER_PARTITION_REASSIGNMENTS refused: CLUSTER_AUTHORIZATION_FAILED:"
        r" CLUSTER_AUTHORIZATION_FAILED$",
    ):
        admin.alter_partition_reassignments({})
    assert len(admin.to_controllers()) == 1


def test_the_deadline_says_what_was_last_heard(fake_clock: list[float]) -> None:
    admin = Scripted(
        2.0, [1], lambda body: {"error_code": ErrorCode.NOT_CONTROLLER, "error_message": None}
    )
    with pytest.raises(AdminError, match=r"within 2 s \(NOT_CONTROLLER: NOT_CONTROLLER\)$"):
        admin.alter_partition_reassignments({})
    # Asked at 0, 0.5, 1.0, 1.5 and 2.0 s: another backoff would pass the deadline.
    assert len(admin.to_controllers()) == 5
    assert fake_clock[0] == 2.0


def test_the_requests_bodies() -> None:
    admin = Scripted(
        2.5,
        [1],
        lambda body: {
            "error_code": 0,
            "responses": [
                {
                    "name": "t",
                    "partitions": [{"partition_index": 0, "error_code": 0, "error_message": None}],
                }
            ],
            "topics": [],
        },
    )
    admin.alter_partition_reassignments(
        {TopicPartition("t", 0): (3, 1), TopicPartition("t", 1): None}
    )
    _, _, body = admin.sent[-1]
    assert body == {
        "timeout_ms": 2500,
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {"partition_index": 0, "replicas": [3, 1]},
                    {"partition_index": 1, "replicas": None},  # None cancels
                ],
            }
        ],
    }
    # The look-up of the controller asks for no topic (None would be all of them).
    meta = [b for _, api, b in admin.sent if api == ApiKey.METADATA]
    assert meta[-1]["topics"] == []
    admin.list_partition_reassignments([])
    assert admin.sent[-1][2] == {"timeout_ms": 2500, "topics": []}  # none, not all
    admin.list_partition_reassignments()
    assert admin.sent[-1][2] == {"timeout_ms": 2500, "topics": None}


def test_replicas_leave_out_topics_in_error_and_ask_each_topic_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[Body] = []

    def metadata(self: ClusterAdmin, topics: list[Body] | None = None) -> Body:
        asked.append({"topics": topics})
        part = {"partition_index": 0, "replica_nodes": [2, 1]}
        return {
            "topics": [
                {"name": "a", "error_code": 0, "partitions": [part]},
                {
                    "name": "gone",
                    "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    "partitions": [part],
                },
            ]
        }

    monkeypatch.setattr(ClusterAdmin, "metadata", metadata)
    got = ClusterAdmin([BOOT]).replicas(["a", "gone", "a"])
    assert got == {TopicPartition("a", 0): (2, 1)}
    assert asked == [{"topics": [{"name": "a"}, {"name": "gone"}]}]


def test_refusals_are_reported_in_partition_order() -> None:
    results = {
        TopicPartition("b", 0): (ErrorCode.INVALID_REPLICA_ASSIGNMENT, "m"),
        TopicPartition("a", 10): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None),
        TopicPartition("a", 2): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None),
    }
    assert [line.split(":")[0] for line in report_lines(results)] == ["a-2", "a-10", "b-0"]


def test_metadata_comes_from_the_first_bootstrap_server_that_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tried: list[tuple[str, int]] = []

    class Conn:
        def __init__(self, endpoint: tuple[str, int]) -> None:
            self.endpoint = endpoint

        def __enter__(self) -> Conn:
            tried.append(self.endpoint)
            if self.endpoint[0] != "up":
                raise KafkaConnectionError(f"{self.endpoint[0]}: connection refused")
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def request(self, api: ApiKey, version: int, body: Body) -> Body:
            return {"brokers": []}

    monkeypatch.setattr(ClusterAdmin, "_connect", lambda self, endpoint: Conn(endpoint))
    admin = ClusterAdmin([("down", 1), ("up", 2), ("later", 3)])
    assert admin.metadata() == {"brokers": []}
    assert tried == [("down", 1), ("up", 2)]
    with pytest.raises(
        AdminError,
        match=r"^no bootstrap server answered: a: connection refused; b: connection refused$",
    ):
        ClusterAdmin([("a", 1), ("b", 2)]).metadata()


def test_every_partition_asked_and_answered_counts() -> None:
    def answer(body: Body) -> Body:
        def parts(*ps: int) -> list[Body]:
            return [
                {
                    "partition_index": p,
                    "error_code": 0,
                    "error_message": None,
                    "replicas": [1],
                    "adding_replicas": [],
                    "removing_replicas": [],
                }
                for p in ps
            ]

        topics = [{"name": "a", "partitions": parts(0, 1)}, {"name": "b", "partitions": parts(0)}]
        return {"error_code": 0, "responses": topics, "topics": topics}

    admin = Scripted(30.0, [1], answer)
    tps = [TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)]
    assert sorted(admin.alter_partition_reassignments(dict.fromkeys(tps))) == tps
    assert sorted(admin.list_partition_reassignments(tps)) == tps
    assert admin.sent[-1][2]["topics"] == [
        {"name": "a", "partition_indexes": [0, 1]},
        {"name": "b", "partition_indexes": [0]},
    ]
