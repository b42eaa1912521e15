"""One partition's history walked into windows, churn counts and balance (pure)."""

from __future__ import annotations

import itertools
from typing import Any

from pipeline import partitions as pp
from pipeline.control import Death

_hash = itertools.count(1)


def state(
    ts: int,
    leader: int,
    epoch: int,
    isr: list[int],
    reason: str,
    *,
    replicas: list[int] | None = (1, 2, 3),  # type: ignore[assignment]
    cepoch: int = 1,
    topic: str = "t",
    partition: int = 0,
    zkv: int | None = None,
    found: bool = False,
) -> dict[str, Any]:
    return {
        "cluster": "c",
        "topic": topic,
        "partition": partition,
        "leader_epoch": epoch,
        "rank": pp.RANK_STATE,
        "zk_version": zkv,
        "ts": ts,
        "broker": 9,
        "leader": leader,
        "isr": isr,
        "replicas": list(replicas) if replicas is not None else None,
        "controller_epoch": cepoch,
        "reason": reason,
        "h1": next(_hash),
        "h2": 0,
        "found": found,
    }


def applied(ts: int, leader: int, epoch: int, **kw: Any) -> dict[str, Any]:
    r = state(ts, leader, epoch, [leader], "x", **kw)
    r.update(rank=pp.RANK_APPLIED, broker=leader, reason=None, controller_epoch=None)
    return r


def isr(ts: int, leader: int, epoch: int, isr_: list[int], zkv: int, **kw: Any) -> dict[str, Any]:
    r = state(ts, leader, epoch, isr_, "x", **kw)
    r.update(
        rank=pp.RANK_ISR,
        zk_version=zkv,
        broker=leader,
        reason=None,
        replicas=None,
        controller_epoch=None,
    )
    return r


def rows(*items: dict[str, Any]) -> list[tuple[Any, ...]]:
    """As Spark hands them to the walker: sorted by epoch, rank, version, time."""
    out = [tuple(i[f] for f in pp.ROW_FIELDS) for i in items]
    return sorted(
        out,
        key=lambda r: (
            r[pp.C_TOPIC],
            r[pp.C_PARTITION],
            r[pp.C_EPOCH],
            r[pp.C_RANK],
            -1 if r[pp.C_ZKV] is None else r[pp.C_ZKV],
            r[pp.C_TS],
        ),
    )


def ctx(
    *deaths: Death, end: int = 10_000, deletions: dict[str, list[int]] | None = None, tol: int = 5
) -> pp.WalkContext:
    by: dict[int, list[Death]] = {}
    for d in deaths:
        by.setdefault(d.broker, []).append(d)
    return pp.WalkContext(
        deaths={"c": by},
        log_end={"c": end},
        deletions={"c": deletions or {}},
        buckets={"c": (0, 1000, 10)},
        tol_ms=tol,
    )


def walk(
    c: pp.WalkContext, *items: dict[str, Any]
) -> tuple[pp.PartitionStats, list[dict[str, Any]]]:
    balance = pp.BalanceDeltas(c.buckets)
    st, windows = pp.walk_partition("c", "t", 0, rows(*items), c, balance)
    return st, [dict(zip(pp.WINDOW_FIELDS, w, strict=True)) for w in windows]


def test_isr_churn_and_under_replication() -> None:
    st, windows = walk(
        ctx(),
        state(0, 1, 0, [1, 2, 3], "new"),
        applied(1, 1, 0),
        isr(100, 1, 0, [1, 2], 1),
        isr(200, 1, 0, [1, 2, 3], 2),
        isr(300, 1, 0, [1], 3),
    )
    assert (st.isr_shrinks, st.isr_expands, st.leader_changes) == (2, 1, 0)
    assert st.unavailable_windows == 0
    under = [(w["start_ts"], w["end_ts"], w["open"]) for w in windows]
    assert under == [(100, 200, False), (300, 10_000, True)]
    assert st.under_replicated_ms == 100 + 9_700
    assert (st.final_leader, st.final_leader_epoch, st.final_isr) == (1, 0, [1])


def test_a_lost_leader_is_unavailable_from_its_loss_until_the_new_leader_applied() -> None:
    st, windows = walk(
        ctx(Death(1, 500, None, 7)),
        state(0, 1, 0, [1, 2, 3], "new"),
        state(503, 2, 1, [2, 3], "offline", cepoch=1),
        applied(509, 2, 1),
    )
    [w] = [w for w in windows if w["kind"] == pp.UNAVAILABLE]
    assert (w["start_ts"], w["end_ts"], w["incident_id"]) == (500, 509, 7)
    assert (w["lost_leader"], w["recovered_leader"], w["recovered_reason"]) == (1, 2, "offline")
    assert st.leader_changes == 1
    assert st.unavailable_ms == 9


def test_a_failover_without_a_leader_for_a_while_is_one_window() -> None:
    # The new controller first takes the dead leader out (-1), then elects.
    st, windows = walk(
        ctx(Death(1, 500, None, 3)),
        state(0, 1, 0, [1, 2, 3], "new"),
        state(520, -1, 1, [2, 3], "offline", cepoch=2),
        state(530, 2, 2, [2, 3], "offline", cepoch=2),
        applied(533, 2, 2),
    )
    un = [w for w in windows if w["kind"] == pp.UNAVAILABLE]
    assert [(w["start_ts"], w["end_ts"], w["incident_id"]) for w in un] == [(500, 533, 3)]
    assert st.unavailable_windows == 1


