"""The history checks the fault tests rely on: a clean history passes, and each kind of
violation is found (so a fault test that passes means something)."""

from __future__ import annotations

from typing import Any

import pytest

from controller.state_machines import FOUND_WRITTEN
from tests.history_checks import check_history

Row = dict[str, Any]


def line(ts: int, broker: int, event: str, **fields: Any) -> Row:
    return {"ts": ts, "v": 1, "broker": broker, "event": event, **fields}


def state(ts: int, broker: int, epoch: int, leader: int, leader_epoch: int, version: int) -> Row:
    return line(
        ts,
        broker,
        "partition_state",
        topic="t",
        partition=0,
        leader=leader,
        leader_epoch=leader_epoch,
        isr=[leader, 3] if leader >= 0 else [],
        replicas=[1, 2, 3],
        controller_epoch=epoch,
        reason="offline",
        zk_version=version,
    )


def applied(
    ts: int, broker: int, controller: int, epoch: int, leader: int, leader_epoch: int
) -> Row:
    return line(
        ts,
        broker,
        "leader_and_isr",
        topic="t",
        partition=0,
        leader=leader,
        leader_epoch=leader_epoch,
        isr=[leader, 3],
        replicas=[1, 2, 3],
        controller_id=controller,
        controller_epoch=epoch,
        result="applied",
        error=None,
    )


def isr_change(ts: int, broker: int, leader_epoch: int, version: int) -> Row:
    return line(
        ts,
        broker,
        "isr_change",
        topic="t",
        partition=0,
        leader=broker,
        leader_epoch=leader_epoch,
        isr=[broker],
        zk_version=version,
        why="replica 3 fell behind",
    )


def clean_history() -> list[Row]:
    """Broker 1 controls (epoch 1) and makes 2 the leader; 2 shrinks the ISR; 1 is lost,
    broker 3 takes over (epoch 2) and moves the leadership to 3."""
    return [
        line(100, 1, "controller_elected", controller=1, controller_epoch=1, epoch_zk_version=0),
        state(110, 1, 1, 2, 0, 0),
        applied(120, 2, 1, 1, 2, 0),
        applied(121, 3, 1, 1, 2, 0),
        isr_change(130, 2, 0, 1),
        line(200, 3, "controller_elected", controller=3, controller_epoch=2, epoch_zk_version=1),
        state(210, 3, 2, 3, 1, 2),
        applied(220, 3, 3, 2, 3, 1),
        applied(221, 2, 3, 2, 3, 1),
    ]


def test_a_clean_history_passes() -> None:
    assert check_history(clean_history(), {("t", 0): 2}) == []


def test_the_brokers_files_may_come_in_any_order() -> None:
    rows = clean_history()
    by_broker = [r for b in (3, 2, 1) for r in rows if r["broker"] == b]
    assert check_history(by_broker, {("t", 0): 2}) == []


def test_an_epoch_elected_twice() -> None:
    rows = clean_history()
    rows.append(
        line(300, 2, "controller_elected", controller=2, controller_epoch=2, epoch_zk_version=1)
    )
    assert any("epoch 2 elected twice" in p for p in check_history(rows))


def test_an_epoch_elected_after_a_newer_one() -> None:
    rows = clean_history()
    rows.append(
        line(300, 2, "controller_elected", controller=2, controller_epoch=0, epoch_zk_version=0)
    )
    assert any(
        "elected with epoch 1 at /controller_epoch version 0, not after epoch 0's version 0" in p
        for p in check_history(rows)
    )


def test_a_term_of_a_few_ms_may_be_logged_after_the_next_one() -> None:
    """Elections are ordered by ZooKeeper (/controller_epoch's zkVersion), not by when each
    controller logged its own: broker 3's term (epoch 2) ended within ms (an admin deleted
    /controller), broker 2 won epoch 3, and broker 3's line came 19 ms after broker 2's
    (a fault schedule's history, ensemble seed 63)."""
    rows = [
        *clean_history()[:5],
        # Broker 3's election (epoch 2), logged late; it wrote nothing in its term.
        line(240, 3, "controller_elected", controller=3, controller_epoch=2, epoch_zk_version=1),
        line(221, 2, "controller_elected", controller=2, controller_epoch=3, epoch_zk_version=2),
        state(230, 2, 3, 2, 1, 2),
        applied(235, 2, 2, 3, 2, 1),
    ]
    assert check_history(rows, {("t", 0): 2}) == []


