"""A partition's directory, ``<log dir>/<topic>-<partition>``, kept as its parts.

A broker hosts 100,000s of partitions. Each log's directory as one string took ~100
bytes a log (an ASCII str is 49 bytes and one a character: 78 for
``/var/lib/kafka/data/orders-12``). Its parts are shared: the log directory (one string
for every log in it), the topic (one string a topic) and the partition index (one int
for every equal index). So a log, its segments and its epoch cache keep those, and make
the path when they open or write a file.

Only a canonical name (``log_dir_name`` makes it again from its parts) is split: a
directory named otherwise (a test's scratch directory) is kept whole.
"""

from __future__ import annotations

import os
import sys
from typing import NamedTuple

from zkdata.znodes import shared_index

__all__ = ["PartitionDir", "join_partition_dir", "log_dir_name", "parse_log_dir_name"]


def log_dir_name(topic: str, partition: int) -> str:
    """Kafka's partition directory name: ``<topic>-<partition>``."""
    return f"{topic}-{partition}"


def parse_log_dir_name(name: str) -> tuple[str, int] | None:
    """``(topic, partition)`` of a partition directory name, or None if it is not one.

    Only the name Kafka makes is one: the partition in ASCII digits without leading
    zeros. ``t-007``, or the digits of another script, would be a second name for a
    partition (and a superscript digit passes ``str.isdigit`` but not ``int``)."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isascii() or not partition.isdigit():
        return None
    if len(partition) > 1 and partition[0] == "0":
        return None
    return topic, shared_index(int(partition))


class PartitionDir(NamedTuple):
    """A directory as ``(parent, topic, partition)``: ``topic`` None when its name is not
    a partition's, and ``parent`` is then the whole directory."""

    parent: str
    topic: str | None
    partition: int

    @classmethod
    def of(cls, directory: str | os.PathLike[str] | PartitionDir) -> PartitionDir:
        """``directory`` as its parts (itself if it is a PartitionDir already)."""
        if isinstance(directory, PartitionDir):
            return directory
        path = os.fspath(directory)
        parent, name = os.path.split(path)
        parsed = parse_log_dir_name(name)
        if parsed is None:
            return cls(path, None, -1)
        return cls.made(parent, *parsed)

    @classmethod
    def made(cls, parent: str, topic: str, partition: int) -> PartitionDir:
        """The directory of ``topic``-``partition`` in the log directory ``parent``."""
        # Interned: every log in a log directory, and every segment of those, shares one.
        return cls(sys.intern(parent), sys.intern(topic), partition)


def join_partition_dir(parent: str, topic: str | None, partition: int) -> str:
    """The directory ``PartitionDir.of`` took apart (its parent and name again)."""
    if topic is None:
        return parent
    return os.path.join(parent, f"{topic}-{partition}")
