"""The multi request the controller's writes go out in: the same bytes kazoo's transaction
would send, and its response read into the same results. No server: the request is taken
where kazoo would queue it, and the response is bytes as ZooKeeper writes them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kazoo.exceptions import BadVersionError, NoNodeError, RolledBackError, ZookeeperError
from kazoo.protocol.serialization import (
    Transaction,
    multiheader_struct,
    stat_struct,
    write_string,
)
from kazoo.protocol.states import ZnodeStat

from zkdata.client import (
    READ_BATCH,
    Check,
    Create,
    Delete,
    SetData,
    WriteOp,
    ZkClient,
    _Multi,
    _MultiRead,
)

OPS: list[WriteOp] = [
    Check("/controller_epoch", 7),
    SetData("/brokers/topics/t/partitions/0/state", b'{"leader":1}', 3),
    SetData("/brokers/topics/t/partitions/1/state", b"", -1),
    Delete("/admin/preferred_replica_election", 0),
    Create("/brokers/topics/t/partitions/2/state", b"x"),
    Create("/controller", b'{"brokerid":1}', ephemeral=True),
    Create("/isr_change_notification/isr_change_", b"{}", sequential=True),
]


def kazoo_bytes(client: ZkClient, ops: list[WriteOp]) -> bytes:
    tx = client.kazoo.transaction()
    for op in ops:
        if isinstance(op, Check):
            tx.check(op.path, op.version)
        elif isinstance(op, SetData):
            tx.set_data(op.path, op.data, op.version)
        elif isinstance(op, Delete):
            tx.delete(op.path, op.version)
        else:
            tx.create(op.path, op.data, ephemeral=op.ephemeral, sequence=op.sequential)
    return bytes(Transaction(tx.operations).serialize())


def our_bytes(client: ZkClient, ops: list[WriteOp]) -> bytes:
    sent: list[Any] = []
    client.kazoo._call = lambda request, _result: sent.append(request)
    client._multi_async(ops)
    [request] = sent
    assert request.type == Transaction.type  # so kazoo un-chroots created paths
    return bytes(request.serialize())


@pytest.mark.parametrize("connect", ["127.0.0.1:1", "127.0.0.1:1/cluster/a"])
def test_a_multi_is_the_bytes_kazoo_would_send(connect: str) -> None:
    client = ZkClient(connect)
    assert our_bytes(client, OPS) == kazoo_bytes(client, OPS)
    for op in OPS:
        assert our_bytes(client, [op]) == kazoo_bytes(client, [op])


def response(*results: tuple[int, bytes]) -> bytes:
    out = bytearray()
    for op, body in results:
        out += multiheader_struct.pack(op, False, -1 if op == -1 else 0)
        out += body
    out += multiheader_struct.pack(-1, True, -1)
    return bytes(out)


def error(code: int) -> tuple[int, bytes]:
    return (-1, code.to_bytes(4, "big", signed=True))


def test_a_response_reads_as_kazoo_reads_it() -> None:
    stat = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
    path = b"/cluster/a/isr_change_notification/isr_change_0000000001"
    ok = response(
        (13, b""),
        (5, stat_struct.pack(*stat)),
        (2, b""),
        (1, len(path).to_bytes(4, "big") + path),
    )
    for results in (_Multi.deserialize(ok, 0), Transaction.deserialize(ok, 0)):
        assert results == [True, ZnodeStat(*stat), True, path.decode()]
    # a failed multi: one error per op, the one that failed with its own code
    failed = response(error(0), error(-103), error(-2))
    ours = _Multi.deserialize(failed, 0)
    theirs = Transaction.deserialize(failed, 0)
    assert [type(r) for r in ours] == [type(r) for r in theirs]
    assert isinstance(ours[0], RolledBackError)
    assert isinstance(ours[1], BadVersionError)
    assert not isinstance(ours[2], (BadVersionError, NoNodeError))


def test_an_unexpected_op_in_a_response_is_an_error() -> None:
    with pytest.raises(ZookeeperError, match="unexpected op 4"):
        _Multi.deserialize(response((4, b"")), 0)


def multi_read_bytes(op: int, paths: list[str]) -> bytes:
    """A multiRead as ZooKeeper's jute defines it, one field at a time (kazoo's writers)."""
    out = bytearray()
    for path in paths:
        out += multiheader_struct.pack(op, False, -1)
        out += write_string(path)
        out.append(0)  # watch: false
    out += multiheader_struct.pack(-1, True, -1)
    return bytes(out)


@given(
    op=st.sampled_from([4, 8]),  # getData, getChildren
    paths=st.lists(st.text(min_size=1, max_size=40).map(lambda t: "/" + t), max_size=30),
)
def test_a_multi_read_is_its_reads_field_by_field(op: int, paths: list[str]) -> None:
    # Non-ASCII paths too: a path's length is that of its UTF-8 bytes.
    assert bytes(_MultiRead(op, paths).serialize()) == multi_read_bytes(op, paths)


@pytest.mark.parametrize("connect", ["127.0.0.1:1", "127.0.0.1:1/cluster/a"])
def test_multi_reads_carry_the_chrooted_paths_in_batches(connect: str) -> None:
    client = ZkClient(connect)
    sent: list[Any] = []
    client.kazoo._call = lambda request, _result: sent.append(request)
    chroot = client.kazoo.chroot
    paths = [f"/brokers/topics/t\u00e9/partitions/{p}/state" for p in range(READ_BATCH + 3)]
    client.get_many_sent(paths)
    assert [len(r.paths) for r in sent] == [READ_BATCH, 3]
    expected = [chroot + p for p in paths]
    assert bytes(sent[0].serialize()) == multi_read_bytes(4, expected[:READ_BATCH])
    assert bytes(sent[1].serialize()) == multi_read_bytes(4, expected[READ_BATCH:])
    # The root is the chroot itself, not the chroot and a slash.
    sent.clear()
    client.get_many_sent(["/", "/brokers"])
    assert list(sent[0].paths) == [chroot or "/", chroot + "/brokers"]