def test_clock_skew_cannot_reorder_one_decision_and_what_followed() -> None:
    # The leader's clock runs 4 ms behind the controller's: its ISR change and its applied
    # line carry times before the decision they follow. Epochs order them.
    st, windows = walk(
        ctx(Death(1, 500, None, 1)),
        state(0, 1, 0, [1, 2, 3], "new"),
        state(506, 2, 1, [2, 3], "offline"),
        applied(503, 2, 1),
        isr(504, 2, 1, [2, 3, 1], 1),
    )
    assert (st.isr_shrinks, st.isr_expands) == (1, 1)
    [un] = [w for w in windows if w["kind"] == pp.UNAVAILABLE]
    assert (un["start_ts"], un["end_ts"]) == (500, 506)  # applied "before" the decision: clamped
    assert all(w["end_ts"] >= w["start_ts"] for w in windows)


def test_repeated_lines_count_once() -> None:
    a = state(0, 1, 0, [1, 2, 3], "new")
    b = isr(100, 1, 0, [1, 2], 1)
    st, _ = walk(ctx(), a, b, dict(b), dict(a))
    assert st.duplicates == 2
    assert st.states == 2
    assert st.isr_shrinks == 1


def test_a_loss_never_handled_leaves_an_open_window() -> None:
    st, windows = walk(ctx(Death(1, 800, None, 2), end=5000), state(0, 1, 0, [1, 2, 3], "new"))
    [w] = [w for w in windows if w["kind"] == pp.UNAVAILABLE]
    assert (w["start_ts"], w["end_ts"], w["open"], w["incident_id"]) == (800, 5000, True, 2)
    assert st.open_unavailable


def test_a_leader_moved_away_before_it_was_lost_was_no_outage() -> None:
    # Preferred election at 500 moves leadership off broker 1; broker 1 dies at 502. The
    # loss comes after the move: no window (no slack when the next state is not a loss's).
    st, _ = walk(
        ctx(Death(1, 502, None, 1)),
        state(0, 1, 0, [1, 2, 3], "new"),
        state(500, 2, 1, [1, 2, 3], "preferred"),
        applied(501, 2, 1),
    )
    assert st.unavailable_windows == 0


def test_a_leader_its_controlled_shutdown_moved_away_is_no_outage_whatever_the_clocks() -> None:
    # Broker 2 (the controller, stopping) moves its leadership away and then goes; the
    # others log its loss by clocks 18 ms behind its own, so the loss is stamped before
    # the move. It was an unavailable window from the loss to the move.
    st, windows = walk(
        ctx(Death(2, 490, None, 1), tol=25),
        state(0, 2, 0, [1, 2, 3], "new"),
        state(500, 1, 1, [1, 3], "controlled_shutdown"),
        applied(483, 1, 1),
    )
    assert [w for w in windows if w["kind"] == pp.UNAVAILABLE] == []
    assert st.unavailable_windows == 0
    # Lost longer than the tolerance before the move: lost before it, an outage.
    st, windows = walk(
        ctx(Death(2, 400, None, 1), tol=25),
        state(0, 2, 0, [1, 2, 3], "new"),
        state(500, 1, 1, [1, 3], "controlled_shutdown"),
        applied(483, 1, 1),
    )
    un = [(w["start_ts"], w["end_ts"]) for w in windows if w["kind"] == pp.UNAVAILABLE]
    assert un == [(400, 500)]
    # A controlled shutdown that left the leader in place (a follower stopping) is no
    # reason to take the leader's own loss for a later one.
    st, windows = walk(
        ctx(Death(1, 490, None, 1), tol=25),
        state(0, 1, 0, [1, 2, 3], "new"),
        state(500, 1, 1, [1, 3], "controlled_shutdown"),
        state(520, 3, 2, [3], "offline"),
        applied(523, 3, 2),
    )
    un = [(w["start_ts"], w["end_ts"]) for w in windows if w["kind"] == pp.UNAVAILABLE]
    assert un == [(490, 523)]


def test_a_broker_back_before_the_state_that_elected_it_is_alive() -> None:
    st, _ = walk(
        ctx(Death(1, 100, 400, 1)),
        state(0, 2, 0, [2, 3, 1], "new"),
        state(402, 1, 1, [1, 3], "offline"),
        applied(403, 1, 1),
    )
    assert st.unavailable_windows == 0


def test_a_topic_being_deleted_is_not_unavailable_and_ends_at_its_deletion() -> None:
    st, windows = walk(
        ctx(deletions={"t": [900]}),
        state(0, 1, 0, [1, 2, 3], "new"),
        state(800, -1, 1, [2, 3], "deleted"),
        state(801, -1, 2, [3], "deleted"),
    )
    assert st.unavailable_windows == 0
    assert st.under_replicated_windows == 0
    assert windows == []


