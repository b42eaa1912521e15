"""A broker (Kafka's KafkaServer): ZooKeeper session, registration, socket server, controller.

Start-up order matters: the socket server binds first (so the registration can advertise
the real port when the configured one is 0), then the broker registers (its broker epoch
is the registration's czxid), then the controller races for election. Shutdown is the
reverse, preceded by a controlled shutdown so that leadership moves away before the
registration disappears.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import gc
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kazoo.exceptions import KazooException

from broker.admin_apis import AdminApis
from broker.apis import KafkaApis
from broker.config import (
    BrokerConfig,
    TopicConfig,
    parse_per_ip_overrides,
    topic_config_as_stored,
)
from broker.config_changes import ConfigChangeListener
from broker.connection_quotas import ConnectionQuotas, resolve_per_ip_overrides
from broker.fetcher import ReplicaFetcherManager
from broker.group_apis import GroupApis
from broker.metadata_cache import BrokerEndpoint, MetadataCache
from broker.network import SocketServer
from broker.replica_manager import Partition, ReplicaManager
from broker.state_change_log import StateChangeLog, open_for_broker
from controller.controller import (
    CONTROLLED_SHUTDOWN_APPLIED_WAIT_S,
    ControllerConfig,
    KafkaController,
)
from election.broker_identity import (
    META_PROPERTIES,
    IdentityOutcome,
    meta_to_write,
    read_meta_properties,
    record_claim_address,
    write_meta_properties,
)
from election.controller_election import read_controller
from election.identity_store import ZkIdentityStore, establish_identity
from election.registration import check_endpoints_unclaimed, register_broker
from groups.coordinator import OFFSETS_TOPIC, GroupCoordinator, offsets_topic_partition_count
from groups.membership import GroupLimits
from storage.log_manager import LockedLogDirs, LogManager, lock_log_dirs
from wire.api import ApiKey
from wire.client import KafkaConnection
from wire.errors import ErrorCode
from zkdata import paths
from zkdata.client import ZkClient, ZooKeeperClientTimeout
from zkdata.znodes import (
    BrokerRegistration,
    EndPoint,
    MalformedZnode,
    TopicPartition,
    decode_broker,
    decode_topic_config,
)

log = logging.getLogger(__name__)

STATUS_FILE = "broker-status.json"


def write_json_atomically(path: Path, data: dict[str, Any]) -> None:
    """Replace ``path`` by a rename, so a reader of the status file (`zkctl controller`,
    the benchmarks) sees the old one or the new one, never half; not synced: the next is
    a second away."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, path)


def _split_chroot(connect: str) -> tuple[str, str]:
    hosts, slash, chroot = connect.partition("/")
    return hosts, ("/" + chroot.rstrip("/")) if slash and chroot.strip("/") else ""


