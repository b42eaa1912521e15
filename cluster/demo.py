"""`zkctl demo`: a local cluster that shows its controller failing over, again and again.

It provisions ZooKeeper as the project does everywhere, starts brokers as child processes
(so that nothing outlives the demo, even on Ctrl-C), creates a topic, and every few
seconds takes the controller down, cycling through four ways a controller fails: SIGKILL
(the session expires), a graceful stop (controlled shutdown, the session closes at once),
SIGSTOP (a zombie: paused past its session, then resumed; idle while paused, it has
nothing queued to send, finds its session gone and resigns, having written nothing), and a
network partition from ZooKeeper (each broker reaches ZooKeeper through a proxy of the
demo's, see cluster/netsplit.py: cut off, the controller keeps running, resigns on its own
once ZooKeeper has been out of reach for a session, and registers again when the link
heals).

What happens is shown by the watch view (watch/): full-screen on a terminal, plain
timestamped lines otherwise. The view starts before the brokers, so it shows the cluster
coming up, and it follows ZooKeeper, so it shows what any observer could see. The demo adds
its own actions ("demo" lines) and what only the brokers know, from their state-change logs
("log" lines): why a controller resigned, how long its failover took, and any request a
broker refused for its stale controller epoch (tests/integration/test_controller_failover.py
shows brokers refusing a zombie's epoch).
"""

from __future__ import annotations

import contextlib
import functools
import json
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO, TypeVar

from admin import topics as admin_topics
from broker.state_change_log import LogReader
from cluster import netsplit
from cluster import zookeeper as zkp
from cluster.local import LocalClusterError
from cluster.supervised import SupervisedCluster, wait_for
from watch.model import fmt_count
from watch.session import Watcher

Say = Callable[[str], None]
T = TypeVar("T")

FAULTS = ("kill", "stop", "pause", "cut")
DEMO_TOPIC = "demo"

DEFAULT_SETTINGS = {
    # Short sessions and backoffs keep each failover a few seconds long.
    "zookeeper.session.timeout.ms": "4000",
    "controlled.shutdown.retry.backoff.ms": "300",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "300",
    "leader.imbalance.check.interval.seconds": "10",
}

ACTIONS = {
    "kill": ("SIGKILL", "SIGKILL the controller"),
    "stop": ("graceful stop", "stop the controller gracefully (controlled shutdown)"),
    "pause": ("SIGSTOP", "SIGSTOP the controller (it becomes a zombie)"),
    "cut": (
        "cut from ZooKeeper",
        "cut the controller off from ZooKeeper (a network partition; it keeps running)",
    ),
}


class DemoError(LocalClusterError):
    """The demo could not go on; the message says why and where the logs are."""


class Workload(Protocol):
    """Traffic kept running through the failovers: a producer and a consumer on the topic
    (cluster.demo_workload.ClientWorkload). The demo starts it once the topic is online,
    keeps it running through every failover, and stops it before tearing the cluster down.
    `note` puts a line on the demo's timeline."""

    def start(self, cluster: SupervisedCluster, topic: str, note: Say) -> None: ...

    def stop(self, interrupted: bool = False) -> None: ...


@dataclass
class DemoOptions:
    brokers: int = 3
    duration_s: float | None = None
    interval_s: float = 6.0
    directory: Path = Path(".zkctl/demo")
    zookeeper: str | None = None
    session_timeout_ms: int = 4000
    partitions: int = 6
    view: str = "plain"  # "curses": the full-screen watch view; "plain": timestamped lines
    workload: Callable[[], Workload] | None = None
    settings: dict[str, str] = field(default_factory=dict)  # more broker settings
    faults: tuple[str, ...] = FAULTS  # the cycle, each one of FAULTS
    stdout: TextIO | None = None  # what `say` writes to, polled for its reader gone


# --- what the brokers' state-change logs add to the view ------------------------------------