def test_a_topic_created_again_is_a_new_generation() -> None:
    st, windows = walk(
        ctx(deletions={"t": [900]}),
        state(0, 1, 0, [1, 2, 3], "new"),
        state(800, 1, 1, [1, 2], "deleted"),
        state(2000, 3, 0, [3, 1], "new", replicas=[3, 1]),
        applied(2001, 3, 0),
    )
    assert st.generations == 2
    assert (st.final_leader, st.final_leader_epoch, st.replicas) == (3, 0, [3, 1])
    assert windows == []


def test_a_topic_created_again_without_its_deletion_line_splits_at_its_new_state() -> None:
    st, windows = walk(
        ctx(),
        state(0, 1, 0, [1, 2, 3], "new"),
        state(100, -1, 1, [1, 2, 3], "offline"),
        state(2000, 3, 0, [3, 1], "new", replicas=[3, 1]),
        applied(2001, 3, 0),
    )
    assert st.generations == 2
    # The first incarnation's leaderless state ends at the second's creation.
    assert [(w["kind"], w["start_ts"], w["end_ts"], w["open"]) for w in windows] == [
        (pp.UNAVAILABLE, 100, 2000, False),
    ]
    assert (st.final_leader, st.final_leader_epoch, st.replicas) == (3, 0, [3, 1])


def test_a_deletion_starts_a_new_generation_when_the_first_new_state_is_missing() -> None:
    """The first incarnation's `new` state is in a rolled file long deleted: the topic's
    deletion line alone separates the incarnations, whose leader epochs overlap."""
    st, windows = walk(
        ctx(deletions={"t": [900]}),
        state(100, 2, 3, [2, 3], "preferred", replicas=[2, 3, 1]),
        state(850, -1, 4, [2, 3], "deleted", replicas=[2, 3, 1]),
        state(1000, 3, 0, [3, 1], "new", replicas=[3, 1]),
        applied(1001, 3, 0),
        isr(1500, 3, 0, [3], 1),
    )
    assert (st.generations, st.states) == (2, 4)
    assert (st.leader_changes, st.isr_shrinks, st.isr_expands) == (0, 1, 0)
    assert [(w["kind"], w["start_ts"], w["end_ts"], w["open"]) for w in windows] == [
        (pp.UNDER_REPLICATED, 100, 850, False),
        (pp.UNDER_REPLICATED, 1500, 10_000, True),
    ]
    assert (st.final_leader, st.final_leader_epoch, st.final_isr) == (3, 0, [3])


def test_lines_stamped_across_a_deletion_go_with_the_sequence_they_continue() -> None:
    """Broker 2's clock is ahead: its ISR change of the old incarnation (epoch 3, zkVersion
    8, after the decision's 7) is stamped after the deletion. Broker 3's is behind: its
    applied state and ISR change of the new incarnation's epoch 0 are stamped before it."""
    st, windows = walk(
        ctx(deletions={"t": [900]}, tol=50),
        state(100, 2, 3, [2, 3], "preferred", replicas=[2, 3, 1], zkv=7),
        isr(920, 2, 3, [2, 3, 1], 8),
        state(899, -1, 4, [2, 3, 1], "deleted", replicas=[2, 3, 1], zkv=9),
        state(905, 3, 0, [3, 1], "new", replicas=[3, 1], zkv=0),
        applied(880, 3, 0),
        isr(890, 3, 0, [3], 1),
        isr(2000, 3, 0, [3, 1], 2),
    )
    assert (st.generations, st.states) == (2, 6)
    assert (st.leader_changes, st.isr_shrinks, st.isr_expands, st.orphan_applied) == (0, 1, 2, 0)
    # The old incarnation under-replicated until its ISR change (920), the new one from
    # its shrink (made monotone: not before its `new` state at 905) to its expansion.
    assert [(w["kind"], w["start_ts"], w["end_ts"]) for w in windows] == [
        (pp.UNDER_REPLICATED, 100, 920),
        (pp.UNDER_REPLICATED, 905, 2000),
    ]
    assert (st.final_leader, st.final_leader_epoch, st.final_isr) == (3, 0, [3, 1])


def test_a_line_that_fits_both_incarnations_goes_by_its_stamp() -> None:
    c = ctx(deletions={"t": [900]}, tol=50)
    old = [
        state(0, 1, 0, [1, 2], "new", replicas=[1, 2], zkv=0),
        state(860, -1, 1, [1, 2], "deleted", replicas=[1, 2], zkv=1),
    ]
    new = [state(910, 1, 0, [1, 2], "new", replicas=[1, 2], zkv=0)]
    # Leader 1, epoch 0, zkVersion 1: either incarnation's first ISR change.
    _, before = walk(c, *old, *new, isr(890, 1, 0, [1], 1))
    _, after = walk(c, *old, *new, isr(920, 1, 0, [1], 1))
    assert [(w["start_ts"], w["end_ts"], w["open"]) for w in before] == [(890, 890, False)]
    assert [(w["start_ts"], w["end_ts"], w["open"]) for w in after] == [(920, 10_000, True)]


