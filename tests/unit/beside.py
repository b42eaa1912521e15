"""Threads that run beside a test's own work until it is done. What one of them raises
fails the test instead of being lost with the thread."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def running_beside(*steps: Callable[[], None]) -> Iterator[None]:
    """Call each of ``steps`` over and over, each in its own thread, while the block runs;
    then stop them, join them (30 s at most each) and raise the first error one raised."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def repeat(step: Callable[[], None]) -> None:
        try:
            while not stop.is_set():
                step()
        except BaseException as exc:  # raised by the test, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=repeat, args=(step,), daemon=True) for step in steps]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    if errors:
        raise errors[0]