def describe_event(r: dict[str, Any]) -> str | None:
    """A line for a state-change log record that says what ZooKeeper cannot (why a
    controller resigned, how long its failover took, fencing at work); None for records
    the watch view already shows from ZooKeeper (elections, leaders, ISRs, brokers)."""
    b = r.get("broker")
    kind = r.get("event")
    if kind == "controller_resigned":
        return f"broker {b} resigned as controller of epoch {r['controller_epoch']} ({r['reason']})"
    if kind == "controller_failover":
        return (
            f"controller {b} loaded {fmt_count(r['partitions'], 'partition')} and"
            f" {fmt_count(r['live_brokers'], 'broker')} "
            f"in {r['load_ms']:.0f} ms (failover done in {r['total_ms']:.0f} ms)"
        )
    if kind == "request_rejected":
        return (
            f"broker {b} refused {r['api']} from controller {r['controller_id']} "
            f"(epoch {r['controller_epoch']}): {r['error']}"
        )
    if kind == "leader_and_isr" and r.get("result") == "rejected":
        return (
            f"broker {b} refused the state of {r['topic']}-{r['partition']} from controller "
            f"{r['controller_id']} epoch {r['controller_epoch']}: {r['error']}"
        )
    if kind == "zookeeper_session" and r.get("state") == "LOST":
        return f"broker {b} learns that its ZooKeeper session expired"
    if kind == "controlled_shutdown":
        remaining = r.get("remaining")
        outcome = "failed" if remaining is None else f"{remaining} partitions still led"
        return (
            f"broker {b} asked the controller to move its leaderships away"
            f" (attempt {r['attempt']}: {outcome}, {r['ms']:.0f} ms)"
        )
    return None