class KafkaServer:
    def __init__(self, config: BrokerConfig, stop_requested: threading.Event | None = None) -> None:
        # Set when the broker is asked to stop (SIGTERM): a start-up still waiting for its
        # earlier session's registration to expire gives up (RegistrationCancelled).
        self.stop_requested = stop_requested if stop_requested is not None else threading.Event()
        # The log directories are locked before anything is read or written in them (as
        # Kafka's LogManager locks them first): a second process started on a running
        # broker's directories stops here (LogDirLockedError), before it opens the running
        # broker's state-change log, writes its meta.properties or identity files, or
        # overwrites its status file. A directory that cannot be created or locked is
        # offline from the start (startup()).
        self._dir_locks: LockedLogDirs = lock_log_dirs(config.log_dirs)
        # One socket server per listener, bound first: a port 0 listener's real port is
        # part of the registration, and of the address a persistent identity's claim
        # records. Each answers Metadata with its own listener's addresses.
        self.socket_servers: dict[str, SocketServer] = {}
        try:
            # max.connections, max.connections.per.ip and max.connection.creation.rate
            # count over every listener. A
            # host of the overrides that does not resolve stops the broker here, as
            # Kafka's UnknownHostException.
            self.connection_quotas = ConnectionQuotas(
                max_connections_per_ip=config.max_connections_per_ip,
                per_ip_overrides=resolve_per_ip_overrides(
                    parse_per_ip_overrides(config.max_connections_per_ip_overrides)
                ),
                max_connections=config.max_connections,
                inter_broker_listener=config.inter_broker_listener_name,
                listeners=[listener.name for listener in config.listeners],
                max_connection_creation_rate=config.max_connection_creation_rate,
                quota_window_num=config.quota_window_num,
                quota_window_size_seconds=config.quota_window_size_seconds,
            )
            for listener in config.listeners:
                self.socket_servers[listener.name] = SocketServer(
                    listener.host,
                    listener.port,
                    lambda: self.apis,
                    max_request_size=config.socket_request_max_bytes,
                    listener_name=listener.name,
                    connections_max_idle_ms=config.connections_max_idle_ms,
                    socket_send_buffer_bytes=config.socket_send_buffer_bytes,
                    socket_receive_buffer_bytes=config.socket_receive_buffer_bytes,
                    quotas=self.connection_quotas,
                )
        except BaseException:
            self._stop_socket_servers()
            self._dir_locks.release()
            raise
        self.socket_server = self.socket_servers[config.inter_broker_listener_name]
        self._chroot_ensured = False
        try:
            # Who we are (broker.identity.mode; election/broker_identity.py). An
            # IdentityError (a ValueError) stops the broker with its message: a log
            # directory of another cluster stops it here, before its state-change log is
            # opened there or its status file written (Kafka 2.8 checks the cluster id
            # before anything else).
            self.identity: IdentityOutcome = establish_identity(
                config,
                self._claim_address(config),
                prepare=lambda: self._ensure_chroot(config),
                cancelled=self.stop_requested,
            )
        except BaseException:
            self._stop_socket_servers()
            self._dir_locks.release()
            raise
        if self.identity.broker_id != config.broker_id:
            config = replace_broker_id(config, self.identity.broker_id)
        self.config = config
        self.broker_id = config.broker_id
        # In the first log directory, unless it could not be locked (it is offline).
        self.state_log: StateChangeLog = open_for_broker(
            [d for d in config.log_dirs[:1] if self._dir_locks.holds(d)], config.broker_id
        )
        self.zk = ZkClient(
            config.zookeeper_connect,
            session_timeout_ms=config.zookeeper_session_timeout_ms,
            connection_timeout_ms=config.zookeeper_connection_timeout_ms,
        )
        self.broker_epoch = -1
        self.registered = threading.Event()  # set at the first registration
        self.started_at = time.time()
        self.metadata = MetadataCache(self.broker_id, config.inter_broker_listener_name)
        self.logs: LogManager | None = None
        # The configs of the topics this broker holds (or is making) logs of, kept up to
        # date by change notifications. Any other topic's is read when needed and not kept,
        # and a deleted topic's is forgotten: a topic made again under the name has its own.
        self._topic_configs: dict[str, TopicConfig] = {}
        # Bumped when a topic's config is read again or dropped (see _keep_topic_config).
        self._topic_config_generation: dict[str, int] = {}
        self._topic_configs_lock = threading.Lock()
        self.replicas = ReplicaManager(
            self.broker_id,
            self.zk,
            self.state_log,
            replica_lag_time_max_ms=config.replica_lag_time_max_ms,
            topic_config=self._topic_config,
            new_logs_topic_configs=self._new_logs_topic_configs,
        )
        self.replicas.known_partition = lambda tp: (
            self.metadata.partition(tp.topic, tp.partition) is not None
        )
        self._leader_endpoints: dict[int, tuple[str, int]] = {}
        self.fetchers = ReplicaFetcherManager(
            self.broker_id,
            self._on_fetched,
            self._endpoint_of,
            max_wait_ms=config.replica_fetch_wait_max_ms,
            backoff_ms=config.replica_fetch_backoff_ms,
            max_bytes=config.replica_fetch_response_max_bytes,
            partition_max_bytes=config.replica_fetch_max_bytes,
            min_bytes=config.replica_fetch_min_bytes,
            # (0 would make the fetcher's socket non-blocking)
            socket_timeout_s=max(config.replica_socket_timeout_ms, 1) / 1000,
            receive_buffer_bytes=config.replica_socket_receive_buffer_bytes,
            follower_log=self.replicas,
        )
        # The group coordinator of the __consumer_offsets partitions led here.
        self.groups = GroupCoordinator(
            self.broker_id,
            self.replicas,
            offsets_partitions=config.offsets_topic_num_partitions,
            limits=group_limits(config),
            offsets_retention_ms=config.offsets_retention_minutes * 60 * 1000,
            offsets_retention_check_interval_ms=config.offsets_retention_check_interval_ms,
            offsets_compression=config.offsets_topic_compression_codec,
            offset_metadata_max_bytes=config.offset_metadata_max_bytes,
            commit_timeout_s=config.offsets_commit_timeout_ms / 1000,
        )
        self.replicas.on_become = self._on_become
        self.replicas.on_stop = self._on_stop
        self.replicas.on_stopping = self.fetchers.unfollow
        self.replicas.on_all_log_dirs_failed = self._all_log_dirs_failed
        self.controller = KafkaController(
            ControllerConfig(
                broker_id=self.broker_id,
                session_timeout_ms=config.zookeeper_session_timeout_ms,
                unclean_leader_election_enable=config.unclean_leader_election_enable,
                auto_leader_rebalance_enable=config.auto_leader_rebalance_enable,
                leader_imbalance_per_broker_percentage=config.leader_imbalance_per_broker_percentage,
                leader_imbalance_check_interval_s=config.leader_imbalance_check_interval_seconds,
                delete_topic_enable=config.delete_topic_enable,
                controller_socket_timeout_ms=config.controller_socket_timeout_ms,
                inter_broker_listener_name=config.inter_broker_listener_name,
            ),
            self.zk,
            self.state_log,
            self.register,
        )
        self.config_changes = ConfigChangeListener(self.zk, self._on_topic_config_change)
        self.apis: KafkaApis | None = None
        self._status_stop = threading.Event()
        self._status_thread = threading.Thread(target=self._status_loop, name="status", daemon=True)
        self._shutdown_lock = threading.Lock()
        self._shut_down = False
        self._shutting_down = threading.Event()
        # Set at the end of startup() (Kafka's startupComplete): only a broker that
        # started asks the controller for a controlled shutdown. One whose start failed
        # (a duplicate refused by BrokerIdInUse, say) must not: the controller would take
        # the running broker of that id for leaving, move its leaderships away and keep it
        # among the brokers shutting down, never to be elected.
        self.startup_complete = threading.Event()

    # --- start-up -----------------------------------------------------------------------

    def startup(self) -> None:
        self._ensure_chroot(self.config)
        self.zk.start(cancelled=self.stop_requested)
        # A ZooKeeper blip from here on is waited out, not a failed start (Kafka's client
        # retries until connected); both steps are safe to repeat.
        self.zk.until_connected(
            lambda: self.zk.ensure_paths(paths.PERSISTENT_PATHS), cancelled=self.stop_requested
        )
        cluster_id = ZkIdentityStore(self.zk, self.stop_requested).cluster_id()
        self.metadata.cluster_id = cluster_id
        # Each log directory's meta.properties is only read and checked here (a log
        # directory of another cluster stopped the identity step already; this checks
        # it again, against the cluster id read now): it is written once the broker is
        # registered (_checkpoint_meta_properties), as Kafka's is. A broker refused its
        # registration (a live broker's broker.id, by mistake) leaves no id behind
        # that would stop it once broker.id is fixed. One whose meta.properties cannot be
        # read is offline from the start (KIP-112), as Kafka's initial offline
        # directories; so is one that could not be locked, where nothing is read.
        offline_at_start: dict[str, OSError] = {}
        metas = read_meta_properties(
            [d for d in self.config.log_dirs if self._dir_locks.holds(d)], offline_at_start
        )
        meta_todo = meta_to_write(metas, self.broker_id, cluster_id)
        # The logs before anything else: recovery (after an unclean stop) validates their
        # tails, and the broker must not serve before its logs are sound.
        self.logs = LogManager(
            self.config.log_dirs,
            self.config,
            topic_config=self._topic_config,
            topic_configs=self._new_logs_topic_configs,
            offline_at_start=offline_at_start,
            locked=self._dir_locks,
        )
        self.replicas.logs = self.logs
        self.logs.start()
        self.replicas.start()
        admin = AdminApis(
            self.zk,
            self.metadata,
            lambda: self.controller.is_active,
            self.config,
            self.controller,
        )
        self._start_group_coordinator()
        self.apis = KafkaApis(
            self.broker_id,
            self.metadata,
            self.replicas,
            self.controller,
            self.state_log,
            lambda: self.broker_epoch,
            registered=self.registered,
            fetch_session_cache_slots=self.config.max_incremental_fetch_session_cache_slots,
            fetch_session_eviction_ms=self.config.min_incremental_fetch_session_eviction_ms,
            fetch_max_bytes=self.config.fetch_max_bytes,
            request_timeout_s=self.config.request_timeout_ms / 1000,
            # About the longest a healthy cluster takes to send a new broker its first
            # UpdateMetadata (a dead controller's session must expire first), and well
            # within the client's own timeout.
            metadata_wait_s=min(
                self.config.zookeeper_session_timeout_ms, self.config.request_timeout_ms / 2
            )
            / 1000,
            on_live_leaders=self._remember_live_leaders,
            admin=admin,
            groups=GroupApis(
                self.groups,
                self.metadata,
                admin,
                offsets_replication_factor=self.config.offsets_topic_replication_factor,
                offsets_segment_bytes=self.config.offsets_topic_segment_bytes,
                zk=self.zk,
            ),
        )
        self.replicas.on_data = self.apis.wake_fetches
        self.apis.on_metadata_updated = self.fetchers.refresh_endpoints
        self.apis.on_topics_deleted = self._on_topics_deleted
        for server in self.socket_servers.values():
            server.start()
        rack = self.config.broker_rack
        self.metadata.own = {
            ep.listener: BrokerEndpoint(self.broker_id, ep.host, ep.port, ep.listener, rack)
            for ep in self.registration().endpoints
        }
        # Kafka's createBrokerInfo: endpoints another broker registered are refused.
        registration = self.registration()
        self.zk.until_connected(
            lambda: check_endpoints_unclaimed(self.zk, registration),
            cancelled=self.stop_requested,
        )
        self.register(until_connected=True)
        self._checkpoint_meta_properties(meta_todo, cluster_id)
        self._record_claim_address()
        self.controller.start()
        self.config_changes.start()
        self._status_thread.start()
        threading.Thread(target=self._isr_check_loop, name="isr-expiration", daemon=True).start()
        self.startup_complete.set()
        log.info(
            "broker %d started on %s, broker epoch %d",
            self.broker_id,
            ", ".join(f"{name} port {s.port}" for name, s in self.socket_servers.items()),
            self.broker_epoch,
        )

    def _checkpoint_meta_properties(self, log_dirs: list[str], cluster_id: str) -> None:
        """Write broker.id and cluster.id to ``log_dirs`` (those start-up found without
        them or outdated), once registered: Kafka's checkpointBrokerMetadata. A directory
        whose write fails goes offline through the log dir failure handler (its logs
        leave, the controller is told), as Kafka's does; the broker runs on the others,
        or halts if none is left."""
        assert self.logs is not None
        failures = self.logs.dir_failures
        for log_dir in log_dirs:
            key = os.fspath(Path(log_dir))
            if failures.has_offline_log_dir(key):
                continue  # failed since (nothing is written in it any more)
            try:
                write_meta_properties(log_dir, self.broker_id, cluster_id)
            except OSError as e:
                failures.maybe_add_offline_log_dir(
                    key, f"writing {Path(log_dir) / META_PROPERTIES} failed", e
                )

    def _record_claim_address(self) -> None:
        """A persistent identity's claim records this broker's address, written only now
        that the broker is registered: one started from a copy of a live broker's disk
        holds the same check code and is refused only by its registration (BrokerIdInUse),
        and must not have rewritten the live broker's claim first. The address is for the
        listing (zkctl broker identities); failing to write it does not stop the broker,
        nor does a claim that cannot be read (replaced by hand since the identity step read
        it): it is reported with its path and left as it is."""
        claim = self.identity.claim
        if claim is None:
            return
        try:
            record_claim_address(ZkIdentityStore(self.zk, self.stop_requested), claim)
        except KazooException as e:
            log.warning("the claim of broker id %d keeps its old address: %r", claim.broker_id, e)
        except MalformedZnode as e:
            log.warning("%s; the claim's address is left as it is", e)

    def _ensure_chroot(self, config: BrokerConfig) -> None:
        hosts, chroot = _split_chroot(config.zookeeper_connect)
        if not chroot or self._chroot_ensured:
            return
        # Kafka creates its chroot if missing; a client rooted in it cannot.
        root = ZkClient(
            hosts,
            session_timeout_ms=config.zookeeper_session_timeout_ms,
            connection_timeout_ms=config.zookeeper_connection_timeout_ms,
        )
        root.start(cancelled=self.stop_requested)
        try:
            root.until_connected(lambda: root.ensure_paths([chroot]), cancelled=self.stop_requested)
        finally:
            root.close()
        self._chroot_ensured = True

    def _claim_address(self, config: BrokerConfig) -> str:
        """host:port of the advertised inter-broker listener (its real port if 0)."""
        try:
            advertised = config.advertised_listener()
        except KeyError:
            return ""
        return f"{advertised.host}:{advertised.port or self.socket_server.port}"

    def _stop_socket_servers(self) -> None:
        for server in self.socket_servers.values():
            server.stop()

    def registration(self) -> BrokerRegistration:
        endpoints = []
        for listener in self.config.advertised_listeners:
            # An advertised port 0 is the bound port of the listener of that name.
            port = listener.port or self.socket_servers[listener.name].port
            endpoints.append(
                EndPoint(listener.name, listener.host, port, listener.security_protocol)
            )
        return BrokerRegistration(self.broker_id, tuple(endpoints), self.config.broker_rack)

    def register(self, *, until_connected: bool = False) -> int:
        """(Re-)register in the current session; returns and remembers the broker epoch.
        ``until_connected`` (start-up): a lost connection is waited out. The controller's
        thread, which re-registers after a new session, does not wait: it must stay free
        to resign if the session expires meanwhile."""
        reg = self.registration()
        self.broker_epoch = register_broker(
            self.zk,
            reg,
            progress=lambda m: log.info("%s", m),
            cancelled=self.stop_requested,
            until_connected=until_connected,
        )
        self.registered.set()
        self.state_log.broker_registered(self.broker_epoch, reg.host, reg.port)
        return self.broker_epoch

    # --- replication plumbing -----------------------------------------------------------

    def _remember_live_leaders(self, leaders: list[dict[str, Any]]) -> None:
        for leader in leaders:
            self._leader_endpoints[leader["broker_id"]] = (leader["host_name"], leader["port"])
        if leaders:
            self.fetchers.refresh_endpoints()

    def _endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        b = self.metadata.broker(broker_id)
        if b is not None:
            return b.host, b.port
        return self._leader_endpoints.get(broker_id)

    def _on_become(self, leaders: list[Partition], followers: list[Partition]) -> None:
        self.groups.on_become(leaders, followers)
        self.fetchers.unfollow([p.topic_partition for p in leaders])
        if self._shutting_down.is_set():
            # Leaving: following now would only get us added back to ISRs we are about
            # to drop out of (what KIP-841 later forbade on the leader's side).
            self.fetchers.unfollow([p.topic_partition for p in followers])
            return
        self.fetchers.follow(
            [(p.topic_partition, p.leader, p.leader_epoch, p.log_end_offset) for p in followers]
        )

    def _on_topics_deleted(self, topics: list[str]) -> None:
        # Here too, not only where a StopReplica deletes logs: a broker that holds none of
        # a topic's replicas may have read its config (a change notification's).
        for topic in topics:
            self._forget_topic_config(topic)
        self.replicas.delete_orphaned_logs(topics)
        self.groups.handle_deleted_topics(topics)

    def _on_stop(self, tps: list[TopicPartition], deleted: bool) -> None:
        self.groups.on_stop(tps)
        self.fetchers.unfollow(tps)
        if deleted:
            # A topic made again under the same name reads its own config, not this one's;
            # but a topic's config is kept while any log of it is here (a reassignment
            # moving one replica off deletes only that one).
            topics = {tp.topic for tp in tps}
            held = self.logs.held_topics(topics) if self.logs is not None else set()
            for topic in topics - held:
                self._forget_topic_config(topic)

    def _all_log_dirs_failed(self, log_dirs: list[str]) -> None:
        """No log directory is online any more: halt with exit status 1, as Kafka does
        (no controlled shutdown: nothing is left to move safely or flush). The ZooKeeper
        session is closed first, so the registration goes at once and the controller
        moves the leaderships now, not a session timeout later; a watchdog halts anyway
        if ZooKeeper does not answer within a few seconds."""
        message = f"Shutdown broker because all log dirs in {', '.join(log_dirs)} have failed"
        log.critical("%s", message)
        print(f"broker {self.broker_id}: {message}", file=sys.stderr, flush=True)
        watchdog = threading.Timer(_HALT_WATCHDOG_S, _halt)
        watchdog.daemon = True
        watchdog.start()
        try:
            self.zk.close()
        except Exception:
            log.exception("closing the ZooKeeper session before halting failed")
        _halt()

    def _on_fetched(
        self,
        tp: TopicPartition,
        leader_id: int,
        leader_epoch: int,
        records: memoryview | bytes | None,
        high_watermark: int,
        leader_log_start: int,
    ) -> int | None:
        return self.replicas.append_as_follower(
            tp, leader_id, leader_epoch, records, high_watermark, leader_log_start
        )

    def _topic_config(self, topic: str) -> TopicConfig:
        """The effective config of a topic this broker holds (or makes) logs of: the
        broker's defaults and the topic's overrides in /config/topics/<t>, kept from when
        its logs were made or loaded, and as change notifications name it since (see
        _config_from_znode for what is made of a bad one). Not kept (never read, or
        forgotten), it is read now; out of reach of ZooKeeper, the read waits until it is
        back, as Kafka's does: the defaults would make a log that keeps, compresses or
        retains the topic's records otherwise than its config says, for good."""
        kept = self._topic_configs.get(topic)
        if kept is not None:
            return kept
        return self.zk.until_connected(
            lambda: self._read_topic_configs([topic])[topic], cancelled=self.stop_requested
        )

    def _new_logs_topic_configs(self, topics: Sequence[str]) -> dict[str, TopicConfig]:
        """The configs of the topics a LeaderAndIsr makes logs of, read now (Kafka's
        LogManager reads /config/topics/<t> for each log it makes), whether kept or not:
        a topic's config is kept only while this broker holds its logs, and a topic may
        have been deleted and made again meanwhile. All in one batch of multiReads, not
        a round trip a topic. Out of reach of ZooKeeper, it waits (see _topic_config)."""
        return self.zk.until_connected(
            lambda: self._read_topic_configs(topics), cancelled=self.stop_requested
        )

    def _forget_topic_config(self, topic: str) -> None:
        """Drop the topic's kept config; a read that began before this is not kept
        either (it may have read the znode before it changed)."""
        with self._topic_configs_lock:
            self._topic_config_generation[topic] = self._topic_config_generation.get(topic, 0) + 1
            self._topic_configs.pop(topic, None)

    def _keep_topic_config(
        self, topic: str, generation: int, config: TopicConfig, *, replace_only: bool
    ) -> None:
        """Keep ``config``, read at ``generation``, as ``topic``'s, unless the topic's
        config was read again or forgotten since (this read may predate the change or
        the deletion); ``replace_only``: only in place of a kept one (a change
        notification's read of a topic this broker holds no log of is not kept)."""
        with self._topic_configs_lock:
            if self._topic_config_generation.get(topic, 0) != generation:
                return
            if replace_only and topic not in self._topic_configs:
                return
            self._topic_configs[topic] = config

    def _read_topic_configs(
        self, topics: Sequence[str], *, replace_only: bool = False
    ) -> dict[str, TopicConfig]:
        """The topics' configs read from ZooKeeper now (one batch of multiReads), each
        kept as _keep_topic_config says; a ZooKeeper error raises (nothing kept)."""
        with self._topic_configs_lock:
            generations = [self._topic_config_generation.get(t, 0) for t in topics]
        znodes = [paths.topic_config(t) for t in topics]
        configs: dict[str, TopicConfig] = {}
        for topic, generation, path, got in zip(
            topics, generations, znodes, self.zk.get_many(znodes), strict=True
        ):
            config = self._config_from_znode(topic, path, None if got is None else got[0])
            self._keep_topic_config(topic, generation, config, replace_only=replace_only)
            configs[topic] = config
        return configs

    def _start_group_coordinator(self) -> None:
        """Starts the group coordinator, before anything is served, hashing groups over
        the partitions of an existing __consumer_offsets (the setting only when there is
        none yet), as Kafka 2.8's KafkaServer.startup does: a broker (re)started with
        another offsets.topic.num.partitions still finds each group where it is."""
        got = self.zk.until_connected(
            lambda: self.zk.get(paths.topic(OFFSETS_TOPIC)), cancelled=self.stop_requested
        )
        self.groups.start(
            offsets_topic_partition_count(
                None if got is None else got[0], self.config.offsets_topic_num_partitions
            )
        )

    def _config_from_znode(self, topic: str, path: str, data: bytes | None) -> TopicConfig:
        """The topic's config from its znode's ``data`` (None: no znode), read as Kafka's
        LogConfig.fromProps reads it: a key this broker does not know (a newer Kafka's,
        another tool's typo) is ignored with a warning, the others kept. A bad value of a
        known key, or a malformed znode, keeps the config kept for the topic (warned), as
        Kafka keeps it when a change fails to apply; with none kept, the good overrides
        are used and the bad keys take the broker's defaults (a malformed znode: all of
        them)."""
        overrides: dict[str, str] = {}
        malformed: MalformedZnode | None = None
        try:
            if data is not None:
                overrides = decode_topic_config(topic, data, path)
        except MalformedZnode as e:
            malformed = e
        stored = topic_config_as_stored(self.config, overrides)
        if stored.unknown_keys:
            log.warning(
                "topic %s: ignoring config keys unknown to this broker in %s: %s",
                topic,
                path,
                ", ".join(stored.unknown_keys),
            )
        config = stored.config
        if malformed is not None or stored.problems:
            why = (
                str(malformed)
                if malformed is not None
                else "; ".join(p.message for p in stored.problems)
            )
            known = self._topic_configs.get(topic)
            if known is not None:
                log.warning("bad config for topic %s: %s; keeping its config as it was", topic, why)
                config = known
            else:
                log.warning(
                    "bad config for topic %s: %s; the broker's defaults stand for %s",
                    topic,
                    why,
                    "every key" if malformed is not None else "the bad keys",
                )
        return config

    def _on_topic_config_change(self, topic: str) -> None:
        """A config change notification named ``topic`` (Kafka's TopicConfigHandler): its
        config is read again, its logs here take it, and the controller, if here, elects
        the topic's offline partitions again when the topic's own config turns unclean
        election on. The
        config is kept only in place of a kept one (a topic this broker holds logs of),
        as Kafka's updates only the logs it has. Until the read succeeds (a failed one is
        retried) the config kept before stays in use."""
        # A read begun before this notification must not keep what it read.
        with self._topic_configs_lock:
            self._topic_config_generation[topic] = self._topic_config_generation.get(topic, 0) + 1
        config = self._read_topic_configs([topic], replace_only=True)[topic]
        updated = self.logs.update_topic_config(topic, config) if self.logs is not None else 0
        log.info("topic %s: config applied to %d logs", topic, updated)
        # Kafka's TopicConfigHandler asks for the pass on the topic's own override alone
        # (Scala's toBoolean: "true" in any case, untrimmed); a broker default of true
        # made every change of the topic's other keys a redundant pass.
        if config.overrides.get("unclean.leader.election.enable", "").lower() == "true":
            self.controller.enable_topic_unclean_leader_election(topic)

    def _isr_check_loop(self) -> None:
        # Kafka 2.8's ReplicaManager schedules isr-expiration every replica.lag.time.max.ms
        # / 2 ms (Java's long division, toward zero; a period of 0 the config refuses),
        # and its KafkaScheduler runs a task of a negative period once, at once: with
        # replica.lag.time.max.ms <= -2 the ISR is checked once at start-up, never again.
        lag_ms = self.config.replica_lag_time_max_ms
        if lag_ms < 0:
            try:
                self.replicas.maybe_shrink_isr()
            except Exception:
                log.exception("ISR expiration check failed")
            return
        interval = max(0.1, lag_ms / 2000)
        while not self._status_stop.wait(interval):
            try:
                self.replicas.maybe_shrink_isr()
            except Exception:
                log.exception("ISR expiration check failed")

    # --- status -------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        reg = self.registration()
        return {
            "broker_id": self.broker_id,
            "pid": os.getpid(),
            "host": reg.host,
            "port": reg.port,
            #: every advertised listener, name -> {host, port} (host and port: the first);
            #: apart, not "host:port", which is ambiguous for an IPv6 host
            "listeners": {ep.listener: {"host": ep.host, "port": ep.port} for ep in reg.endpoints},
            #: every listener's bound address, name -> {host, port}: what a port 0 listener
            #: got, and where a listener advertised behind a proxy really is
            "bound_listeners": {
                name: {"host": server.host, "port": server.port}
                for name, server in self.socket_servers.items()
            },
            "broker_epoch": self.broker_epoch,
            "identity": self.identity.to_json(),
            "started_at": self.started_at,
            "zookeeper_connected": self.zk.connected,
            #: times the ZooKeeper client's connection thread ended on an error and was
            #: started again with a new session (kazoo's issue 254: an answer out of order)
            "zookeeper_connection_restarts": self.zk.connection_restarts,
            "controller_id": self.controller.active_controller_id,
            "metadata_controller_id": self.metadata.controller_id,
            "controller": self.controller.metrics(),
            "partitions": len(self.replicas.partitions),
            "leaders": self.replicas.leader_count(),
            #: KIP-112: the log directories failed, and the partitions offline with them
            "offline_log_dirs": self.logs.dir_failures.offline() if self.logs is not None else [],
            "offline_partitions": len(self.replicas.offline_partitions),
            "requests_handled": sum(s.requests_handled for s in self.socket_servers.values()),
            "updated_at": time.time(),
        }

    def _status_loop(self) -> None:
        if not self.config.log_dirs:
            return
        path = Path(self.config.log_dirs[0]) / STATUS_FILE
        failing = False
        while True:
            # At once, then every second: `zkctl controller` reads it as soon as the
            # broker is up.
            try:
                write_json_atomically(path, self.status())
            except Exception:
                # Its log directory failed, say: reported once, not every second (the
                # broker carries on; the directory's logs are handled where they fail).
                if not failing:
                    log.exception("could not write %s; trying again every second", path)
                failing = True
            else:
                if failing:
                    log.info("%s written again", path)
                failing = False
            if self._status_stop.wait(1.0):
                return
            _return_free_memory()

    # --- shutdown -----------------------------------------------------------------------

    def controlled_shutdown(self) -> bool:
        """Ask the controller to move this broker's leaderships away, as Kafka's broker does:
        up to controlled.shutdown.max.retries attempts, backing off between them."""
        cfg = self.config
        for attempt in range(1, cfg.controlled_shutdown_max_retries + 1):
            asked = time.monotonic()
            zookeeper_gone = False
            try:
                remaining = self._ask_controller_to_shut_down()
            except ZooKeeperClientTimeout as e:
                # Kafka's getControllerId gives up after zookeeper.connection.timeout.ms,
                # and its exception ends the controlled shutdown (CoreUtils.swallow): the
                # rest of the shutdown must run, the logs be closed.
                log.warning("controlled shutdown attempt %d failed: %s; giving up", attempt, e)
                remaining, zookeeper_gone = None, True
            except Exception as e:
                log.warning("controlled shutdown attempt %d failed: %s", attempt, e)
                remaining = None
            self.state_log.write(
                "controlled_shutdown",
                attempt=attempt,
                remaining=remaining,
                ms=round((time.monotonic() - asked) * 1000, 1),
            )
            if zookeeper_gone:
                break
            if remaining == 0:
                log.info("controlled shutdown succeeded")
                return True
            if remaining is not None:
                log.info("controlled shutdown: %d partitions still led here", remaining)
                if not self._other_brokers_alive():
                    # Leaderships move only to another live ISR member: with no other
                    # broker registered, no attempt can move any, and Kafka's waits out
                    # its retries for nothing (10 s by default: the last broker of a
                    # cluster stopped whole).
                    log.info(
                        "controlled shutdown: no other live broker to take them; not trying again"
                    )
                    break
            if attempt < cfg.controlled_shutdown_max_retries:
                # The config refuses a negative backoff; were one here all the same (or one
                # beyond what sleep takes), the rest of the shutdown must still run.
                backoff_s = cfg.controlled_shutdown_retry_backoff_ms / 1000
                time.sleep(min(max(0.0, backoff_s), threading.TIMEOUT_MAX))
        log.warning("controlled shutdown did not complete; shutting down anyway")
        return False

    def _other_brokers_alive(self) -> bool:
        """Whether a broker besides this one is registered in ZooKeeper (read there, not
        from the metadata: a broker that stopped a moment ago may still be listed in the
        controller's last UpdateMetadata). Taken for yes when ZooKeeper does not answer
        within zookeeper.connection.timeout.ms: the attempts go on as Kafka's."""
        timeout_s = self.config.zookeeper_connection_timeout_ms / 1000
        try:
            children = self.zk.get_children_within(paths.BROKER_IDS, timeout_s)
        except ZooKeeperClientTimeout:
            return True
        return any(
            broker_id is not None and broker_id != self.broker_id
            for broker_id in map(paths.parse_broker_id, children or ())
        )

    def _ask_controller_to_shut_down(self) -> int | None:
        """One attempt: the remaining partitions the controller answered, or None. Each
        ZooKeeper read waits at most zookeeper.connection.timeout.ms (for a connection
        and its answer), then raises ZooKeeperClientTimeout, as Kafka's does."""
        zk_timeout_s = self.config.zookeeper_connection_timeout_ms / 1000
        controller_id, _ = read_controller(self.zk, timeout_s=zk_timeout_s)
        if controller_id < 0:
            return None
        endpoint = self._endpoint_of(controller_id)
        if endpoint is None:
            got = self.zk.get_within(paths.broker(controller_id), zk_timeout_s)
            if got is None:
                return None
            # Its inter-broker listener, as Kafka's doControlledShutdown connects to
            # broker.node(interBrokerListenerName): the first advertised endpoint may be
            # an address for outside clients that brokers do not reach.
            reg = decode_broker(controller_id, got[0])
            endpoint = reg.address(self.config.inter_broker_listener_name)
        # Kafka's request.timeout.ms, and the wait the controller adds after its work
        # (for the brokers to apply the moves), which Kafka's answer does not have: an
        # attempt times out only where Kafka's would.
        timeout = self.config.request_timeout_ms / 1000 + CONTROLLED_SHUTDOWN_APPLIED_WAIT_S
        with KafkaConnection(
            *endpoint,
            client_id=f"broker-{self.broker_id}",
            timeout_s=timeout,
            # Kafka's awaitReady: the connection within controller.socket.timeout.ms.
            connect_timeout_s=self.config.controller_socket_timeout_ms / 1000,
        ) as conn:
            response = conn.request(
                ApiKey.CONTROLLED_SHUTDOWN,
                3,
                {"broker_id": self.broker_id, "broker_epoch": self.broker_epoch},
            )
        code = response["error_code"]
        if code != ErrorCode.NONE:
            log.warning(
                "controller %d refused the controlled shutdown: %s",
                controller_id,
                ErrorCode.of(code).name,
            )
            return None
        return len(response["remaining_partitions"])

    def shutdown(self) -> bool:
        """Stop, in Kafka's order. A step that fails is logged and the others still run
        (Kafka's KafkaServer.shutdown swallows each step's error): a log directory that
        cannot be flushed must not keep the registration in ZooKeeper until the session
        times out. Returns whether every step succeeded (if not, no clean-shutdown marker
        was written where the logs failed, and the next start recovers them)."""
        with self._shutdown_lock:
            if self._shut_down:
                return True
            self._shut_down = True
        # A registration waiting for ZooKeeper (the controller's thread re-registers after
        # a new session) gives up: nothing is to be registered any more.
        self.stop_requested.set()
        log.info("broker %d shutting down", self.broker_id)
        self._shutting_down.set()
        # Only once started, as Kafka's (startupComplete && controlled.shutdown.enable),
        # whether or not ZooKeeper is connected right now: a blip is waited out within
        # each attempt (zookeeper.connection.timeout.ms), as Kafka's getControllerId does.
        if self.config.controlled_shutdown_enable and self.startup_complete.is_set():
            self.controlled_shutdown()
        self._status_stop.set()
        failed = [
            what
            for what, step in (
                ("the listeners", self._stop_socket_servers),
                ("the group coordinator", self.groups.close),
                ("the config change listener", self.config_changes.close),
                ("the replica fetchers", self.fetchers.close),
                ("the replica manager", self.replicas.close),
                # Checkpoints, then the clean-shutdown marker.
                ("the logs", self.logs.close if self.logs is not None else _nothing),
                ("the controller", self.controller.shutdown),
                # Closing the session removes /brokers/ids/<id> (and /controller) at once.
                ("the ZooKeeper session", self.zk.close),
            )
            if not _stopped(what, step)
        ]
        if self.config.log_dirs:
            with contextlib.suppress(OSError):
                status = self.status()
                status["stopped_at"] = time.time()
                write_json_atomically(Path(self.config.log_dirs[0]) / STATUS_FILE, status)
        self.state_log.close()
        # The locks the logs did not take over (a start that failed before them).
        self._dir_locks.release()
        if failed:
            log.error(
                "broker %d stopped; could not stop cleanly: %s", self.broker_id, ", ".join(failed)
            )
        else:
            log.info("broker %d stopped", self.broker_id)
        return not failed