def test_without_a_replicas_field_every_replica_seen_in_an_isr_counts() -> None:
    st, windows = walk(
        ctx(),
        state(0, 1, 0, [1, 2, 3], "new", replicas=None),
        isr(100, 1, 0, [1, 3], 1),
    )
    assert st.replicas == [1, 2, 3]
    assert [(w["kind"], w["start_ts"]) for w in windows] == [(pp.UNDER_REPLICATED, 100)]


def test_applied_lines_without_a_decision_are_counted() -> None:
    st, _ = walk(ctx(), state(0, 1, 0, [1, 2, 3], "new"), applied(50, 2, 5))
    assert st.orphan_applied == 1


def test_leader_balance_deltas_sum_to_the_final_leadership() -> None:
    c = ctx(Death(1, 2500, None, 1), end=9_999)
    balance = pp.BalanceDeltas(c.buckets)
    pp.walk_partition(
        "c",
        "t",
        0,
        rows(
            state(0, 1, 0, [1, 2, 3], "new"),
            state(2503, 2, 1, [2, 3], "offline"),
            applied(2504, 2, 1),
            state(7000, 1, 2, [2, 3, 1], "preferred"),
        ),
        c,
        balance,
    )
    pp.walk_partition(
        "c",
        "t",
        1,
        rows(
            state(0, 3, 0, [3, 1], "new", replicas=[3, 1], partition=1),
        ),
        c,
        balance,
    )
    totals: dict[tuple[int, int], int] = {}
    for _cluster, broker, _k, dl, dp, dpl in balance.rows():
        totals[(broker, 0)] = totals.get((broker, 0), 0) + dl
        totals[(broker, 1)] = totals.get((broker, 1), 0) + dp
        totals[(broker, 2)] = totals.get((broker, 2), 0) + dpl
    leaders = {b: n for (b, what), n in totals.items() if what == 0 and n}
    assert leaders == {1: 1, 3: 1}
    assert {b: n for (b, what), n in totals.items() if what == 1 and n} == {1: 1, 3: 1}
    assert {b: n for (b, what), n in totals.items() if what == 2 and n} == {1: 1, 3: 1}


def test_walk_streams_many_partitions_and_tags_its_output() -> None:
    c = ctx()
    data = rows(
        state(0, 1, 0, [1, 2, 3], "new", partition=0),
        state(0, 2, 0, [2, 3, 1], "new", partition=1),
        isr(10, 2, 0, [2, 3], 1, partition=1),
    )
    out = list(pp.walk(data, c))
    tags = [t for t, _ in out]
    assert tags.count("stats") == 2
    assert tags.count("window") == 1
    assert tags[-1] == "balance"


def test_a_bounced_leader_elected_again_in_the_same_event_is_back() -> None:
    # Kafka's processBrokerChange on a bounce: onBrokerFailure (leader -1, `offline`), then
    # onBrokerStartup elects the restarted broker again (`offline`), both within the
    # tolerance of its loss and return. The new incarnation's leadership is live: the
    # window ends when it applied the state, not at the end of the logs.
    st, windows = walk(
        ctx(Death(2, 500, 500, 1), end=60_000),
        state(0, 2, 0, [2], "new", replicas=[2, 3]),
        state(501, -1, 1, [2], "offline", replicas=[2, 3]),
        state(502, 2, 2, [2], "offline", replicas=[2, 3]),
        applied(505, 2, 2, replicas=[2, 3]),
    )
    [w] = [w for w in windows if w["kind"] == pp.UNAVAILABLE]
    assert (w["start_ts"], w["end_ts"], w["open"], w["incident_id"]) == (500, 505, False, 1)
    assert not st.open_unavailable
    # The broker's own clock a little ahead: its session loss and registration, stamped
    # just after the decision that elected its new incarnation, are the same bounce.
    st, windows = walk(
        ctx(Death(2, 500, 500, 1), Death(2, 503, 504, 1), end=60_000),
        state(0, 2, 0, [2], "new", replicas=[2, 3]),
        state(501, -1, 1, [2], "offline", replicas=[2, 3]),
        state(502, 2, 2, [2], "offline", replicas=[2, 3]),
        applied(505, 2, 2, replicas=[2, 3]),
    )
    assert [(w["start_ts"], w["end_ts"]) for w in windows if w["kind"] == pp.UNAVAILABLE] == [
        (500, 505)
    ]


def test_a_leader_lost_after_its_election_and_back_later_is_unavailable_until_handled() -> None:
    # Lost after the state that elected it and back only after the tolerance: its
    # leadership is void from the loss until the controller's next decision.
    _, windows = walk(
        ctx(Death(1, 600, 900, 4)),
        state(0, 1, 0, [1, 2, 3], "new"),
        state(650, 2, 1, [2, 3], "offline"),
        applied(652, 2, 1),
    )
    [w] = [w for w in windows if w["kind"] == pp.UNAVAILABLE]
    assert (w["start_ts"], w["end_ts"], w["incident_id"]) == (600, 652, 4)


