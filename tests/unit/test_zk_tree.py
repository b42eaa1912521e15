"""Subtrees of znodes read a level at a time (zkdata/tree.py): what is deleted with a
znode, as Kafka's deleteRecursive, without recursion."""

from __future__ import annotations

from collections.abc import Iterable

from hypothesis import given
from hypothesis import strategies as st

from tests.unit.fake_zk import FakeZk
from zkdata.tree import subtrees_leaves_first


@given(st.lists(st.lists(st.sampled_from("ab"), min_size=1, max_size=5), max_size=20))
def test_every_znode_comes_after_all_of_its_children_the_roots_last(
    suffixes: list[list[str]],
) -> None:
    zk = FakeZk()
    roots = ["/r", "/s"]
    for root in roots:
        zk.put(root, b"")
    for n, suffix in enumerate(suffixes):
        path = roots[n % 2]
        for name in suffix:
            path += "/" + name
            zk.put(path, b"")
    walked = subtrees_leaves_first(zk, roots)
    assert sorted(walked) == sorted(zk.nodes)
    assert walked[-2:] == roots
    for i, path in enumerate(walked):
        assert not [p for p in walked[i:] if p.startswith(path + "/")], path


def test_a_chain_deeper_than_the_recursion_limit_is_walked() -> None:
    zk = FakeZk()
    path = "/r"
    zk.put(path, b"")
    for _ in range(3000):
        path += "/a"
        zk.put(path, b"")
    walked = subtrees_leaves_first(zk, ["/r"])
    assert walked[0] == path
    assert walked[-1] == "/r"
    assert len(walked) == 3001


def test_one_read_a_level_and_a_znode_gone_is_listed_without_children() -> None:
    zk = FakeZk()
    for path in ("/r", "/r/p", "/r/p/0", "/r/p/0/state", "/r/p/1", "/r/p/1/state"):
        zk.put(path, b"")
    reads: list[list[str]] = []
    read = zk.get_children_many

    def counted(
        path_list: Iterable[str], *, watch: bool = False, batch: int = 0
    ) -> list[list[str] | None]:
        reads.append(list(path_list))
        return read(path_list, watch=watch, batch=batch)

    zk.get_children_many = counted  # type: ignore[method-assign]
    walked = subtrees_leaves_first(zk, ["/r", "/gone"])
    assert walked == [
        "/r/p/0/state",
        "/r/p/1/state",
        "/r/p/0",
        "/r/p/1",
        "/r/p",
        "/r",
        "/gone",
    ]
    assert [len(r) for r in reads] == [2, 1, 2, 2]
