"""A broker's modification watch and its handler (Kafka's BrokerModificationsHandler):
the handler is there before the read that arms the watch, as Kafka 2.8's
registerBrokerModificationsHandler registers it and then arms the watch
(registerZNodeChangeHandlerAndCheckExistence). Registered after the read, a change
landing in between fired into no handler, the one-shot watch was spent, and nothing
armed it again: the broker's later endpoint changes, or the repair of a registration
that could not be read, were never seen. Found by review (a real ZooKeeper showed both:
/tmp/review-handlers/t/test_broker_mod_race.py)."""

from __future__ import annotations

from typing import Any

from controller import events as ev
from handlers import zk_handlers
from tests.unit.fake_cluster import (
    add_topic,
    cluster,
    drain,
    empty_cluster,
    process,
    register,
    registration,
    start_controller,
)
from tests.unit.fake_zk import FakeZk
from zkdata import paths
from zkdata.znodes import encode_broker


def change_right_after_the_watched_read(zk: FakeZk, broker_id: int, data: bytes) -> list[bool]:
    """The first watched read of broker ``broker_id``'s registration is followed at once
    by someone's write of ``data`` to it, firing the watch that read armed (before the
    controller does anything else). The list holds True once it did."""
    real = zk.get_many
    done: list[bool] = []

    def get_many(path_list: Any, **kwargs: Any) -> Any:
        got = real(path_list, **kwargs)
        if not done and kwargs.get("watch") and paths.broker(broker_id) in list(path_list):
            done.append(True)
            zk.set_data(paths.broker(broker_id), data)
            zk.fire(paths.broker(broker_id), "CHANGED")
        return got

    zk.get_many = get_many  # type: ignore[method-assign]
    return done


def test_a_new_brokers_endpoint_change_right_after_its_read_is_seen() -> None:
    zk, c = cluster()
    register(zk, 4)
    done = change_right_after_the_watched_read(zk, 4, encode_broker(registration(4, port=9999)))
    zk.fire(paths.BROKER_IDS, "CHILD")
    drain(c)
    assert done
    assert c.ctx.live_brokers[4].port == 9999


def test_an_unreadable_registration_repaired_right_after_its_read_starts_the_broker() -> None:
    zk, c = cluster()
    register(zk, 4, b"not json")
    done = change_right_after_the_watched_read(zk, 4, encode_broker(registration(4)))
    zk.fire(paths.BROKER_IDS, "CHILD")
    drain(c)
    assert done
    assert 4 in c.ctx.live_brokers


def test_an_unreadable_registration_beside_a_new_broker_repaired_meanwhile_starts() -> None:
    """The reviewer's case: broker 4 unreadable and broker 5 new in one BrokerChange."""
    zk, c = cluster()
    register(zk, 4, b"{not json")
    register(zk, 5)
    done = change_right_after_the_watched_read(zk, 4, encode_broker(registration(4)))
    zk.fire(paths.BROKER_IDS, "CHILD")
    drain(c)
    assert done
    assert {4, 5} <= set(c.ctx.live_brokers)


def test_a_bounced_brokers_endpoint_change_right_after_its_read_is_seen() -> None:
    zk, c = cluster()
    old_epoch = c.ctx.broker_epochs[3]
    register(zk, 3)  # a new incarnation: another czxid
    done = change_right_after_the_watched_read(zk, 3, encode_broker(registration(3, port=9999)))
    zk.fire(paths.BROKER_IDS, "CHILD")
    drain(c)
    assert done
    assert c.ctx.broker_epochs[3] > old_epoch
    assert c.ctx.live_brokers[3].port == 9999


def test_a_brokers_endpoint_change_right_after_the_failovers_read_is_seen() -> None:
    zk = empty_cluster()
    for b in (1, 2):
        register(zk, b)
    add_topic(zk, "t", {0: (2, 1)})
    done = change_right_after_the_watched_read(zk, 2, encode_broker(registration(2, port=9999)))
    c = start_controller(zk)
    assert done
    assert c.ctx.live_brokers[2].port == 9999


def test_only_a_dead_brokers_modification_handler_goes() -> None:
    zk, c = cluster()
    register(zk, 4, b"not json")  # listed, not started: its repair starts it
    del zk.nodes[paths.broker(3)]
    zk.fire(paths.BROKER_IDS, "CHILD")
    drain(c)
    assert set(c.ctx.live_brokers) == {1, 2}
    assert not zk.handlers.get(paths.broker(3))
    for b in (1, 2, 4):
        assert len(zk.handlers[paths.broker(b)]) == 1, b
    zk.set_data(paths.broker(2), encode_broker(registration(2, port=9999)))
    zk.set_data(paths.broker(4), encode_broker(registration(4)))
    zk.fire(paths.broker(2), "CHANGED")
    zk.fire(paths.broker(4), "CHANGED")
    drain(c)
    assert c.ctx.live_brokers[2].port == 9999
    assert set(c.ctx.live_brokers) == {1, 2, 4}
    process(c, ev.BrokerChange())  # nothing changed: the handlers stay, one each
    for b in (1, 2, 4):
        assert len(zk.handlers[paths.broker(b)]) == 1, b


def test_a_handler_registered_again_leaves_no_moment_without_one() -> None:
    """Every listed broker's handler is registered again at each BrokerChange: replacing
    the old one by removing it first left a moment with none, where a change of a live
    broker was dropped."""
    zk, c = cluster()
    path = paths.broker(2)
    counts: list[int] = []
    real_register, real_unregister = zk.register_handler, zk.unregister_handler

    def register_handler(path: str, handler: Any) -> None:
        real_register(path, handler)
        counts.append(len(zk.handlers.get(path, [])))

    def unregister_handler(path: str, handler: Any) -> None:
        real_unregister(path, handler)
        counts.append(len(zk.handlers.get(path, [])))

    zk.register_handler = register_handler  # type: ignore[method-assign]
    zk.unregister_handler = unregister_handler  # type: ignore[method-assign]
    c.handlers.register(zk_handlers.broker_modifications(c.events.put, 2))
    assert counts
    assert 0 not in counts
    assert len(zk.handlers[path]) == 1