def test_an_offline_decision_for_another_brokers_loss_does_not_void_a_live_leader() -> None:
    # A rack loss: broker 2 lost at 1000, broker 3 (this partition's leader) at 1020. The
    # `offline` decision at 1001 only drops follower 2 from the ISR, its leader 3 kept: it
    # handled broker 2's loss, not broker 3's, so 3's loss is not pulled back onto it.
    st, windows = walk(
        ctx(Death(2, 1000, None, 1), Death(3, 1020, None, 2), end=5000, tol=100),
        state(10, 3, 0, [3, 2, 1], "new", replicas=[3, 2, 1]),
        applied(12, 3, 0, replicas=[3, 2, 1]),
        state(1001, 3, 1, [3, 1], "offline", replicas=[3, 2, 1]),
        state(1021, 1, 2, [1], "offline", replicas=[3, 2, 1]),
        applied(1023, 1, 2, replicas=[3, 2, 1]),
    )
    un = [w for w in windows if w["kind"] == pp.UNAVAILABLE]
    assert [(w["start_ts"], w["end_ts"], w["incident_id"]) for w in un] == [(1020, 1023, 2)]
    assert st.unavailable_windows == 1


def refused(ts: int, leader: int, epoch: int, **kw: Any) -> dict[str, Any]:
    """The leader's own leader_and_isr rejected line (e.g. REPLICA_NOT_AVAILABLE)."""
    r = applied(ts, leader, epoch, **kw)
    r.update(reason=pp.REFUSED)
    return r


def test_a_leader_that_refused_its_leadership_does_not_end_the_window() -> None:
    # Broker 2 lost; the controller elects 3, which refuses the state: still no leader
    # until 1 applied the next decision.
    st, windows = walk(
        ctx(Death(2, 1000, None, 1), end=5000, tol=100),
        state(10, 2, 0, [2, 3, 1], "new", replicas=[2, 3, 1]),
        applied(12, 2, 0, replicas=[2, 3, 1]),
        state(1001, 3, 1, [3, 1], "offline", replicas=[2, 3, 1]),
        refused(1002, 3, 1, replicas=[2, 3, 1]),
        state(1500, 1, 2, [1], "offline", replicas=[2, 3, 1]),
        applied(1502, 1, 2, replicas=[2, 3, 1]),
    )
    un = [w for w in windows if w["kind"] == pp.UNAVAILABLE]
    assert [(w["start_ts"], w["end_ts"], w["incident_id"], w["recovered_leader"]) for w in un] == [
        (1000, 1502, 1, 1)
    ]
    assert st.orphan_applied == 0


def test_a_leader_lost_before_applying_its_leadership_does_not_end_the_window() -> None:
    # Broker 2 lost; the controller elects 3, killed before it applied (its loss found at
    # 7000); 1 is elected at 7001 and applies at 7002: one window.
    _, windows = walk(
        ctx(Death(2, 1000, None, 1), Death(3, 7000, None, 2), end=9000, tol=100),
        state(10, 2, 0, [2, 3, 1], "new", replicas=[2, 3, 1]),
        applied(12, 2, 0, replicas=[2, 3, 1]),
        state(1001, 3, 1, [3, 1], "offline", replicas=[2, 3, 1]),
        state(7001, 1, 2, [1], "offline", replicas=[2, 3, 1]),
        applied(7002, 1, 2, replicas=[2, 3, 1]),
    )
    un = [w for w in windows if w["kind"] == pp.UNAVAILABLE]
    assert [(w["start_ts"], w["end_ts"], w["incident_id"]) for w in un] == [(1000, 7002, 1)]


def test_a_leader_back_unseen_ends_its_window_when_it_applied_its_state_again() -> None:
    # The sole ISR member (leader 1) is killed and restarted: registered again at 10002,
    # no new decision (the next controller keeps its state), and it applies the same
    # leader epoch at 10008. Not unavailable to the end of the logs.
    st, windows = walk(
        ctx(Death(1, 10000, 10002, 5), end=70_000, tol=100),
        state(10, 1, 0, [1, 2], "new", replicas=[1, 2]),
        applied(12, 1, 0, replicas=[1, 2]),
        isr(500, 1, 0, [1], 1, replicas=[1, 2]),
        applied(10008, 1, 0, replicas=[1, 2]),
    )
    un = [w for w in windows if w["kind"] == pp.UNAVAILABLE]
    assert [(w["start_ts"], w["end_ts"], w["open"], w["incident_id"]) for w in un] == [
        (10000, 10008, False, 5)
    ]
    assert not st.open_unavailable


def test_a_leader_back_unseen_that_logged_nothing_is_back_at_its_registration() -> None:
    # A ZooKeeper outage expired every session; the leader's process lived on, registered
    # again and kept its leader epoch (nothing logged): back at its registration.
    _, windows = walk(
        ctx(Death(2, 26002, 26022, 1), end=90_000, tol=100),
        state(10, 2, 0, [2, 3, 1], "new", replicas=[2, 3, 1]),
        applied(12, 2, 0, replicas=[2, 3, 1]),
    )
    un = [w for w in windows if w["kind"] == pp.UNAVAILABLE]
    assert [(w["start_ts"], w["end_ts"], w["open"]) for w in un] == [(26002, 26022, False)]