def test_a_zombie_controller_write_landing_after_the_new_controllers() -> None:
    rows = clean_history()
    # Broker 1's write of epoch 1 landed before epoch 2's (a lower version), though it was
    # logged later (the broker paused between its write and its log line): no violation.
    late = state(300, 1, 1, 2, 0, 1)
    rows = [r for r in rows if r["event"] != "isr_change"] + [late]
    assert check_history(rows) == []
    # Landing after it (a higher version) means the epoch check did not fence it.
    late.update(zk_version=3, leader=1, leader_epoch=2)
    problems = check_history(rows)
    assert any(
        "written by controller epoch 1 at zkVersion 3, after controller epoch 2" in p
        for p in problems
    )


def test_a_controller_writing_with_another_controllers_epoch() -> None:
    rows = clean_history()
    rows.append(state(310, 2, 2, 2, 3, 4))  # broker 2 writes with broker 3's epoch
    assert any("an epoch broker 3 was elected with" in p for p in check_history(rows))


def test_a_write_with_an_epoch_before_its_election() -> None:
    rows = clean_history()
    rows.append(state(199, 3, 2, 3, 1, 5))
    assert any("an epoch broker 3 was elected with at 200" in p for p in check_history(rows))


def test_two_writes_winning_the_same_zk_version() -> None:
    rows = clean_history()
    rows.append(state(300, 3, 2, 1, 2, 2))  # version 2 again
    assert any("both got zkVersion 2" in p for p in check_history(rows))


def test_a_leader_epoch_going_back_as_versions_grow() -> None:
    rows = clean_history()
    rows.append(isr_change(300, 2, 0, 3))  # broker 2, leader epoch 0, after epoch 1 at v2
    problems = check_history(rows)
    assert any("leader epoch went back from 1" in p for p in problems)


def test_an_isr_change_by_a_broker_that_is_not_the_leader() -> None:
    rows = clean_history()
    wrong = isr_change(300, 2, 1, 3)
    wrong["leader"] = 3
    assert any("changed the ISR of ('t', 0) led by 3" in p for p in check_history([*rows, wrong]))


def test_two_leaders_in_one_leader_epoch() -> None:
    rows = clean_history()
    rows.append(applied(300, 1, 3, 2, 1, 1))  # broker 1 applies "1 leads epoch 1"
    assert any("two leaders in leader epoch 1: 3" in p for p in check_history(rows))


def test_a_broker_applying_an_older_leader_epoch() -> None:
    rows = clean_history()
    rows.append(applied(300, 2, 3, 2, 2, 0))
    assert any(
        "applied leader epoch 0 of ('t', 0) after leader epoch 1" in p for p in check_history(rows)
    )


def test_a_broker_applying_an_older_controller_epoch() -> None:
    rows = clean_history()
    rows.append(applied(300, 2, 1, 1, 3, 1))
    assert any("from controller epoch 1 after one from epoch 2" in p for p in check_history(rows))


def test_a_request_from_a_controller_that_was_never_elected_with_its_epoch() -> None:
    rows = clean_history()
    rows.append(applied(300, 2, 2, 2, 3, 1))  # broker 2 never held epoch 2
    assert any("which it was not elected with" in p for p in check_history(rows))


def test_zookeeper_behind_what_the_logs_say_was_written() -> None:
    assert any(
        "at zkVersion 1 in ZooKeeper, yet a write of version 2" in p
        for p in check_history(clean_history(), {("t", 0): 1})
    )


@pytest.mark.parametrize("event", ["partition_state", "isr_change"])
def test_lines_from_before_zk_version_was_logged_are_left_out_of_the_version_check(
    event: str,
) -> None:
    rows = [r for r in clean_history() if r["event"] != "isr_change"]
    for r in rows:
        if r["event"] == event:
            del r["zk_version"]
    assert check_history(rows) == []


