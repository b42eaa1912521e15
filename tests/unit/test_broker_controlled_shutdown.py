"""broker/server.py's controlled shutdown: its attempts and the backoff between them."""

from __future__ import annotations

import dataclasses
import threading
import types
from typing import Any

import pytest

from broker import server
from broker.config import load_broker_config

BASE = load_broker_config(text="zookeeper.connect=127.0.0.1:2181\n")


def attempts_still_leading(backoff_ms: int, retries: int = 3) -> Any:
    """A stand-in for the server: every attempt leaves 3 partitions led here."""
    asked: list[int] = []

    def ask() -> int:
        asked.append(1)
        return 3

    return types.SimpleNamespace(
        config=dataclasses.replace(
            BASE,
            controlled_shutdown_retry_backoff_ms=backoff_ms,
            controlled_shutdown_max_retries=retries,
        ),
        _ask_controller_to_shut_down=ask,
        state_log=types.SimpleNamespace(write=lambda *a, **k: None),
        asked=asked,
    )


def test_a_negative_backoff_does_not_stop_the_shutdown() -> None:
    """The config refuses it now; taken as it was, time.sleep raised ValueError and the
    rest of the broker's shutdown was skipped."""
    fake = attempts_still_leading(-1)
    assert server.KafkaServer.controlled_shutdown(fake) is False
    assert len(fake.asked) == 3


def test_a_backoff_beyond_what_sleep_takes_is_slept_as_long_as_it_can(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept: list[float] = []
    monkeypatch.setattr(server.time, "sleep", slept.append)
    fake = attempts_still_leading(2**63 - 1, retries=2)
    assert server.KafkaServer.controlled_shutdown(fake) is False
    assert slept == [threading.TIMEOUT_MAX]