def test_a_state_found_written_after_the_next_decision_keeps_that_decisions_times() -> None:
    """Controller epoch 1's write of leader 3 (epoch 1) lost its answer; epoch 2's
    controller loaded it (broker 3 applied it at 1020), and when broker 3 was lost at 2000
    elected 2 (2005, applied 2010). Controller 1 logged its write found landed only when
    it was back, at 2500: a line stamped when found (docs/state-change-log.md), not when
    written. Taken for its write's time, it made the later decision's times 2500 too:
    the 10 ms without a leader became 0 ms at 2500, both applied lines orphans."""
    st, windows = walk(
        ctx(Death(1, 1000, 2400, 1), Death(3, 2000, None, 2)),
        state(0, 2, 0, [1, 2, 3], "new", zkv=0),
        applied(1, 2, 0),
        state(2500, 3, 1, [1, 2, 3], "preferred", cepoch=1, zkv=1, found=True),
        applied(1020, 3, 1),
        state(2005, 2, 2, [2, 1], "offline", cepoch=2, zkv=2),
        applied(2010, 2, 2),
    )
    [w] = [w for w in windows if w["kind"] == pp.UNAVAILABLE]
    assert (w["start_ts"], w["end_ts"], w["incident_id"]) == (2000, 2010, 2)
    assert (w["lost_leader"], w["recovered_leader"]) == (3, 2)
    assert st.orphan_applied == 0
    assert st.leader_changes == 2


def unavailable(windows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (w["start_ts"], w["end_ts"], w["open"], w["recovered_leader"], w["recovered_reason"])
        for w in windows
        if w["kind"] == pp.UNAVAILABLE
    ]


def test_a_leader_lost_at_the_stamp_of_the_decision_moving_it_away_was_lost_leading() -> None:
    # A loss that began by the next decision (inclusive) voids the leadership up to it.
    _, windows = walk(
        ctx(Death(1, 500, None, 4), tol=5),
        state(0, 1, 0, [1, 2, 3], "new"),
        applied(1, 1, 0),
        state(500, 2, 1, [2, 3], "preferred"),
        applied(503, 2, 1),
    )
    assert unavailable(windows) == [(500, 503, False, 2, "preferred")]


def test_a_refusal_after_the_leader_applied_its_state_does_not_make_it_unavailable() -> None:
    # A repeated LeaderAndIsr of an epoch the leader already applied, refused: it leads.
    st, windows = walk(
        ctx(tol=5),
        state(0, 1, 0, [1, 2, 3], "new"),
        applied(1, 1, 0),
        refused(20, 1, 0),
    )
    assert unavailable(windows) == []
    assert st.unavailable_windows == 0


def test_a_later_loss_of_the_new_leader_is_a_window_of_its_own() -> None:
    # The first window ends when leader 2 applied (509), by leader 2; leader 2 is lost in
    # turn at 2000, never handled: a second window, open.
    _, windows = walk(
        ctx(Death(1, 500, None, 7), Death(2, 2000, None, 8)),
        state(0, 1, 0, [1, 2, 3], "new"),
        applied(1, 1, 0),
        state(503, 2, 1, [2, 3], "offline"),
        applied(509, 2, 1),
    )
    assert unavailable(windows) == [
        (500, 509, False, 2, "offline"),
        (2000, 10_000, True, None, None),
    ]


def test_a_leader_back_at_the_next_decisions_stamp_is_not_back_before_it() -> None:
    # Back exactly when the next decision moves its leadership away: that decision, once
    # applied, ends the window, not the return.
    _, windows = walk(
        ctx(Death(1, 500, 600, 4), tol=5),
        state(0, 1, 0, [1, 2, 3], "new"),
        applied(1, 1, 0),
        state(600, 2, 1, [2, 3], "preferred"),
        applied(603, 2, 1),
    )
    assert unavailable(windows) == [(500, 603, False, 2, "preferred")]


def test_a_leader_applying_its_state_again_after_the_next_decision_is_not_back() -> None:
    _, windows = walk(
        ctx(Death(1, 500, 550, 4), tol=5),
        state(0, 1, 0, [1, 2, 3], "new"),
        applied(1, 1, 0),
        applied(700, 1, 0),
        state(650, 2, 1, [2, 3], "preferred"),
        applied(652, 2, 1),
    )
    assert unavailable(windows) == [(500, 652, False, 2, "preferred")]


def test_a_leader_back_unseen_applying_again_by_a_clock_behind_is_back_then() -> None:
    # Registered at 10050 by the controller's notice; its own applied line, by a clock
    # behind, at 10020 (within the tolerance before): back at 10020.
    _, windows = walk(
        ctx(Death(1, 10000, 10050, 5), end=70_000, tol=100),
        state(10, 1, 0, [1, 2], "new", replicas=[1, 2]),
        applied(12, 1, 0, replicas=[1, 2]),
        applied(10020, 1, 0, replicas=[1, 2]),
    )
    assert unavailable(windows) == [(10000, 10020, False, 1, "new")]


