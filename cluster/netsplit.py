"""A network partition between one process and ZooKeeper, while both keep running.

`ZooKeeperLink` puts a loopback TCP proxy in front of each server of a connect string and
gives the rewritten string to one process (a broker: `linked` does this for each broker
of a supervised cluster; the demo and the fault tests use it). `cut()` makes the link
drop every byte in both directions, as a firewall dropping packets would: neither side
sees the connection close, the process's ZooKeeper client times out and tries to
reconnect (its new connections are accepted and go nowhere), and ZooKeeper expires the
session once the session timeout passes without a heartbeat. `cut_answers()` drops only
ZooKeeper's side: a request sent then is carried out and its answer lost, the case a
client that retries must tell from a request never made. `heal()` forwards again; the
connections that lived through the cut are closed then (TCP would have given up on them).
`slow(delay_s)` keeps every byte but delivers it `delay_s` late, each way (a congested or
lossy link whose retransmissions stall it; a gray failure, not a partition); `heal()`
ends it, the bytes already under way still arriving late, in order.

Unlike SIGSTOP, the process goes on running through the cut: a broker keeps serving its
clients and the other brokers, and a controller keeps its connections to the brokers.

`InterBrokerLink` cuts a broker off from the other brokers instead. The broker gets two
listeners, CLIENT and REPLICATION (its inter-broker listener, as Kafka's
``inter.broker.listener.name``), and advertises REPLICATION at a proxy: every follower
fetching from it and the controller's requests to it go through the proxy, while its
clients, its ZooKeeper session and its own fetches from other leaders do not. Cut, it is a
leader whose followers cannot reach it (`linked_brokers` sets this up for each broker).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator

from cluster import zookeeper as zkp
from cluster.local import free_ports
from cluster.supervised import SupervisedBroker, SupervisedCluster

_CHUNK = 65536


class _Connection:
    """One client connection through the proxy and its upstream twin (None: made during
    a cut, it was never connected upstream)."""

    def __init__(self, client: socket.socket, upstream: socket.socket | None) -> None:
        self.client = client
        self.upstream = upstream
        self.dropping = upstream is None
        # Only the server's bytes are dropped (an asymmetric cut): requests still arrive
        # and are carried out, their answers are lost.
        self.dropping_answers = False
        self.delay_s = 0.0
        self.late: list[_LateSender] = []

    def drops(self, src: socket.socket) -> bool:
        return self.dropping or (self.dropping_answers and src is self.upstream)

    def sockets(self) -> list[socket.socket]:
        return [s for s in (self.client, self.upstream) if s is not None]

    def close(self) -> None:
        for late in self.late:
            late.stop()
        for s in self.sockets():
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


class _LateSender:
    """One direction of a slowed connection: each chunk is sent once its time has come,
    in the order received; an end (the source closed) is passed on after them. Kept for
    the connection's life once made, so that what comes after a heal queues behind what
    is still under way."""

    def __init__(self, proxy: TcpProxy, conn: _Connection, dst: socket.socket) -> None:
        self._proxy = proxy
        self._conn = conn
        self._dst = dst
        self._due: deque[tuple[float, bytes | None]] = deque()
        self._changed = threading.Condition()
        self._stopped = False
        threading.Thread(target=self._run, name="proxy-late", daemon=True).start()

    def pending(self) -> bool:
        with self._changed:
            return bool(self._due)

    def put(self, due: float, data: bytes | None) -> None:
        """``data`` to be sent at ``due`` (time.monotonic()); None: the end."""
        with self._changed:
            self._due.append((due, data))
            self._changed.notify()

    def stop(self) -> None:
        with self._changed:
            self._stopped = True
            self._changed.notify()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._stopped:
                    if self._due:
                        wait = self._due[0][0] - time.monotonic()
                        if wait <= 0:
                            break
                    else:
                        wait = None
                    self._changed.wait(wait)
                if self._stopped:
                    return
                _, data = self._due.popleft()
            if data is None:
                self._proxy._close(self._conn)
                return
            try:
                self._dst.sendall(data)
            except OSError:
                self._proxy._close(self._conn)
                return


Address = tuple[str, int]


class TcpProxy:
    """Forwards connections made to `port` (on loopback) to an upstream address: a fixed
    one, or one looked up for each new connection (None: the server is not there, and the
    connection is refused)."""

    def __init__(self, upstream: Address | Callable[[], Address | None]) -> None:
        self.upstream = upstream
        self._listener = socket.create_server((zkp.HOST, 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._connections: list[_Connection] = []
        self._cut = False
        self._cut_answers = False
        self._delay_s = 0.0
        self._closed = False
        self._accepting = threading.Thread(
            target=self._accept, name=f"proxy-{self.port}", daemon=True
        )
        self._accepting.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                cut = self._cut or self._closed
            upstream = None
            if not cut:
                address = self.upstream() if callable(self.upstream) else self.upstream
                try:
                    if address is None:
                        raise ConnectionRefusedError
                    upstream = socket.create_connection(address, timeout=5)
                    upstream.settimeout(None)
                except OSError:
                    client.close()  # the server is down: refused, as it would be directly
                    continue
            conn = _Connection(client, upstream)
            with self._lock:
                if self._closed:
                    conn.close()
                    return
                conn.dropping = conn.dropping or self._cut  # cut while it was connecting
                conn.dropping_answers = self._cut_answers
                conn.delay_s = self._delay_s
                self._connections.append(conn)
            threading.Thread(target=self._pump, args=(conn, client, upstream), daemon=True).start()
            if upstream is not None:
                threading.Thread(
                    target=self._pump, args=(conn, upstream, client), daemon=True
                ).start()

    def _pump(self, conn: _Connection, src: socket.socket, dst: socket.socket | None) -> None:
        late: _LateSender | None = None
        while True:
            try:
                data = src.recv(_CHUNK)
            except OSError:
                data = b""
            if not data:
                # An end seen during a cut goes no further: the other side must not learn
                # of it (a partition carries no FIN either).
                if conn.drops(src):
                    with contextlib.suppress(OSError):
                        src.close()
                elif late is not None:
                    late.put(time.monotonic() + conn.delay_s, None)  # after what is under way
                else:
                    self._close(conn)
                return
            if dst is None or conn.drops(src):
                continue
            if conn.delay_s > 0 or (late is not None and late.pending()):
                if late is None:
                    late = _LateSender(self, conn, dst)
                    with self._lock:
                        conn.late.append(late)
                        gone = self._closed or conn not in self._connections
                    if gone:  # closed meanwhile: its close() did not see this sender
                        late.stop()
                        return
                late.put(time.monotonic() + conn.delay_s, data)
                continue
            try:
                dst.sendall(data)
            except OSError:
                self._close(conn)
                return

    def _close(self, conn: _Connection) -> None:
        """Close a connection that ended and forget it (a long fault schedule makes
        thousands, each reconnection of a client one)."""
        # ValueError: forgotten already (healed, or the proxy closed).
        with self._lock, contextlib.suppress(ValueError):
            self._connections.remove(conn)
        conn.close()

    def open_connections(self) -> int:
        """How many connections the proxy holds (cut ones included, until the heal)."""
        with self._lock:
            return len(self._connections)

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            for conn in self._connections:
                conn.dropping = True

    def cut_answers(self) -> None:
        """Drop only what the server sends: each request still reaches it and is carried
        out, and the client never hears the answer (nor a pong, so it times out)."""
        with self._lock:
            self._cut_answers = True
            for conn in self._connections:
                conn.dropping_answers = True

    def slow(self, delay_s: float) -> None:
        """Deliver every byte ``delay_s`` late from now on, each way (until the heal)."""
        with self._lock:
            self._delay_s = delay_s
            for conn in self._connections:
                conn.delay_s = delay_s

    def heal(self) -> None:
        with self._lock:
            self._cut = self._cut_answers = False
            self._delay_s = 0.0
            for conn in self._connections:
                conn.delay_s = 0.0
            dead = [c for c in self._connections if c.dropping or c.dropping_answers]
            self._connections = [
                c for c in self._connections if not (c.dropping or c.dropping_answers)
            ]
        for conn in dead:
            conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            connections, self._connections = self._connections, []
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes accept(); close() alone does not
        self._listener.close()
        for conn in connections:
            conn.close()
        self._accepting.join(5)


class ZooKeeperLink:
    """A cuttable link to every server of a ZooKeeper connect string (chroot kept)."""

    def __init__(self, connect: str) -> None:
        hosts, slash, chroot = connect.partition("/")
        self.proxies: list[TcpProxy] = []
        try:
            for hostport in hosts.split(","):
                host, _, port = hostport.rpartition(":")
                self.proxies.append(TcpProxy((host, int(port))))
        except BaseException:
            self.close()
            raise
        self.connect_string = (
            ",".join(f"{zkp.HOST}:{p.port}" for p in self.proxies) + slash + chroot
        )

    def cut(self) -> None:
        for p in self.proxies:
            p.cut()

    def cut_answers(self) -> None:
        for p in self.proxies:
            p.cut_answers()

    def slow(self, delay_s: float) -> None:
        for p in self.proxies:
            p.slow(delay_s)

    def heal(self) -> None:
        for p in self.proxies:
            p.heal()

    def close(self) -> None:
        for p in self.proxies:
            p.close()


@contextlib.contextmanager
def linked(c: SupervisedCluster) -> Iterator[dict[int, ZooKeeperLink]]:
    """Each broker of the cluster (not yet started) reaching its ZooKeeper through a link
    of its own. Afterwards the brokers are killed, then the links closed."""
    made: dict[int, ZooKeeperLink] = {}
    try:
        for b, broker in c.brokers.items():
            made[b] = ZooKeeperLink(c.zk_connect)
            broker.zk_connect = made[b].connect_string
        yield made
    finally:
        for broker in c.brokers.values():
            broker.kill()  # SIGKILL ends a paused one too
        for link in made.values():
            link.close()


class InterBrokerLink:
    """A cuttable link in front of one broker's inter-broker listener (REPLICATION)."""

    def __init__(self) -> None:
        self._broker: SupervisedBroker | None = None
        self.proxy = TcpProxy(self.replication_address)

    def replication_address(self) -> Address | None:
        """Where the broker's REPLICATION listener is bound in its current run, from its
        status file (None: not running, or not listening yet). It binds any free port at
        each start, rather than one picked for it beforehand, which another process could
        take in between (a client's outgoing connection, say)."""
        broker = self._broker
        if broker is None or not broker.alive():
            return None
        status = broker.status()
        if status is None or status.get("pid") != broker.pid:
            return None  # the status file of an earlier run
        bound = status.get("bound_listeners", {}).get("REPLICATION")
        return (str(bound["host"]), int(bound["port"])) if bound else None

    def configure(self, broker: SupervisedBroker) -> None:
        """The broker's listener settings (kept across its restarts; CLIENT on the same
        port each time too if the broker keeps its port)."""
        self._broker = broker
        client_port = 0
        if broker.keep_port:
            if broker.fixed_port is None:
                broker.fixed_port = free_ports(1, zkp.HOST)[0]
            client_port = broker.fixed_port
        broker.overrides.update(
            {
                # CLIENT first: the address the broker's status file gives, which tests
                # and tools bootstrap from.
                "listeners": f"CLIENT://{zkp.HOST}:{client_port},REPLICATION://{zkp.HOST}:0",
                "advertised.listeners": (
                    f"CLIENT://{zkp.HOST}:0,REPLICATION://{zkp.HOST}:{self.proxy.port}"
                ),
                "listener.security.protocol.map": "CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT",
                "inter.broker.listener.name": "REPLICATION",
            }
        )

    def cut(self) -> None:
        self.proxy.cut()

    def cut_answers(self) -> None:
        """The broker still receives every request (the controller's, followers'
        fetches) and acts on it; its answers are lost."""
        self.proxy.cut_answers()

    def slow(self, delay_s: float) -> None:
        """What the other brokers and the controller send it, and its answers, arrive
        ``delay_s`` late."""
        self.proxy.slow(delay_s)

    def heal(self) -> None:
        self.proxy.heal()

    def close(self) -> None:
        self.proxy.close()


@contextlib.contextmanager
def linked_brokers(c: SupervisedCluster) -> Iterator[dict[int, InterBrokerLink]]:
    """Each broker of the cluster (not yet started) reached by the other brokers through
    a link of its own. Afterwards the brokers are killed, then the links closed."""
    made: dict[int, InterBrokerLink] = {}
    try:
        for b, broker in c.brokers.items():
            made[b] = InterBrokerLink()
            made[b].configure(broker)
        yield made
    finally:
        for broker in c.brokers.values():
            broker.kill()
        for link in made.values():
            link.close()
