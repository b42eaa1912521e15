"""Small, exact arithmetic on results (pure; no Spark): percentiles, incidents completed
with their partitions' recovery, and leader balance over time."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PERCENTILES = (50, 90, 99)


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile: the smallest value with at least p% of values at or below it.

    Every result is one of the values (no interpolation), so a p99 is a latency someone saw.
    """
    if not sorted_values:
        raise ValueError("no values")
    if not 0 < p <= 100:
        raise ValueError(f"percentile {p} is not in (0, 100]")
    rank = math.ceil(p / 100 * len(sorted_values))
    return sorted_values[max(rank, 1) - 1]


def summarize(values: Iterable[float | None]) -> dict[str, float | int | None]:
    """count, p50, p90, p99, max and mean of the values that are not None."""
    vs = sorted(v for v in values if v is not None)
    out: dict[str, float | int | None] = {"count": len(vs)}
    for p in PERCENTILES:
        out[f"p{p}"] = percentile(vs, p) if vs else None
    out["max"] = vs[-1] if vs else None
    out["mean"] = round(sum(vs) / len(vs), 1) if vs else None
    return out


def histogram(values: Sequence[float], bins: int = 20) -> list[tuple[float, float, int]]:
    """(low, high, count) bins of equal width over the values' range; [] for no values."""
    if not values:
        return []
    lo, hi = min(values), max(values)
    if hi == lo:
        return [(lo, hi, len(values))]
    width = (hi - lo) / bins
    counts = [0] * bins
    for v in values:
        counts[min(int((v - lo) / width), bins - 1)] += 1
    return [(lo + i * width, lo + (i + 1) * width, c) for i, c in enumerate(counts)]


@dataclass(frozen=True)
class IncidentWindows:
    """What an incident's partitions went through (aggregated from unavailability windows)."""

    affected: int
    last_end_ts: int
    any_open: bool
    unavailable_ms: int


INCIDENT_FIELDS = (
    "cluster",
    "incident_id",
    "kind",
    "broker",
    "cause",
    "controller_epoch",
    "lost_ts",
    "back_ts",
    "new_controller",
    "new_epoch",
    "new_controller_ts",
    "failover_done_ts",
    "affected_partitions",
    "all_leaders_ts",
    "unrecovered",
    "time_to_controller_ms",
    "time_to_failover_done_ms",
    "time_to_leaders_ms",
    "partition_unavailable_ms",
)


def complete_incident(
    incident: Mapping[str, Any], windows: IncidentWindows | None
) -> dict[str, Any]:
    """An incident with its latencies: to the new controller (controller incidents), to its
    failover being done, and to every affected partition having a live leader again
    (None when no partition lost its leader, or when some never got one back)."""
    out = dict(incident)
    lost = incident["lost_ts"]
    new_ts = incident.get("new_controller_ts")
    done_ts = incident.get("failover_done_ts")
    out["time_to_controller_ms"] = None if new_ts is None else max(0, new_ts - lost)
    out["time_to_failover_done_ms"] = None if done_ts is None else max(0, done_ts - lost)
    if windows is None or windows.affected == 0:
        out.update(
            affected_partitions=0,
            all_leaders_ts=None,
            unrecovered=False,
            time_to_leaders_ms=None,
            partition_unavailable_ms=0,
        )
    else:
        out.update(
            affected_partitions=windows.affected,
            all_leaders_ts=None if windows.any_open else windows.last_end_ts,
            unrecovered=windows.any_open,
            time_to_leaders_ms=None if windows.any_open else max(0, windows.last_end_ts - lost),
            partition_unavailable_ms=windows.unavailable_ms,
        )
    return {k: out.get(k) for k in INCIDENT_FIELDS}


BALANCE_FIELDS = (
    "cluster",
    "bucket",
    "ts",
    "broker",
    "leaders",
    "preferred",
    "preferred_led",
    "imbalance_pct",
    "leaders_minus_preferred",
)


def leader_balance(
    sums: Iterable[tuple[str, int, int, int, int, int]],
    buckets: Mapping[str, tuple[int, int, int]],
) -> list[tuple[Any, ...]]:
    """Per cluster, bucket and broker: leaders, partitions preferring the broker, those of
    them it leads, and Kafka's imbalance ratio (preferred partitions led by another broker,
    in percent) at each bucket's end. Broker -1 counts partitions without a leader."""
    per: dict[tuple[str, int], dict[int, list[int]]] = defaultdict(dict)
    for cluster, broker, k, dl, dp, dpl in sums:
        acc = per[(cluster, broker)].setdefault(k, [0, 0, 0])
        acc[0] += dl
        acc[1] += dp
        acc[2] += dpl
    out: list[tuple[Any, ...]] = []
    for (cluster, broker), by_bucket in sorted(per.items()):
        t0, width, n = buckets[cluster]
        leaders = preferred = led = 0
        for k in range(n):
            d = by_bucket.get(k)
            if d is not None:
                leaders += d[0]
                preferred += d[1]
                led += d[2]
            if broker < 0:
                out.append((cluster, k, t0 + (k + 1) * width, broker, leaders, 0, 0, None, None))
                continue
            imbalance = round(100 * (preferred - led) / preferred, 2) if preferred else None
            out.append(
                (
                    cluster,
                    k,
                    t0 + (k + 1) * width,
                    broker,
                    leaders,
                    preferred,
                    led,
                    imbalance,
                    leaders - preferred,
                )
            )
    return out


def bucket_plan(first_ts: int, last_ts: int, buckets: int) -> tuple[int, int, int]:
    """(start, width ms, count): at most `buckets` buckets of a whole number of seconds."""
    span = max(last_ts - first_ts, 0) + 1  # the last millisecond is in a bucket too
    width = max(1000, math.ceil(span / buckets / 1000) * 1000)
    return first_ts, width, max(1, math.ceil(span / width))
