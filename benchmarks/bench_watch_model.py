"""The watch view's model (watch/model.py): what one update from ZooKeeper costs it.

`zkctl watch` applies every observation on the thread that draws the screen, so the time
`model.reduce` takes is a time the full-screen view is frozen. Above 1,000 partitions the
source re-reads every partition state on each trigger and hands the model all of them
(watch/zk_source.py), freshly decoded: the model must find what changed. Cases, each on
a model that has seen the whole cluster (RF 3, leaders spread over the brokers):

* `one_state_changed`: every state read again, one partition's leader moved;
* `one_broker_lost`: the registrations read again, one of 3 brokers gone (it led a third
  of the partitions and was in every ISR: every partition changes);
* `one_of_60_lost`: one of 60 brokers gone (it led 1/60 of the partitions, and was in
  the ISR of 3/60);
* `brokers_lost_50`: 50 of 60 brokers gone at once (nearly every partition changes);
* `full_reread`: the topics and every state read again (new objects), nothing changed.

Floor, in the same run: one Python pass over the same observation's states looking each
up in the previous read (the least a model given the whole cluster must do to find what
changed). Best of --repeat runs, in milliseconds.

    .venv/bin/python benchmarks/bench_watch_model.py [--sizes 10000,100000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import at_least, best_of, emit, sizes

from watch import model
from watch.model import BrokerInfo, BrokersSeen, PartitionsSeen, WatchState
from zkdata.znodes import LeaderAndIsr, TopicPartition

PER_TOPIC = 100
T0 = 1_800_000_000.0


def cluster(n: int, brokers: int) -> dict[str, dict[int, tuple[int, ...]]]:
    """RF 3 over `brokers` brokers (ids 1..), the leaders spread evenly."""
    out: dict[str, dict[int, tuple[int, ...]]] = {}
    for i in range(n):
        topic, p = f"topic-{i // PER_TOPIC:05d}", i % PER_TOPIC
        out.setdefault(topic, {})[p] = tuple(1 + (i + k) % brokers for k in range(3))
    return out


def read(
    topics: Mapping[str, Mapping[int, tuple[int, ...]]],
    moved: TopicPartition | None = None,
    *,
    ts: float,
    fresh_topics: bool = False,
) -> PartitionsSeen:
    """What the source hands on after a re-read: every state decoded anew (new objects),
    the topics as last read (the same ones unless `fresh_topics`)."""
    states: dict[TopicPartition, LeaderAndIsr] = {}
    for t, a in topics.items():
        for p, r in a.items():
            tp = TopicPartition(t, p)
            if tp == moved:
                states[tp] = LeaderAndIsr(r[1], 1, (r[1], r[2]))
            else:
                states[tp] = LeaderAndIsr(r[0], 0, tuple(r))
    if fresh_topics:
        topics = {t: dict(a) for t, a in topics.items()}
    return PartitionsSeen(ts, dict(topics), states)


def registered(ids: range | list[int], ts: float) -> BrokersSeen:
    return BrokersSeen(ts, {b: BrokerInfo(b, f"b{b}:9092", 100 + b) for b in ids})


def seen(topics: Mapping[str, Mapping[int, tuple[int, ...]]], brokers: int) -> WatchState:
    state = model.initial_state(T0)
    state, _ = model.reduce(state, registered(range(1, brokers + 1), T0))
    state, _ = model.reduce(state, read(topics, ts=T0))
    return state


def floor(state: WatchState, obs: PartitionsSeen) -> Callable[[], int]:
    previous = {tp: (pv.leader, pv.isr) for tp, pv in state.partitions.items()}

    def run() -> int:
        changed = 0
        for tp, lai in obs.states.items():
            if previous.get(tp) != (lai.leader, lai.isr):
                changed += 1
        return changed

    return run


def measure(n: int, repeat: int) -> dict[str, float]:
    ms: dict[str, float] = {}
    topics = cluster(n, 3)
    state = seen(topics, 3)
    moved = TopicPartition("topic-00000", 7)
    obs = read(topics, moved, ts=T0 + 1)
    best, (after, events) = best_of(repeat, lambda: model.reduce(state, obs), pause_gc=True)
    assert after.partitions[moved].leader != state.partitions[moved].leader, events
    ms["one_state_changed"] = best
    ms["floor"], _ = best_of(repeat, floor(state, obs), pause_gc=True)

    lost = registered(range(1, 3), T0 + 1)
    best, (after, _) = best_of(repeat, lambda: model.reduce(state, lost), pause_gc=True)
    assert after.summary.offline_count == n // 3
    ms["one_broker_lost"] = best

    again = read(topics, ts=T0 + 1, fresh_topics=True)
    best, (after, events) = best_of(repeat, lambda: model.reduce(state, again), pause_gc=True)
    assert events == [], events
    ms["full_reread"] = best

    many = cluster(n, 60)
    state = seen(many, 60)
    lost = registered(range(1, 60), T0 + 1)
    best, (after, _) = best_of(repeat, lambda: model.reduce(state, lost), pause_gc=True)
    assert after.summary.offline_count == n // 60
    ms["one_of_60_lost"] = best
    lost = registered(range(1, 11), T0 + 1)
    best, (after, _) = best_of(repeat, lambda: model.reduce(state, lost), pause_gc=True)
    assert after.summary.offline_count > 0
    ms["brokers_lost_50"] = best
    return ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", type=sizes, default="10000,100000", help="partitions, comma-separated"
    )
    parser.add_argument("--repeat", type=at_least(1), default=5, help="runs of each case")
    args = parser.parse_args()
    result: dict[str, object] = {"benchmark": "watch_model", "repeat": args.repeat}
    for n in args.sizes:
        for case, seconds in measure(n, args.repeat).items():
            result[f"{case}_ms_{n // 1000}k"] = round(seconds * 1e3, 2)
    result["python"] = sys.version.split()[0]
    emit(result)


if __name__ == "__main__":
    main()
