"""max.connections, max.connections.per.ip and its overrides, as Kafka 2.8's
ConnectionQuotas (KIP-402): the rules, the shared counts, and socket servers on loopback
enforcing them (a connection over its address's limit closed once accepted; at
max.connections the listeners wait for a connection to close; the inter-broker listener,
when there are others, served anyway, closing another listener's least recently used
connection)."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.config import ConfigError, load_broker_config, parse_per_ip_overrides
from broker.connection_quotas import (
    ConnectionQuotas,
    QuotaStopped,
    TooManyConnections,
    connection_slot_available,
    ip_of,
    is_protected,
    max_connections_exceeded,
    over_per_ip_limit,
    resolve_per_ip_overrides,
)
from broker.network import SocketServer
from tests.unit.test_socket_framing import Scripted, answered_id, read_answer, versions_request

LOCAL = ipaddress.ip_address("127.0.0.1")
OTHER = ipaddress.ip_address("10.0.0.7")
DEADLINE_S = 15.0


def quotas(
    per_ip: int = 2**31 - 1,
    total: int = 2**31 - 1,
    overrides: dict[str, int] | None = None,
    listeners: tuple[str, ...] = ("PLAINTEXT",),
) -> ConnectionQuotas:
    return ConnectionQuotas(
        max_connections_per_ip=per_ip,
        per_ip_overrides={ip_of(h): n for h, n in (overrides or {}).items()},
        max_connections=total,
        inter_broker_listener=listeners[-1],
        listeners=listeners,
    )


def wait_until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        assert time.monotonic() < deadline, f"still not {what} after {DEADLINE_S} s"
        time.sleep(0.01)


# ------------------------------------------------------------------ the rules


def test_addresses_are_counted_as_java_counts_them() -> None:
    # An IPv4 client of a dual-stack listener is its IPv4 address; a scope is no other
    # address (Inet6Address.equals compares the address alone).
    assert ip_of("::ffff:127.0.0.1") == LOCAL
    assert ip_of("fe80::1%eth0") == ip_of("fe80::1%lo") == ipaddress.ip_address("fe80::1")
    with pytest.raises(ValueError, match="does not appear to be an IPv4 or IPv6 address"):
        ip_of("localhost")


def test_the_inter_broker_listener_is_protected_only_beside_another() -> None:
    assert is_protected("INTERNAL", "INTERNAL", 2)
    assert not is_protected("INTERNAL", "INTERNAL", 1)
    assert not is_protected("CLIENT", "INTERNAL", 2)


@given(st.integers(0, 50), st.integers(0, 50), st.booleans())
def test_a_slot_is_free_below_max_connections_or_on_the_protected_listener(
    total: int, max_connections: int, protected: bool
) -> None:
    assert connection_slot_available(total, max_connections, protected) == (
        protected or total < max_connections
    )
    # A listener closes connections only once over the limit, never the protected one.
    assert max_connections_exceeded(total, max_connections, protected) == (
        not protected and total > max_connections
    )


def test_the_per_ip_limit_counts_the_connections_already_open() -> None:
    assert not over_per_ip_limit(0, 1)
    assert over_per_ip_limit(1, 1)
    assert over_per_ip_limit(0, 0)


def test_overrides_are_read_as_kafkas_parse_csv_map() -> None:
    assert parse_per_ip_overrides("") == {}
    assert parse_per_ip_overrides(" a : 1 , b:2,") == {"a": 1, "b": 2}
    # Split at the last colon: an IPv6 address needs no brackets.
    assert parse_per_ip_overrides("::1:5,127.0.0.1:0") == {"::1": 5, "127.0.0.1": 0}
    for bad in ("host", "host:many", ",a:1", "a:1,,b:2", "a:99999999999"):
        with pytest.raises(ValueError, match="is not host:count"):
            parse_per_ip_overrides(bad)


def test_a_bad_override_is_a_clear_config_error() -> None:
    text = (
        "broker.id=1\nzookeeper.connect=127.0.0.1:2181\nlog.dirs=/tmp/x\n"
        "max.connections.per.ip.overrides=10.0.0.1:3,10.0.0.2\n"
    )
    with pytest.raises(ConfigError) as e:
        load_broker_config(text=text)
    assert "max.connections.per.ip.overrides" in str(e.value)
    assert "'10.0.0.2' is not host:count" in str(e.value)


def test_override_hosts_are_resolved_and_one_that_is_not_names_itself() -> None:
    names = {"broker-a": "::ffff:10.0.0.7", "10.0.0.9": "10.0.0.9"}

    def resolve(host: str) -> str:
        if host not in names:
            raise OSError("Name or service not known")
        return names[host]

    assert resolve_per_ip_overrides({"broker-a": 4, "10.0.0.9": 0}, resolve) == {
        OTHER: 4,
        ipaddress.ip_address("10.0.0.9"): 0,
    }
    with pytest.raises(ValueError, match="cannot resolve host 'nowhere'"):
        resolve_per_ip_overrides({"nowhere": 1}, resolve)
    # The real resolver: an address is itself, localhost the loopback.
    assert resolve_per_ip_overrides({"127.0.0.1": 3}) == {LOCAL: 3}
    resolved = resolve_per_ip_overrides({"localhost": 3})
    assert len(resolved) == 1
    assert set(resolved) <= {LOCAL, ipaddress.ip_address("::1")}


# ------------------------------------------------------------------ the counts


def test_counts_per_address_and_an_override_wins() -> None:
    q = quotas(per_ip=2, overrides={"10.0.0.7": 3})
    stopped = threading.Event()
    for _ in range(2):
        q.inc("PLAINTEXT", LOCAL, stopped)
    with pytest.raises(TooManyConnections, match=r"127\.0\.0\.1, address already has the"):
        q.inc("PLAINTEXT", LOCAL, stopped)
    # The rejected one is not counted, and another address has its own count.
    assert (q.count(LOCAL), q.total, q.rejected) == (2, 2, 1)
    for _ in range(3):
        q.inc("PLAINTEXT", OTHER, stopped)
    with pytest.raises(TooManyConnections, match="maximum of 3 connections"):
        q.inc("PLAINTEXT", OTHER, stopped)
    q.dec(LOCAL)
    q.inc("PLAINTEXT", LOCAL, stopped)
    assert (q.count(LOCAL), q.count(OTHER), q.total) == (2, 3, 5)


def test_an_address_whose_limit_is_zero_is_always_refused() -> None:
    q = quotas(per_ip=0, overrides={"10.0.0.7": 1})
    with pytest.raises(TooManyConnections):
        q.inc("PLAINTEXT", LOCAL, threading.Event())
    q.inc("PLAINTEXT", OTHER, threading.Event())


def test_closing_a_connection_never_counted_is_a_bug_not_a_negative_count() -> None:
    q = quotas()
    with pytest.raises(RuntimeError):
        q.dec(LOCAL)
    q.inc("PLAINTEXT", LOCAL, threading.Event())
    q.dec(LOCAL)
    assert (q.count(LOCAL), q.total) == (0, 0)


def test_at_max_connections_the_acceptor_waits_for_one_to_close() -> None:
    q = quotas(total=1)
    stopped = threading.Event()
    q.inc("PLAINTEXT", LOCAL, stopped)
    admitted = threading.Event()

    def accept() -> None:
        q.inc("PLAINTEXT", OTHER, stopped)
        admitted.set()

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    wait_until(lambda: q.blocked == 1, "waiting")
    assert not admitted.is_set()
    assert q.total == 1
    q.dec(LOCAL)
    assert admitted.wait(DEADLINE_S)
    t.join(DEADLINE_S)
    assert (q.total, q.count(OTHER)) == (1, 1)


def test_a_stopped_listener_stops_waiting_for_a_slot() -> None:
    q = quotas(total=0)
    stopped = threading.Event()
    failures: list[BaseException] = []

    def accept() -> None:
        try:
            q.inc("PLAINTEXT", LOCAL, stopped)
        except QuotaStopped as e:
            failures.append(e)

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    wait_until(lambda: q.blocked == 1, "waiting")
    stopped.set()
    t.join(DEADLINE_S)
    assert not t.is_alive()
    assert len(failures) == 1
    assert q.total == 0


def test_the_protected_listener_takes_its_connection_and_closes_another() -> None:
    q = quotas(total=1, listeners=("CLIENT", "INTERNAL"))
    closed: list[str] = []

    def closer(listener: str) -> Callable[[], bool]:
        def close_lru() -> bool:
            closed.append(listener)
            return True

        return close_lru

    q.register_closer("CLIENT", closer("CLIENT"))
    q.register_closer("INTERNAL", closer("INTERNAL"))
    stopped = threading.Event()
    q.inc("CLIENT", OTHER, stopped)
    assert closed == []
    q.inc("INTERNAL", LOCAL, stopped)  # not blocked
    assert closed == ["CLIENT"]
    assert q.total == 2
    assert q.blocked == 0


def test_with_one_listener_the_inter_broker_listener_waits_like_any() -> None:
    q = quotas(total=1, listeners=("INTERNAL",))
    q.inc("INTERNAL", OTHER, threading.Event())
    stopped = threading.Event()
    outcome: list[str] = []

    def accept() -> None:
        try:
            q.inc("INTERNAL", LOCAL, stopped)
            outcome.append("admitted")
        except QuotaStopped:
            outcome.append("stopped")

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    wait_until(lambda: q.blocked == 1, "waiting")
    stopped.set()
    t.join(DEADLINE_S)
    assert outcome == ["stopped"]
    assert q.total == 1


# ------------------------------------------------------------------ on loopback


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as s:
        yield s


def serve(
    stack: ExitStack, q: ConnectionQuotas, listener: str, apis: Scripted | None = None
) -> SocketServer:
    scripted = apis or Scripted()
    s = SocketServer(
        "127.0.0.1",
        0,
        lambda: scripted,  # type: ignore[arg-type,return-value]
        listener_name=listener,
        quotas=q,
    )
    s.start()
    stack.callback(s.stop)
    return s


def open_conn(stack: ExitStack, s: SocketServer) -> socket.socket:
    c = socket.create_connection(("127.0.0.1", s.port), timeout=DEADLINE_S)
    stack.callback(c.close)
    return c


def test_a_connection_over_its_address_limit_is_closed_and_the_others_served(
    stack: ExitStack,
) -> None:
    q = quotas(per_ip=1)
    s = serve(stack, q, "PLAINTEXT")
    first = open_conn(stack, s)
    first.sendall(versions_request(1))
    assert answered_id(first) == 1
    second = open_conn(stack, s)
    second.sendall(versions_request(2))
    assert read_answer(second) is None  # closed, nothing answered
    assert q.rejected == 1
    first.sendall(versions_request(3))
    assert answered_id(first) == 3
    # Once the first closes, its address may connect again.
    first.close()
    wait_until(lambda: q.total == 0, "counted out")
    third = open_conn(stack, s)
    third.sendall(versions_request(4))
    assert answered_id(third) == 4


def test_the_limit_counts_every_listener_of_the_broker(stack: ExitStack) -> None:
    q = quotas(per_ip=1, listeners=("CLIENT", "INTERNAL"))
    client, internal = serve(stack, q, "CLIENT"), serve(stack, q, "INTERNAL")
    c = open_conn(stack, client)
    c.sendall(versions_request(1))
    assert answered_id(c) == 1
    i = open_conn(stack, internal)
    i.sendall(versions_request(2))
    assert read_answer(i) is None


def test_at_max_connections_a_new_connection_waits_until_one_closes(stack: ExitStack) -> None:
    q = quotas(total=1)
    s = serve(stack, q, "PLAINTEXT")
    first = open_conn(stack, s)
    first.sendall(versions_request(1))
    assert answered_id(first) == 1
    second = open_conn(stack, s)  # in the backlog, or held by the acceptor
    second.sendall(versions_request(2))
    wait_until(lambda: q.blocked == 1, "waiting for a slot")
    first.sendall(versions_request(3))
    assert answered_id(first) == 3
    first.close()
    assert answered_id(second) == 2
    assert q.total == 1
    assert q.rejected == 0


def test_stop_returns_while_the_acceptor_waits_for_a_slot(stack: ExitStack) -> None:
    q = quotas(total=1)
    s = serve(stack, q, "PLAINTEXT")
    first = open_conn(stack, s)
    first.sendall(versions_request(1))
    assert answered_id(first) == 1
    open_conn(stack, s)
    wait_until(lambda: q.blocked == 1, "waiting for a slot")
    s.stop()
    wait_until(lambda: q.total == 0, "every connection counted out")


def test_an_inter_broker_connection_past_the_limit_closes_the_least_recently_used_client(
    stack: ExitStack,
) -> None:
    q = quotas(total=2, listeners=("CLIENT", "INTERNAL"))
    client, internal = serve(stack, q, "CLIENT"), serve(stack, q, "INTERNAL")
    older, newer = open_conn(stack, client), open_conn(stack, client)
    older.sendall(versions_request(1))
    assert answered_id(older) == 1
    newer.sendall(versions_request(2))
    assert answered_id(newer) == 2
    wait_until(lambda: q.total == 2, "counted")
    broker = open_conn(stack, internal)
    broker.sendall(versions_request(3))
    assert answered_id(broker) == 3
    # The client that was used least recently is gone; the other is served on.
    assert read_answer(older) is None
    newer.sendall(versions_request(4))
    assert answered_id(newer) == 4
    wait_until(lambda: q.total == 2, "the closed one counted out")


def test_servers_without_quotas_count_nothing(stack: ExitStack) -> None:
    scripted = Scripted()
    s = SocketServer("127.0.0.1", 0, lambda: scripted)  # type: ignore[arg-type,return-value]
    s.start()
    stack.callback(s.stop)
    c = open_conn(stack, s)
    c.sendall(versions_request(5))
    assert answered_id(c) == 5
