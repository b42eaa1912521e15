"""kazoo's threading handler with a select that costs one system call, and answers out of
order taken for a lost connection.

kazoo's connection thread waits on its socket before every request it sends and every
read of an answer (a header, then a body): three or more waits per request. Its threading
handler makes each wait with a new selector (epoll_create, epoll_ctl, epoll_wait,
close): in a py-spy profile of a controller deleting 100,000 partitions' znodes
(200,000 small multis), building and closing those selectors took half the connection
thread's samples (1,150 of 2,169), holding the GIL the controller's event thread needed.
``poll`` needs no kernel object: registering is a dict entry, waiting one system call,
and, unlike ``select``, it takes any descriptor number (kazoo left ``select`` for that).

An answer whose xid is not the one awaited (ZooKeeper answering out of order, as a server
resumed after a pause has: kazoo's issue 254) fails the request awaited with a bare
RuntimeError, then ends kazoo's connection thread for good. The request's fate is a lost
answer's (carried out or not), so it fails with ConnectionLoss here, as every request
in flight at a dropped connection does; the client starts its connection again
(`ZkClient`).
"""

from __future__ import annotations

import math
import select
from collections.abc import Sequence
from typing import Any

from kazoo.exceptions import ConnectionLoss
from kazoo.handlers.threading import AsyncResult, SequentialThreadingHandler

_READ = select.POLLIN | select.POLLPRI
_WRITE = select.POLLOUT
# A hung-up or failed descriptor is ready for both: the read or write that follows
# reports what happened (an empty read, or the socket's error), as selectors does.
_FAILED = select.POLLERR | select.POLLHUP


def _fd(fileobj: Any) -> int:
    fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
    if not isinstance(fd, int) or fd < 0:
        raise ValueError(f"Invalid file descriptor: {fd!r}")
    return int(fd)


def poll_select(
    rlist: Sequence[Any], wlist: Sequence[Any], xlist: Sequence[Any], timeout: float | None = None
) -> tuple[list[Any], list[Any], list[Any]]:
    """``select.select``'s contract (the objects of each list that are ready, ``xlist``
    never reported, as kazoo's own selector_select), waiting with one ``poll``. Raises
    ValueError for a closed or invalid descriptor, as kazoo's does, and TypeError or
    ValueError for a timeout that is not a non-negative number."""
    if timeout is not None:
        if not isinstance(timeout, (int, float)):
            raise TypeError("timeout must be a number")
        if timeout < 0:
            raise ValueError("timeout must be non-negative")
    wanted: dict[int, int] = {}
    for fileobj in rlist:
        fd = _fd(fileobj)
        wanted[fd] = wanted.get(fd, 0) | _READ
    for fileobj in wlist:
        fd = _fd(fileobj)
        wanted[fd] = wanted.get(fd, 0) | _WRITE
    poller = select.poll()
    for fd, mask in wanted.items():
        poller.register(fd, mask)
    # Rounded up, as selectors' PollSelector does: rounded down, a wait shorter than a
    # millisecond would return at once and spin.
    ready = dict(poller.poll(None if timeout is None else math.ceil(timeout * 1000)))
    if any(events & select.POLLNVAL for events in ready.values()):
        raise ValueError("Invalid event mask or fd")  # closed: kazoo's selector says so
    readable = [f for f in rlist if ready.get(_fd(f), 0) & (_READ | _FAILED)]
    writable = [f for f in wlist if ready.get(_fd(f), 0) & (_WRITE | _FAILED)]
    return readable, writable, []


def is_answer_out_of_order(exception: BaseException) -> bool:
    """kazoo's error for an answer whose xid is not the one awaited."""
    return (
        type(exception) is RuntimeError
        and bool(exception.args)
        and str(exception.args[0]).startswith("xids do not match")
    )


class _AsyncResult(AsyncResult):  # type: ignore[misc]  # kazoo: untyped
    def set_exception(self, exception: BaseException) -> None:
        if is_answer_out_of_order(exception):
            expected, received = [*exception.args[1:], None, None][:2]
            exception = ConnectionLoss(
                f"ZooKeeper answered out of order (xid {received}, {expected} awaited): "
                "the connection is made again"
            )
        super().set_exception(exception)


class PollingHandler(SequentialThreadingHandler):  # type: ignore[misc]  # kazoo: untyped
    """kazoo's SequentialThreadingHandler, its waits made by `poll_select`, its results
    failing an answer out of order as ConnectionLoss."""

    def select(self, *args: Any, **kwargs: Any) -> tuple[list[Any], list[Any], list[Any]]:
        return poll_select(*args, **kwargs)

    def async_result(self) -> AsyncResult:
        return _AsyncResult(self)