def _nothing() -> None:
    pass


# How long a broker whose every log directory failed waits for ZooKeeper to close its
# session before it halts anyway.
_HALT_WATCHDOG_S = 5.0


def _halt() -> None:
    """Exit 1 at once (Kafka's Exit.halt): no shutdown hooks, no other thread waited for."""
    logging.shutdown()
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    os._exit(1)


def _stopped(what: str, step: Callable[[], object]) -> bool:
    try:
        step()
    except Exception:
        log.exception("shutdown: stopping %s failed", what)
        return False
    return True


def group_limits(config: BrokerConfig) -> GroupLimits:
    """The group coordinator's bounds, from the broker's group.* settings."""
    return GroupLimits(
        min_session_timeout_ms=config.group_min_session_timeout_ms,
        max_session_timeout_ms=config.group_max_session_timeout_ms,
        initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
        max_size=config.group_max_size,
    )


def replace_broker_id(config: BrokerConfig, broker_id: int) -> BrokerConfig:
    return dataclasses.replace(config, broker_id=broker_id)


# glibc's mallopt parameter for the number of malloc arenas (malloc.h: M_ARENA_MAX).
_M_ARENA_MAX = -8
MALLOC_ARENAS = 2


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Few malloc arenas for the broker's threads (glibc makes up to 8 per core): each
    arena keeps its own free memory, and a broker's threads take turns making large
    transient requests. A broker that led every partition during a cold start with
    30,000 partitions kept 163-192 MB with the default, 139-155 MB with two (the others
    91-128 and 91-117 MB). Call before threads start; MALLOC_ARENA_MAX in the environment
    wins. True if set."""
    libc = _glibc()
    if "MALLOC_ARENA_MAX" in os.environ or libc is None:
        return False
    return bool(libc.mallopt(_M_ARENA_MAX, arenas))


# A broker holds hundreds of thousands of long-lived, acyclic objects (partition states);
# the default thresholds make the cyclic collector rescan them constantly (a
# 100,000-partition failover ran 1.5x slower). Reference counting frees them anyway.
GC_THRESHOLDS = (100_000, 50, 100)


def set_gc_thresholds() -> None:
    """The cyclic collector's thresholds a broker runs with (GC_THRESHOLDS); a benchmark
    of the controller's work in one process sets them too, to time what a broker does."""
    gc.set_threshold(*GC_THRESHOLDS)