class LogFollower:
    """Follows every broker's state-change log and notes the records worth showing."""

    def __init__(self, log_dirs: list[Path], note: Callable[[str, float], None]) -> None:
        # Each broker's log directory: its state-change.log and the files rolled from it.
        self.readers = [LogReader(d) for d in log_dirs]
        self.note = note
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-logs", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.flush()

    def _read_new(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for reader in self.readers:
            for line in reader.read_new():
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    continue
        rows.sort(key=lambda r: r.get("ts", 0))
        return rows

    def flush(self) -> None:
        for r in self._read_new():
            try:
                line = describe_event(r)
            except (KeyError, TypeError, ValueError):
                continue  # a record of another schema: not worth stopping the demo for
            if line is not None:
                self.note(line, float(r.get("ts", 0)) / 1000)

    def _run(self) -> None:
        # The logs are files, not znodes: read what was appended, five times a second.
        while not self._stop.wait(0.2):
            try:
                self.flush()
            except OSError as e:
                self.note(f"(cannot read a state-change log: {e})", time.time())


# --- the view -------------------------------------------------------------------------------


class DemoView:
    """The watch view on its own thread, while the main thread runs the demo.

    The main thread starts and signals the brokers (their death signal follows the thread
    that started them), and a Ctrl-C reaches it wherever it waits; q in the full-screen
    view interrupts it the same way.
    """

    def __init__(self, watcher: Watcher, mode: str, say: Say, stdout: TextIO | None = None) -> None:
        self.watcher = watcher
        self.mode = mode
        self.say = say
        # What `say` writes to: the plain lines poll it, a pipe, for its reader gone (a
        # quiet stretch between failovers writes nothing that would raise BrokenPipeError).
        self.stdout = stdout
        self.quit_requested = False
        # What ended the view early (a BrokenPipeError from `zkctl demo | head`): the main
        # thread is interrupted as by q, and run_demo raises it once everything is stopped.
        self.failure: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-view", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def note(self, text: str, severity: str = "info") -> None:
        self.watcher.note(text, severity=severity)

    def _run(self) -> None:
        try:
            self._show()
        except BaseException as e:
            self.failure = e
            if not self._stop.is_set():  # not already being closed: end the demo
                _interrupt_main_thread()

    def _show(self) -> None:
        from watch import render_plain

        if self.mode == "curses":
            import curses

            from watch import render_curses

            def fell_back(e: curses.error) -> None:
                self.say(f"(the full-screen view failed: {e}; plain lines instead)")
                self.mode = "plain"

            result = render_curses.run_or_plain(
                self.watcher, self.say, fell_back=fell_back, stop=self._stop
            )
            if result == "quit":
                self.quit_requested = True
                _interrupt_main_thread()
            return
        render_plain.run(self.watcher, self.say, stop=self._stop, stdout=self.stdout)

    def close(self) -> None:
        from watch.screen import format_event

        self._stop.set()
        self._thread.join(10)
        if self.mode == "curses":
            # What was noted after the view stopped drawing (the clients' verdict, noted
            # as the workload stops after a q) is still on the queue: apply it first.
            self.watcher.pump(0)
            # The screen is gone: leave the story of the controller on the terminal.
            story = [
                e for e in self.watcher.state.timeline if e.kind in ("controller", "demo", "log")
            ]
            for event in story[-60:]:
                self.say(format_event(event))


def _interrupt_main_thread() -> None:
    """Raise KeyboardInterrupt in the main thread, as Ctrl-C does, wherever it waits: by
    SIGINT, or by SIGTERM where SIGINT is not Python's (a job started in the background
    inherits it ignored; `zkctl demo` turns SIGTERM into KeyboardInterrupt)."""
    main = threading.main_thread().ident
    if main is None:
        return
    for sig in (signal.SIGINT, signal.SIGTERM):
        if callable(signal.getsignal(sig)):
            signal.pthread_kill(main, sig)
            return


# --- the demo -------------------------------------------------------------------------------


@contextlib.contextmanager
def _zookeeper(options: DemoOptions, root: Path, say: Say) -> Iterator[str]:
    """A connect string with a chroot of the demo's own, and its cleanup."""
    with ExitStack() as stack:
        external = bool(options.zookeeper)
        if options.zookeeper:
            base = options.zookeeper
            say(f"using ZooKeeper at {base}")
        else:
            zk = zkp.provision(
                base_dir=root / "zookeeper", progress=lambda m: say(f"[zookeeper] {m}")
            )
            stack.callback(zk.close)
            base = zk.connect_string
        try:
            # Unique, not just by the second: two demos may share an external ZooKeeper.
            chroot = f"/zkctl-demo-{int(time.time())}-{secrets.token_hex(4)}"
            connect = zkp.chroot_connect_string(base, chroot)
        except Exception as e:
            hint = (
                "; is it running? Leave out --zookeeper (and ZKCTL_ZOOKEEPER) and the demo"
                " starts a ZooKeeper of its own"
                if external
                else ""
            )
            raise DemoError(
                f"cannot use ZooKeeper at {base} ({type(e).__name__}: {e}){hint}"
            ) from None
        if external:
            # Leave the user's ZooKeeper as we found it.
            stack.callback(lambda: _suppressed(zkp.delete_chroot, connect))
        yield connect


def _suppressed(fn: Callable[[str], None], arg: str) -> None:
    with contextlib.suppress(Exception):
        fn(arg)


def run_demo(options: DemoOptions, say: Say) -> int:
    """Run the demo until `options.duration_s` passes and at least one failover was shown
    (or Ctrl-C); 0 when it ended by itself or by q. Whatever it started is stopped before
    it returns or raises."""
    from zkdata.client import ZkClient

    deadline = None if options.duration_s is None else time.monotonic() + options.duration_s
    root = (options.directory / time.strftime("run-%Y%m%d-%H%M%S")).resolve()
    view: DemoView | None = None
    cycle = 0
    try:
        with ExitStack() as stack:
            connect = stack.enter_context(_zookeeper(options, root, say))
            settings = {
                **DEFAULT_SETTINGS,
                "zookeeper.session.timeout.ms": str(options.session_timeout_ms),
                **options.settings,
            }
            # The view's own ZooKeeper session, then the brokers (closed in reverse order:
            # the view stops before the brokers are killed, the brokers before ZooKeeper).
            watch_zk = ZkClient(connect, session_timeout_ms=10_000)
            watch_zk.start()
            stack.callback(watch_zk.close)
            watcher = Watcher(watch_zk, title=f"{connect}  (zkctl demo)")
            watcher.start()
            stack.callback(watcher.stop)
            # The view sees the first election happen, rather than finding its result.
            watcher.wait_ready(30)
            cluster = SupervisedCluster(connect, root, range(1, options.brokers + 1), settings)
            stack.callback(cluster.close)
            # Each broker's path to ZooKeeper, for the network partition (the brokers are
            # killed before the links close).
            links = stack.enter_context(netsplit.linked(cluster))
            view = DemoView(watcher, options.view, say, stdout=options.stdout)
            view.start()
            stack.callback(view.close)
            note = view.note
            follower = LogFollower(
                [b.data_dir for b in cluster.brokers.values()],
                lambda text, ts: watcher.note(text, ts=ts, source="log"),
            )
            follower.start()
            stack.callback(follower.stop)

            ends = ""
            if options.duration_s is not None:
                end_time = time.localtime(time.time() + options.duration_s)
                ends = f"; ends at {time.strftime('%H:%M:%S', end_time)}"
            stop_hint = "Ctrl-C stops it and cleans up"
            if options.view == "curses":
                stop_hint = "Ctrl-C or q stops it and cleans up"
            watcher.set_banner(f"zkctl demo: starting {options.brokers} brokers{ends}; {stop_hint}")
            note(f"starting {options.brokers} brokers (data and logs in {root})")
            note("waiting for the brokers to register and elect a controller ...")
            cluster.start(wait=False)
            _checked(root, lambda: cluster.wait_registered(cluster.brokers, timeout=120))
            controller_id, epoch = _checked(root, lambda: cluster.wait_controller(timeout=120))
            note(f"all brokers registered; broker {controller_id} is controller, epoch {epoch}")

            rf = min(3, options.brokers)
            admin_topics.create_topic(
                cluster.zk,
                admin_topics.CreateTopicRequest(
                    DEMO_TOPIC, partitions=options.partitions, replication_factor=rf
                ),
            )
            _checked(root, lambda: cluster.wait_topic_online(DEMO_TOPIC))
            note(
                f"created topic {DEMO_TOPIC!r}: {options.partitions} partitions, "
                f"replication factor {rf}"
            )
            if options.workload is not None:
                workload = options.workload()
                workload.start(cluster, DEMO_TOPIC, note)
                # Stopped first (before the view and the brokers); quickly after a Ctrl-C.
                stack.push(lambda exc_type, *_: workload.stop(interrupted=exc_type is not None))

            # At least one failover, however long the start-up took: it is what the demo
            # is for (a loaded machine can take longer than a short --duration to start).
            while cycle == 0 or deadline is None or time.monotonic() < deadline:
                fault = options.faults[cycle % len(options.faults)]
                cycle += 1
                _checked(
                    root,
                    functools.partial(_failover, cluster, links, fault, cycle, note, watcher),
                )
                watcher.request_summary()
                watcher.set_banner(
                    f"zkctl demo: {cycle} failover{'s' if cycle > 1 else ''} done; the next in"
                    f" {options.interval_s:g} s{ends}; {stop_hint}"
                )
                pause_until = time.monotonic() + options.interval_s
                if deadline is not None:
                    pause_until = min(pause_until, deadline)
                while time.monotonic() < pause_until:
                    time.sleep(0.2)
            note("time is up; stopping everything")
    except KeyboardInterrupt:
        if view is not None and view.failure is not None:
            # The view failed (its reader went away): everything is stopped; say why.
            raise view.failure from None
        if view is None or not view.quit_requested:
            raise
    failovers = f"{cycle} failover{'' if cycle == 1 else 's'}"
    say(f"demo over after {failovers}; nothing it started is running")
    return 0


def _checked(root: Path, step: Callable[[], T]) -> T:
    """A step whose failure (a broker that died, a wait that timed out) ends the demo with
    a message that says where to look."""
    try:
        return step()
    except zkp.ZooKeeperError:
        raise
    except (RuntimeError, AssertionError) as e:
        raise DemoError(f"{e}\nthe brokers' output and logs are in {root}") from None


def _failover_record(
    cluster: SupervisedCluster, broker_id: int, epoch: int, timeout_s: float
) -> dict[str, Any] | None:
    """The broker's controller_failover record of ``epoch`` (its failover done), waiting up
    to ``timeout_s`` for it; None if it never came (the term ended first)."""
    deadline = time.monotonic() + timeout_s
    while True:
        for r in cluster[broker_id].state_changes("controller_failover"):
            if r["controller_epoch"] == epoch:
                return r
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def _failover(
    cluster: SupervisedCluster,
    links: dict[int, netsplit.ZooKeeperLink],
    fault: str,
    cycle: int,
    say: Say,
    watcher: Watcher,
) -> None:
    controller_id, epoch = cluster.wait_controller(timeout=120)
    victim = cluster[controller_id]
    verb, action = ACTIONS[fault]
    say(f"--- failover {cycle}: {action}: broker {controller_id}, epoch {epoch} ---")
    # ZooKeeper sees nothing until the session ends (at once for a graceful stop, after the
    # session timeout otherwise): the banner's clock shows that wait.
    what = {
        "kill": "was SIGKILLed",
        "stop": "was told to stop (SIGTERM)",
        "pause": "was SIGSTOPped",
        "cut": "was cut off from ZooKeeper (it still runs)",
    }[fault]
    wait = (
        ""
        if fault == "stop"
        else f"; ZooKeeper sees it alive until its {cluster.session_timeout_s:g} s session ends"
    )
    watcher.set_banner(
        f"zkctl demo: failover {cycle}: the controller, broker {controller_id} (epoch {epoch}),"
        f" {what} {{elapsed}} ago{wait}",
        since=time.time(),
    )
    started = time.time()  # the brokers' state-change logs have wall-clock times
    if fault == "kill":
        victim.kill()
    elif fault == "stop":
        victim.terminate()
    elif fault == "cut":
        links[controller_id].cut()
    else:
        victim.pause()
    new_id, new_epoch = cluster.wait_controller(
        not_id=controller_id, min_epoch=epoch + 1, timeout=120
    )
    seen_s = time.time() - started
    # Taken over when its failover is done, by its own state-change log: the broker's
    # status file, which wait_controller reads, is rewritten only once a second. A term
    # that ended before its failover did (a ZooKeeper error: item 35) has no such record:
    # the status file's moment stands then.
    done = _failover_record(cluster, new_id, new_epoch, timeout_s=10.0)
    elapsed = float(done["ts"]) / 1000 - started if done is not None else seen_s
    say(
        f"broker {new_id} took over as controller, epoch {new_epoch}, "
        f"{elapsed:.1f} s after the {verb}"
    )
    watcher.set_banner(
        f"zkctl demo: failover {cycle}: broker {new_id} took over (epoch {new_epoch})"
        f" {elapsed:.1f} s after the {verb}; bringing broker {controller_id} back"
    )
    if fault == "pause":
        # Let the new controller act, then wake the zombie: it finds its session gone.
        time.sleep(1.0)
        say(f"resuming the zombie, broker {controller_id}: it still believes it is controller")
        victim.resume()
        wait_for(
            lambda: any(
                r["controller_epoch"] == epoch for r in victim.state_changes("controller_resigned")
            ),
            60,
            "the zombie to resign",
        )
    elif fault == "cut":
        # Never told that its session expired, it must stop acting on its own.
        say(
            f"broker {controller_id} still runs, cut off: it resigns once ZooKeeper has been"
            " out of reach for a session"
        )
        wait_for(
            lambda: any(
                r["controller_epoch"] == epoch for r in victim.state_changes("controller_resigned")
            ),
            cluster.session_timeout_s + 60,
            "the cut-off controller to resign",
        )
        say(f"healing broker {controller_id}'s link: it finds its session gone and registers again")
        links[controller_id].heal()
    else:
        if victim.alive():
            victim.wait_exit(60)
        say(f"restarting broker {controller_id}")
        victim.start()
    cluster.wait_registered([controller_id], timeout=120)
    # The returning broker catches up and rejoins the ISRs (the leaders add it back).
    wait_for(lambda: isr_complete(cluster), 60, "the ISRs to fill up again")


def isr_complete(cluster: SupervisedCluster) -> bool:
    assignment = cluster.assignment(DEMO_TOPIC)
    if assignment is None:
        return False
    states = cluster.partition_states(DEMO_TOPIC)
    return all(set(r) <= set(states[p].isr) for p, r in assignment.partitions.items())
