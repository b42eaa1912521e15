"""The controller's one write path, against a real server: items packed many to a multi,
each fenced by the /controller_epoch zkVersion."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.protocol.states import ZnodeStat

from zkdata import paths
from zkdata.client import (
    Check,
    ControllerMovedError,
    Create,
    Delete,
    SetData,
    WriteOp,
    ZkClient,
    is_own_failure,
)


@pytest.fixture
def zk(zk_connect: str) -> Iterator[ZkClient]:
    client = ZkClient(zk_connect, session_timeout_ms=10_000)
    client.start()
    client.create(paths.CONTROLLER_EPOCH, b"1")
    for i in range(7):
        client.create(f"/p{i}", b"0")
    try:
        yield client
    finally:
        client.close()


def data_and_version(zk: ZkClient, path: str) -> tuple[bytes, int]:
    got = zk.get(path)
    assert got is not None
    return got[0], got[1].version


def test_packed_items_come_back_each_with_its_own_results_and_no_check(zk: ZkClient) -> None:
    # Three ops a multi at most: the 7 items (one of two ops) go out in several multis.
    items: list[list[WriteOp]] = [[SetData(f"/p{i}", f"v{i}".encode(), 0)] for i in range(6)]
    items.insert(3, [SetData("/p6", b"both", 0), Create("/q", b"new")])
    results = zk.multi_fenced_batched(0, items, max_ops=3)
    assert [len(r) for r in results] == [1, 1, 1, 2, 1, 1, 1]
    for r in (*results[:3], *results[4:]):
        assert isinstance(r[0], ZnodeStat)
        assert r[0].version == 1
    assert isinstance(results[3][0], ZnodeStat)
    assert results[3][1] == "/q"
    assert [data_and_version(zk, f"/p{i}") for i in range(6)] == [
        (f"v{i}".encode(), 1) for i in range(6)
    ]
    assert data_and_version(zk, "/p6") == (b"both", 1)


def test_an_item_that_fails_leaves_the_items_packed_with_it_written(zk: ZkClient) -> None:
    items: list[list[WriteOp]] = [[SetData(f"/p{i}", b"x", 0)] for i in range(5)]
    items[2] = [SetData("/p2", b"x", 4)]  # a stale zkVersion
    items[3] = [SetData("/p3", b"x", 0), Create("/p0")]  # its second op fails: all of it does
    results = zk.multi_fenced_batched(0, items)
    assert isinstance(results[2][0], BadVersionError)
    assert isinstance(results[3][0], RolledBackError)
    assert isinstance(results[3][1], NodeExistsError)
    assert [data_and_version(zk, f"/p{i}")[1] for i in range(5)] == [1, 1, 0, 0, 1]


def test_a_moved_controller_epoch_fails_every_multi_and_writes_nothing(zk: ZkClient) -> None:
    zk.set(paths.CONTROLLER_EPOCH, b"2")  # another controller won: zkVersion 1
    items: list[list[WriteOp]] = [[SetData(f"/p{i}", b"x", 0)] for i in range(6)]
    with pytest.raises(ControllerMovedError):
        zk.multi_fenced_batched(0, items, max_ops=2)
    assert [data_and_version(zk, f"/p{i}")[1] for i in range(6)] == [0] * 6
    # One item in one multi, too.
    with pytest.raises(ControllerMovedError):
        zk.multi_fenced(0, [SetData("/p0", b"x", 0)])


def test_an_unfenced_check_is_answered_first_in_each_item(zk: ZkClient) -> None:
    results = zk.multi_batched(
        [[SetData("/p0", b"x", 0)], [SetData("/p1", b"x", 0)]],
        check=Check(paths.CONTROLLER_EPOCH, 0),
    )
    assert [r[0] for r in results] == [True, True]
    assert all(isinstance(r[1], ZnodeStat) for r in results)


def test_each_item_is_reported_once_as_its_multi_is_answered(zk: ZkClient) -> None:
    items: list[list[WriteOp]] = [[SetData(f"/p{i}", b"x", 0)] for i in range(7)]
    items[4] = [SetData("/p4", b"x", 3)]  # a stale zkVersion: its multi's items go alone
    calls: list[tuple[list[int], list[list[object]]]] = []
    returned = zk.multi_fenced_batched(
        0,
        iter(items),  # made as they are packed, as the controller's store makes them
        max_ops=2,
        on_answered=lambda indices, got: calls.append((list(indices), got)),
    )
    assert returned == []  # handed on, not kept besides
    results = {i: r for indices, got in calls for i, r in zip(indices, got, strict=True)}
    reported = [i for indices, _ in calls for i in indices]
    assert sorted(reported) == list(range(7))
    assert len(calls) == 4  # three multis answered whole, then the retried items
    assert calls[-1][0] == [4, 5]
    assert isinstance(results[4][0], BadVersionError)
    assert all(isinstance(results[i][0], ZnodeStat) for i in range(7) if i != 4)
    assert [data_and_version(zk, f"/p{i}")[1] for i in range(7)] == [1, 1, 1, 1, 0, 1, 1]


def test_a_fence_that_moves_between_multis_raises_after_reporting_what_was_written(
    zk: ZkClient,
) -> None:
    def items() -> Iterator[list[WriteOp]]:
        for i in range(6):
            if i == 3:  # the first multi went out when item 2 came: another controller wins
                zk.set(paths.CONTROLLER_EPOCH, b"2")
            yield [SetData(f"/p{i}", b"x", 0)]

    calls: list[list[int]] = []
    with pytest.raises(ControllerMovedError):
        zk.multi_fenced_batched(
            0, items(), max_ops=2, on_answered=lambda indices, _: calls.append(list(indices))
        )
    assert calls == [[0, 1]]
    assert [data_and_version(zk, f"/p{i}")[1] for i in range(6)] == [1, 1, 0, 0, 0, 0]


def test_a_failed_multi_answers_rolled_back_before_the_failing_op_and_inconsistency_after(
    zk: ZkClient,
) -> None:
    """What the server answers, which FakeZk.multi mimics and is_own_failure reads: the
    ops before the failing one RolledBackError, the ops after it RuntimeInconsistency."""
    zk.create("/p1/c", b"", make_parents=True)
    results = zk.multi([Delete("/p0"), Delete("/p1"), Delete("/p2"), Create("/p3")])
    assert [type(r) for r in results] == [
        RolledBackError,
        NotEmptyError,
        RuntimeInconsistency,
        RuntimeInconsistency,
    ]
    assert [is_own_failure(r) for r in results] == [False, True, False, False]
    assert all(zk.exists(f"/p{i}") is not None for i in range(4))


def test_items_packed_after_a_failing_item_are_retried_and_written(zk: ZkClient) -> None:
    items: list[list[WriteOp]] = [[SetData(f"/p{i}", b"x", 0)] for i in range(5)]
    items[1] = [SetData("/p1", b"x", 0), Create("/p0"), SetData("/p6", b"x", 0)]
    results = zk.multi_fenced_batched(0, items)
    assert [type(r) for r in results[1]] == [
        RolledBackError,
        NodeExistsError,
        RuntimeInconsistency,
    ]
    assert [data_and_version(zk, f"/p{i}")[1] for i in range(7)] == [1, 0, 1, 1, 1, 0, 0]
