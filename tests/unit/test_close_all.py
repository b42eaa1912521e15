"""The integration tests' teardown closes every cluster a test made, whatever closing one
raises (tests/integration/conftest.py's cluster_factory)."""

from __future__ import annotations

import pytest

from tests.integration.harness import close_all


class Closable:
    def __init__(self, name: str, error: BaseException | None = None) -> None:
        self.name = name
        self.error = error
        self.closed = False

    def close(self) -> None:
        self.closed = True
        if self.error is not None:
            raise self.error

    def __repr__(self) -> str:
        return self.name


def test_every_one_is_closed_and_each_failure_named() -> None:
    made = [
        Closable("first", RuntimeError("ZooKeeper gone")),
        Closable("second"),
        Closable("third", TimeoutError("broker 2 did not exit")),
        Closable("fourth"),
    ]
    assert close_all(made) == [
        "first: RuntimeError: ZooKeeper gone",
        "third: TimeoutError: broker 2 did not exit",
    ]
    assert all(c.closed for c in made)


def test_an_interrupt_is_not_swallowed() -> None:
    made = [Closable("first", KeyboardInterrupt()), Closable("second")]
    with pytest.raises(KeyboardInterrupt):
        close_all(made)