def test_lines_the_tolerance_away_from_a_deletion_go_with_the_sequence_they_continue() -> None:
    """As above, at the tolerance's edge: the old incarnation's ISR change stamped exactly
    50 ms after the deletion, the new one's exactly 50 ms before it."""
    st, windows = walk(
        ctx(deletions={"t": [900]}, tol=50),
        state(100, 2, 3, [2, 3], "preferred", replicas=[2, 3, 1], zkv=7),
        isr(950, 2, 3, [2, 3, 1], 8),
        state(899, -1, 4, [2, 3, 1], "deleted", replicas=[2, 3, 1], zkv=9),
        state(905, 3, 0, [3, 1], "new", replicas=[3, 1], zkv=0),
        applied(880, 3, 0),
        isr(850, 3, 0, [3], 1),
        isr(2000, 3, 0, [3, 1], 2),
    )
    assert (st.generations, st.states) == (2, 6)
    assert [(w["kind"], w["start_ts"], w["end_ts"]) for w in windows] == [
        (pp.UNDER_REPLICATED, 100, 950),
        (pp.UNDER_REPLICATED, 905, 2000),
    ]


def test_a_deleted_state_stamped_the_tolerance_after_the_deletion_is_the_old_ones() -> None:
    st, windows = walk(
        ctx(deletions={"t": [900]}, tol=50),
        state(0, 1, 0, [1], "new", replicas=[1, 2], zkv=0),
        state(950, -1, 1, [1], "deleted", replicas=[1, 2], zkv=1),
        state(1000, 3, 0, [3], "new", replicas=[3], zkv=0),
        applied(1001, 3, 0, replicas=[3]),
    )
    assert (st.generations, st.states) == (2, 3)
    # The old incarnation under-replicated until its deletion began (the deleted state).
    assert [(w["kind"], w["start_ts"], w["end_ts"], w["open"]) for w in windows] == [
        (pp.UNDER_REPLICATED, 0, 950, False),
    ]


def test_a_new_state_stamped_just_before_the_deletion_it_follows_begins_the_last_one() -> None:
    # The new controller's clock is behind: the topic's `new` state at 880, its deletion at
    # 900. The new incarnation is the last, open to the end of the logs.
    st, windows = walk(
        ctx(deletions={"t": [900]}, tol=50),
        state(0, 1, 0, [1, 2], "new", replicas=[1, 2], zkv=0),
        state(850, -1, 1, [1, 2], "deleted", replicas=[1, 2], zkv=1),
        state(880, 3, 0, [3], "new", replicas=[3, 1], zkv=0),
        applied(881, 3, 0, replicas=[3, 1]),
    )
    assert (st.generations, st.final_leader, st.replicas) == (2, 3, [3, 1])
    assert [(w["kind"], w["start_ts"], w["end_ts"], w["open"]) for w in windows] == [
        (pp.UNDER_REPLICATED, 880, 10_000, True),
    ]


def test_balance_counts_a_preferred_replica_as_leading_only_when_it_leads() -> None:
    b = pp.BalanceDeltas({"c": (0, 1000, 10)})
    b.run("c", 0, 2, 1, +1)
    b.run("c", 20_000, 1, 1, +1)  # past the last bucket: counted in it
    assert sorted(b.rows()) == [("c", 1, 0, 0, 1, 0), ("c", 1, 9, 1, 1, 1), ("c", 2, 0, 1, 0, 0)]


def test_a_refusal_after_a_return_is_no_reapplication() -> None:
    # Leader 1 back unseen at 10002 (its registration): its later refusal of its state is
    # not leading again, so the window ends at its registration, not at the refusal.
    _, windows = walk(
        ctx(Death(1, 10000, 10002, 5), end=70_000, tol=100),
        state(10, 1, 0, [1, 2], "new", replicas=[1, 2]),
        applied(12, 1, 0, replicas=[1, 2]),
        refused(10008, 1, 0, replicas=[1, 2]),
    )
    assert unavailable(windows) == [(10000, 10002, False, 1, "new")]


def test_a_loss_stamped_just_after_the_decision_handling_it_starts_there() -> None:
    # The lost leader's loss is logged by a clock ahead, 3 ms after the offline decision.
    _, windows = walk(
        ctx(Death(1, 503, None, 7)),
        state(0, 1, 0, [1, 2, 3], "new"),
        applied(1, 1, 0),
        state(500, 2, 1, [2, 3], "offline"),
        applied(509, 2, 1),
    )
    assert unavailable(windows) == [(500, 509, False, 2, "offline")]


def test_a_leader_back_reapplying_by_a_clock_behind_its_loss_is_a_0_ms_window() -> None:
    # Applied again at 9990 by its own clock, before the controller's notice of its loss
    # at 10000 (within the tolerance of its return): a 0 ms window, not none.
    st, windows = walk(
        ctx(Death(1, 10000, 10002, 5), end=70_000, tol=100),
        state(10, 1, 0, [1, 2], "new", replicas=[1, 2]),
        applied(12, 1, 0, replicas=[1, 2]),
        applied(9990, 1, 0, replicas=[1, 2]),
    )
    assert unavailable(windows) == [(10000, 10000, False, 1, "new")]
    assert (st.unavailable_windows, st.unavailable_ms) == (1, 0)