def test_a_topic_deleted_and_created_again_is_no_violation() -> None:
    """docs/state-change-log.md: a topic deleted and created again starts again at 0. The
    checks took the new topic's zkVersion 0 and leader epoch 0 for the old one's."""
    rows = [
        line(100, 1, "controller_elected", controller=1, controller_epoch=1, epoch_zk_version=0),
        state(110, 1, 1, 2, 0, 0),
        applied(111, 2, 1, 1, 2, 0),
        state(120, 1, 1, 3, 1, 1),
        applied(121, 2, 1, 1, 3, 1),
        line(200, 1, "topic_deleted", topic="t", controller_epoch=1),
        state(300, 1, 1, 2, 0, 0),  # the new topic "t"
        applied(301, 2, 1, 1, 2, 0),
    ]
    assert check_history(rows, {("t", 0): 0}) == []


def test_a_recreated_topics_own_violations_are_still_found() -> None:
    rows = [
        line(100, 1, "controller_elected", controller=1, controller_epoch=1, epoch_zk_version=0),
        state(110, 1, 1, 2, 0, 0),
        line(200, 1, "topic_deleted", topic="t", controller_epoch=1),
        state(300, 1, 1, 2, 0, 0),
        state(310, 1, 1, 3, 0, 0),  # the new topic: two writes of zkVersion 0, two leaders
    ]
    problems = check_history(rows, {("t", 0): 0})
    assert any("both got zkVersion 0" in p and "incarnation 2" in p for p in problems), problems
    assert any("two leaders in leader epoch 0" in p for p in problems), problems
    assert not any("incarnation" not in p for p in problems), problems


def test_a_fenced_controllers_write_logged_after_its_resignation_is_found() -> None:
    """A partition state written under a controller epoch its broker had resigned: found
    even though no newer controller wrote that partition."""
    rows = [
        line(100, 1, "controller_elected", controller=1, controller_epoch=1, epoch_zk_version=0),
        state(110, 1, 1, 2, 0, 0),
        line(200, 3, "controller_elected", controller=3, controller_epoch=2, epoch_zk_version=1),
        line(
            250,
            1,
            "controller_resigned",
            controller=1,
            controller_epoch=1,
            reason="fenced: another controller's epoch",
        ),
        state(260, 1, 1, 3, 1, 1),  # after its own resignation
    ]
    problems = check_history(rows)
    assert any("after it resigned that epoch" in p for p in problems), problems


def test_a_write_after_a_resignation_is_found_by_file_order_not_time() -> None:
    """The same broker's lines are ordered by its file: a write logged after its
    resignation in the same millisecond (or with its clock stepped back) is found, and one
    logged before it in a later millisecond is not a violation."""
    elected = line(
        100, 1, "controller_elected", controller=1, controller_epoch=1, epoch_zk_version=0
    )
    resigned = line(
        250, 1, "controller_resigned", controller=1, controller_epoch=1, reason="controller moved"
    )
    after = state(240, 1, 1, 2, 0, 0)  # its clock stepped back 10 ms
    assert any(
        "after it resigned that epoch" in p for p in check_history([elected, resigned, after])
    )
    before = state(250, 1, 1, 2, 0, 0)
    assert check_history([elected, before, resigned]) == []


def test_a_write_found_landed_after_its_answer_was_lost_is_no_fenced_write() -> None:
    """The controller logs a write whose answer a lost connection took when it reads it
    back, after the resignation the lost answer brought: the write was sent in its term."""
    elected = line(
        100, 1, "controller_elected", controller=1, controller_epoch=1, epoch_zk_version=0
    )
    resigned = line(
        250,
        1,
        "controller_resigned",
        controller=1,
        controller_epoch=1,
        reason="ZooKeeper error: ConnectionLoss",
    )
    found = {**state(300, 1, 1, 2, 0, 0), "why": FOUND_WRITTEN}
    assert check_history([elected, resigned, found]) == []
    # Without the mark, the same line is a fenced controller's write.
    plain = state(300, 1, 1, 2, 0, 0)
    assert any(
        "after it resigned that epoch" in p for p in check_history([elected, resigned, plain])
    )
