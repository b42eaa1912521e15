"""A StopReplica answer's ``partition_errors``, held as its partitions and the few
non-zero codes rather than a dict a partition.

The wire codec encodes any sequence of mappings, so each answer's dict
(``topic_name``, ``partition_index``, ``error_code``) is made only as it is read: a
100,000-partition deletion's answers, held whole while the broker renamed its logs and
until the answer was encoded, were 17.5 MiB of the broker's peak (tracemalloc)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, overload

from zkdata.znodes import TopicPartition

__all__ = ["PartitionErrors"]


class PartitionErrors(Sequence[dict[str, Any]]):
    """The answers in the order they were added; each read makes a new dict, so a change
    goes through ``set_error``, not through a dict read."""

    __slots__ = ("_codes", "_partitions")

    def __init__(self) -> None:
        self._partitions: list[TopicPartition] = []
        # By position, not by partition: a request naming a partition twice has two answers.
        self._codes: dict[int, int] = {}

    def add(self, tp: TopicPartition, error_code: int = 0) -> None:
        if error_code:
            self._codes[len(self._partitions)] = error_code
        self._partitions.append(tp)

    def set_error(self, failed: dict[TopicPartition, Any], error_code: int) -> list[int]:
        """Each answer still 0 whose partition is in ``failed`` takes ``error_code``;
        the positions changed."""
        changed = []
        codes = self._codes
        for position, tp in enumerate(self._partitions):
            if tp in failed and position not in codes:
                codes[position] = error_code
                changed.append(position)
        return changed

    def partition(self, position: int) -> TopicPartition:
        return self._partitions[position]

    def _answer(self, position: int) -> dict[str, Any]:
        tp = self._partitions[position]
        return {
            "topic_name": tp.topic,
            "partition_index": tp.partition,
            "error_code": self._codes.get(position, 0),
        }

    def __len__(self) -> int:
        return len(self._partitions)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return [self._answer(i) for i in range(*index.indices(len(self._partitions)))]
        if index < 0:
            index += len(self._partitions)
        if not 0 <= index < len(self._partitions):
            raise IndexError("partition answer index out of range")
        return self._answer(index)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return map(self._answer, range(len(self._partitions)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PartitionErrors | list | tuple):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to lists, as mutable as one

    def __repr__(self) -> str:
        return f"PartitionErrors({list(self)!r})"