def test_a_state_found_written_takes_the_earliest_stamp_of_every_line_after_it() -> None:
    _, windows = walk(
        ctx(),
        state(0, 3, 0, [1, 2, 3], "new", zkv=0),
        applied(1, 3, 0),
        state(2500, 3, 1, [3, 1], "preferred", zkv=1, found=True),
        isr(2100, 3, 1, [3, 1], 2),
        state(2005, 2, 2, [2, 1, 3], "preferred", zkv=3),
        applied(2010, 2, 2),
    )
    assert [(w["kind"], w["start_ts"], w["end_ts"]) for w in windows] == [
        (pp.UNDER_REPLICATED, 2005, 2100)
    ]


def test_a_window_merged_over_several_states_keeps_its_first_lost_leader() -> None:
    # Leader 2 lost (incident 1); 3, elected, is lost before it applied (incident 2):
    # one window, lost by 2, of incident 1.
    _, windows = walk(
        ctx(Death(2, 1000, None, 1), Death(3, 7000, None, 2), end=9000, tol=100),
        state(10, 2, 0, [2, 3, 1], "new", replicas=[2, 3, 1]),
        applied(12, 2, 0, replicas=[2, 3, 1]),
        state(1001, 3, 1, [3, 1], "offline", replicas=[2, 3, 1]),
        state(7001, 1, 2, [1], "offline", replicas=[2, 3, 1]),
        applied(7002, 1, 2, replicas=[2, 3, 1]),
    )
    [w] = [w for w in windows if w["kind"] == pp.UNAVAILABLE]
    assert (w["start_ts"], w["end_ts"], w["incident_id"], w["lost_leader"]) == (1000, 7002, 1, 2)


def test_a_window_still_running_when_the_logs_end_is_open() -> None:
    st, windows = walk(
        ctx(Death(1, 500, None, 3)),
        state(0, 1, 0, [1, 2, 3], "new"),
        applied(1, 1, 0),
        state(520, -1, 1, [2, 3], "offline"),
    )
    assert unavailable(windows) == [(500, 10_000, True, None, None)]
    assert st.open_unavailable


def test_a_leader_that_refused_then_applied_its_state_leads_from_the_application() -> None:
    _, windows = walk(
        ctx(Death(2, 1000, None, 1), end=5000, tol=100),
        state(10, 2, 0, [2, 3, 1], "new", replicas=[2, 3, 1]),
        applied(12, 2, 0, replicas=[2, 3, 1]),
        state(1001, 3, 1, [3, 1], "offline", replicas=[2, 3, 1]),
        refused(1002, 3, 1, replicas=[2, 3, 1]),
        applied(1010, 3, 1, replicas=[2, 3, 1]),
    )
    assert unavailable(windows) == [(1000, 1010, False, 3, "offline")]


def test_a_refusal_without_a_decision_is_no_orphan_application() -> None:
    st, _ = walk(ctx(), state(0, 1, 0, [1, 2, 3], "new"), applied(1, 1, 0), refused(5, 2, 3))
    assert st.orphan_applied == 0
    st, _ = walk(ctx(), state(0, 1, 0, [1, 2, 3], "new"), applied(1, 1, 0), applied(5, 2, 3))
    assert st.orphan_applied == 1


def test_an_isr_change_keeps_the_replicas_of_the_decision_before_it() -> None:
    # Replica 3 never in the ISR: the decision's replica set still counts it.
    _, windows = walk(
        ctx(),
        state(0, 1, 0, [1, 2], "new"),
        applied(1, 1, 0),
        isr(100, 1, 0, [1, 2], 1),
    )
    assert [(w["kind"], w["start_ts"], w["end_ts"], w["open"]) for w in windows] == [
        (pp.UNDER_REPLICATED, 0, 10_000, True)
    ]


def test_a_deleted_topics_leadership_counts_until_its_deletion() -> None:
    c = ctx(deletions={"t": [2500]})
    balance = pp.BalanceDeltas(c.buckets)
    pp.walk_partition(
        "c",
        "t",
        0,
        rows(
            state(0, 1, 0, [1], "new", replicas=[1]),
            state(900, -1, 1, [1], "deleted", replicas=[1]),
        ),
        c,
        balance,
    )
    leaderless = sorted((k, dl) for _c, broker, k, dl, _dp, _dpl in balance.rows() if broker == -1)
    assert leaderless == [(0, 1), (2, -1)]


def test_a_deleted_state_stamped_after_its_deletion_ends_its_incarnation_there() -> None:
    # The deleted state, by a clock ahead, is stamped 40 ms after the deletion (within the
    # tolerance): the incarnation ends at that state, not before it began.
    c = ctx(deletions={"t": [990]}, tol=50)
    balance = pp.BalanceDeltas(c.buckets)
    pp.walk_partition(
        "c",
        "t",
        0,
        rows(
            state(0, 1, 0, [1], "new", replicas=[1]),
            state(1030, -1, 1, [1], "deleted", replicas=[1]),
        ),
        c,
        balance,
    )
    assert sorted((b, k, dl) for _c, b, k, dl, _dp, _dpl in balance.rows()) == [
        (1, 0, 1),
        (1, 1, -1),
    ]