# A thread that wants the GIL asks the holder to drop it only after the switch interval
# (Python's default: 5 ms). The controller's event thread and the ZooKeeper client's I/O
# thread block on the network many times an event (each batch of reads or writes, each
# answer awaited) and must then get the GIL back from this broker's own busy threads (a
# request handler applying a LeaderAndIsr of 10,000s of partitions, fetch sessions): up to
# 5 ms a wait. At 1 ms, in runs alternating with the default (benchmarks/, two each): a
# 100K failover's median 2.08 and 2.13 s against 2.47 and 2.32 s, the loss of a broker
# leading 10K 0.89 and 0.87 s against 1.03 and 1.00 s; produce throughput unchanged.
SWITCH_INTERVAL_S = 0.001


def set_switch_interval() -> None:
    """The GIL switch interval a broker runs with (SWITCH_INTERVAL_S)."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)


def _return_free_memory() -> None:
    """Give freed heap back to the OS (glibc keeps it otherwise): after a failover's large
    transient requests, a broker would go on holding its peak memory for good. Every
    second: it took 0.2-0.9 ms in brokers of 100,000 partitions (2026-11-29), and done
    every 10 s it left a transient's pages resident for up to 10 s (a cold start's first
    controller sampled at 267.7 or 279.7 MB depending on the second)."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
