"""A broker process enforces max.connections.per.ip and its overrides (Kafka 2.8's
ConnectionQuotas): a client address at its limit has its next connection closed at once,
logged, while that address's open connection and every other address are served; once
one closes, the address may connect again. The limited client connects from its own
loopback address (127.0.0.3), so the broker's own connections (from 127.0.0.1) do not
count against it."""

from __future__ import annotations

import socket
import struct

import pytest

from tests.integration.conftest import ClusterFactory
from tests.integration.harness import Cluster, wait_for
from wire.api import ApiKey
from wire.protocol import decode_response, encode_request

pytestmark = pytest.mark.integration

LIMITED = "127.0.0.3"


def connect_from(c: Cluster, source: str) -> socket.socket:
    return socket.create_connection(
        ("127.0.0.1", c[1].port()), timeout=30, source_address=(source, 0)
    )


def api_versions(conn: socket.socket, correlation_id: int) -> int | None:
    """The answer's correlation id, or None if the broker closed the connection."""
    conn.sendall(encode_request(ApiKey.API_VERSIONS, 0, correlation_id, "limits", {}))
    data = b""
    try:
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            more = conn.recv(65536)
            if not more:
                return None
            data += more
    except ConnectionResetError:
        return None
    answered: int = decode_response(ApiKey.API_VERSIONS, 0, data[4:])[0]
    return answered


def test_an_address_at_its_limit_is_refused_and_others_served(
    cluster_factory: ClusterFactory,
) -> None:
    c = cluster_factory((1,), max_connections_per_ip_overrides=f"{LIMITED}:1")
    first = connect_from(c, LIMITED)
    try:
        assert api_versions(first, 1) == 1
        with connect_from(c, LIMITED) as second:
            assert api_versions(second, 2) is None
        wait_for(
            lambda: (
                f"Rejected connection from {LIMITED}, address already has the configured"
                " maximum of 1 connections." in c[1].output()
            ),
            30,
            "the broker to log the refusal",
        )
        # The address's open connection, and any other address, are served on.
        assert api_versions(first, 3) == 3
        with connect_from(c, "127.0.0.1") as other, connect_from(c, "127.0.0.4") as another:
            assert api_versions(other, 4) == 4
            assert api_versions(another, 5) == 5
    finally:
        first.close()

    # Once the broker has seen the close, the address connects again.
    def served_again() -> bool:
        with connect_from(c, LIMITED) as again:
            return api_versions(again, 6) == 6

    wait_for(served_again, 30, "a new connection from the address to be served")
    assert c[1].alive()
