"""Whole subtrees of znodes, read a level at a time: what Kafka 2.8's deleteRecursive
deletes. No recursion (a chain of children someone put under a znode can be deeper than
Python's recursion limit, as deep as ZooKeeper's 1 MB packet lets a path be), and one
pipelined round of reads a level, not a round trip a znode."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from zkdata import paths


class ChildrenReader(Protocol):
    def get_children_many(
        self, path_list: Sequence[str], *, watch: bool = ..., batch: int = ...
    ) -> list[list[str] | None]: ...


def next_level(level: Sequence[str], children: Sequence[list[str] | None]) -> list[str]:
    """The paths of the children read for ``level`` (None: that znode is gone)."""
    return [
        paths.child(parent, name)
        for parent, names in zip(level, children, strict=True)
        for name in names or ()
    ]


def leaves_first(levels: Sequence[Sequence[str]]) -> list[str]:
    """Every path of ``levels`` (each level the children of the one before), each after
    all of its descendants: the deepest level first."""
    return [path for level in reversed(levels) for path in level]


def subtrees_leaves_first(zk: ChildrenReader, roots: Sequence[str]) -> list[str]:
    """``roots`` and every znode under them, each after its children, the roots last (in
    their order). A znode gone meanwhile is listed all the same (a delete of it finds it
    gone) and has no children; one created meanwhile may be missed: a delete of its
    parent fails NotEmpty, for the caller to read again."""
    levels: list[list[str]] = []
    level = list(roots)
    while level:
        levels.append(level)
        level = next_level(level, zk.get_children_many(level))
    return leaves_first(levels)
