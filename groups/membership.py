"""A consumer group's membership protocol (Kafka's GroupMetadata and the state changes of
its GroupCoordinator), as a pure state machine: no threads, no clocks, no I/O.

Each operation takes the time (`now_ms`) and returns `Answers`: the JoinGroup and
SyncGroup responses it completes, keyed by member id, the caller's own among them when it
is answered at once. A member whose request is not in the answers waits; the shell (the
coordinator) holds its request until a later operation or `tick` answers it.

`now_ms` is a monotonic clock's time, for every deadline (sessions, join and sync phases,
pending members), as Kafka times them in its purgatories on System.nanoTime: a step of the
wall clock neither stalls nor fires them. The operations that can leave the group Empty
also take `wall_ms`, the wall clock's time, which is what the group records (when it
became Empty: written in its metadata record, counted from by offsets retention), as does
`to_metadata`. A caller with one clock (the tests) may leave `wall_ms` out: it is `now_ms`.

The states are Kafka's: Empty (no members; offsets may still be committed), PreparingRebalance
(members are rejoining; the join phase ends when every known member has, and every member
told MEMBER_ID_REQUIRED joined or expired, or at the rebalance timeout, dropping those that
did not), CompletingRebalance (the new generation is formed and
the leader computes the assignment; it ends at the leader's SyncGroup), Stable, and Dead
(the group's partition moved away from this coordinator). Each member of a generation owes
a SyncGroup within the rebalance timeout of its start, the group Stable by then or not:
those that sent none are dropped then, and the group rebalances.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

from groups.offset_records import NO_TIMESTAMP, GroupMetadata, MemberMetadata
from groups.retention import CONSUMER_PROTOCOL, subscribed_topics
from wire.errors import ErrorCode

# How long a new member (one whose first JoinGroup made it a member) may wait in a join
# phase before it is removed (Kafka's GroupCoordinator.NewMemberJoinTimeoutMs): it cannot
# heartbeat yet, and a client that went away during a long rebalance and joined again
# would otherwise leave defunct members in it, taken into the next generation.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class GroupLimits:
    """The broker's bounds on a member's session (group.min/max.session.timeout.ms), how
    long a new group waits for more members (group.initial.rebalance.delay.ms) and how
    many members a group takes (group.max.size)."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1


@dataclass(frozen=True)
class JoinAnswer:
    error: ErrorCode
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    # The leader's answer lists every member with its metadata for the chosen protocol,
    # and (in the same order, when any is static) each one's group instance id, None for
    # a dynamic member.
    members: tuple[tuple[str, bytes], ...] = ()
    instance_ids: tuple[str | None, ...] = ()


@dataclass(frozen=True)
class SyncAnswer:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True)
class StaticReplacement:
    """A static member that rejoined a Stable group under a new member id, its
    assignment kept (KIP-345): the group is written before it is answered, and put back
    as it was if the write fails (`static_replacement_failed`)."""

    group_instance_id: str
    old_member_id: str
    new_member_id: str
    old_protocols: tuple[tuple[str, bytes], ...]


@dataclass
class Answers:
    joins: dict[str, JoinAnswer] = field(default_factory=dict)
    syncs: dict[str, SyncAnswer] = field(default_factory=dict)
    # A group that persists its assignments: the leader's assignment is to be written
    # (`to_metadata`), then `assignment_stored` or `assignment_store_failed` called.
    store: bool = False
    # Set: the group is to be written before ``joins`` are delivered.
    replacement: StaticReplacement | None = None

    def __bool__(self) -> bool:
        return bool(self.joins or self.syncs or self.store or self.replacement)


class UnexpectedPendingMember(Exception):
    """A JoinGroup or LeaveGroup naming a group instance id for a member told
    MEMBER_ID_REQUIRED, which only a dynamic member is: Kafka 2.8's GroupCoordinator
    (doJoinGroup, handleLeaveGroup) throws IllegalStateException there, and KafkaApis
    answers the request with its error response, UNKNOWN_SERVER_ERROR. Raised with nothing
    of that member changed (it stays pending); ``answers`` are those of what the request
    did before it (the members a LeaveGroup named first, who left), to be delivered all
    the same."""

    def __init__(self, message: str, answers: Answers | None = None) -> None:
        super().__init__(message)
        self.answers = answers if answers is not None else Answers()


@dataclass
class Member:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    # (name, metadata), in the member's order of preference.
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    awaiting_join: bool = False
    awaiting_sync: bool = False
    # When the member is dropped unless it heartbeats (or syncs, commits) again; a
    # known member's JoinGroup renews it only when the join phase it waited in ends.
    heartbeat_deadline_ms: int = 0
    # A static member's group.instance.id (KIP-345): it keeps its place across restarts.
    group_instance_id: str | None = None
    # Joined, and no join phase completed since (Kafka's isNew): its deadline, from its
    # first JoinGroup plus NEW_MEMBER_JOIN_TIMEOUT_MS (a session from a heartbeat), runs
    # while it waits in the join phase too.
    is_new: bool = False

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise KeyError(protocol)


class Group:
    """One group's membership. `generation_id` only grows; `leader` is always a member
    (or "" when there is none).

    Static members (KIP-345, a ``group.instance.id``): one that rejoins without its
    member id (it restarted) takes its old place under a new id, and in a Stable group
    whose protocol stays the same keeps its assignment without a rebalance; its old id
    is fenced (FENCED_INSTANCE_ID). A join phase does not drop a static member that has
    not rejoined: only its session timeout does."""

    def __init__(
        self, group_id: str, limits: GroupLimits | None = None, *, persist: bool = False
    ) -> None:
        self.group_id = group_id
        self.limits = limits or GroupLimits()
        # Whether a generation's assignment is written before its members get it (the
        # coordinator's groups, as Kafka's storeGroup); the leader's SyncGroup then
        # leaves the group CompletingRebalance until the write is done.
        self.persist = persist
        self.storing: dict[str, bytes] | None = None
        # The generation last written (or read back): an Empty group of a later one
        # is written too, so a new coordinator does not bring back members that left.
        self.persisted_generation = 0
        self.state = GroupState.EMPTY
        # When the group last became Empty (its offsets expire counting from then); None
        # while it never had a generation (a consumer committing alone: from each commit).
        self.empty_since_ms: int | None = None
        # The wall clock's time of the group's last change of state (Kafka's
        # currentStateTimestamp), which its metadata record carries; a group read back
        # has its record's, None if that had none (-1), until its next change.
        self.state_since_ms: int | None = None
        # The topics the generation's members subscribe to, read from their metadata
        # when it started (Kafka's subscribedTopics, set by initNextGeneration and
        # loadGroup): offsets retention keeps a Stable consumer group's offsets of them.
        # None: unknown (not a consumer group, or a subscription that does not parse).
        self.subscribed_topics: frozenset[str] | None = None
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader = ""
        self.members: dict[str, Member] = {}
        # group instance id -> member id, for the static members.
        self.static_members: dict[str, str] = {}
        # Members told MEMBER_ID_REQUIRED (JoinGroup v4+) that have not rejoined yet:
        # member id -> deadline; the join phase waits for them, as for known members.
        self.pending_members: dict[str, int] = {}
        # PreparingRebalance: when the join phase ends at the latest. One from Empty
        # (Kafka's InitialDelayedJoin) ends only then: it waits initial_rebalance_delay_ms
        # whole; if a new member joined meanwhile (new_member_added: only at generation
        # 0, as Kafka's addMemberAndRebalance marks it), another delay from its end, of
        # no more than initial_join_remaining_ms, what the rebalance timeout leaves after
        # the delays so far; and so on. None: a phase of another kind.
        self.join_deadline_ms = 0
        self.initial_join_remaining_ms: int | None = None
        # (Cleared only by an extension, as Kafka's: a phase that ended with nothing left
        # to extend by leaves it set for the next one from Empty.)
        self.new_member_added = False
        # The members of the generation that have not sent SyncGroup since it was formed
        # (Kafka's pendingSyncMembers): at sync_deadline_ms, its start plus the rebalance
        # timeout, those still here are dropped and the group rebalances, whether it is
        # CompletingRebalance or Stable by then (Kafka's DelayedSync).
        self.pending_sync: set[str] = set()
        self.sync_deadline_ms = 0

    # --- queries ---------------------------------------------------------------------

    def is_empty(self) -> bool:
        return not self.members

    def fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        """Whether ``group_instance_id`` is a static member's under another member id
        (Kafka's isStaticMemberFenced): the caller is an older instance of it."""
        if group_instance_id is None:
            return False
        return self.static_members.get(group_instance_id, member_id) != member_id

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        sets = [set(m.protocol_names()) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def _supports(self, protocol_type: str, protocols: Iterable[str]) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(list(protocols))
        if not self.members:
            # (PreparingRebalance whose last member left: Kafka's supportsProtocols keeps
            # the group's protocol type, and any protocol is one all of no member have.)
            return protocol_type == self.protocol_type and bool(list(protocols))
        return protocol_type == self.protocol_type and bool(
            self.candidate_protocols() & set(protocols)
        )

    def select_protocol(self) -> str:
        """Each member votes for the first of its protocols every member supports; the
        most votes win, ties going to the earlier choice in the first member's order."""
        candidates = self.candidate_protocols()
        members = list(self.members.values())
        votes: dict[str, int] = {}
        for m in members:
            choice = next(name for name in m.protocol_names() if name in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        order = [n for n in members[0].protocol_names() if n in candidates]
        return max(order, key=lambda name: (votes.get(name, 0), -order.index(name)))

    def _all_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def rebalance_timeout_ms(self) -> int:
        """How long a join or sync phase waits: the members' largest rebalance timeout,
        folded from 0 (Kafka's GroupMetadata.rebalanceTimeoutMs), so a negative one (kept
        from a JoinGroup v1+, as Kafka keeps it) times the phase as 0: it ends at once."""
        return max([0, *(m.rebalance_timeout_ms for m in self.members.values())])

    # --- JoinGroup -------------------------------------------------------------------

    def join(
        self,
        *,
        member_id: str,
        new_member_id: str,
        require_known_member_id: bool,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: tuple[tuple[str, bytes], ...],
        now_ms: int,
        group_instance_id: str | None = None,
        wall_ms: int | None = None,
    ) -> Answers:
        """A JoinGroup. ``new_member_id`` is the id a member joining without one gets."""
        answers = Answers()
        wall = now_ms if wall_ms is None else wall_ms
        key = member_id or new_member_id

        def refuse(error: ErrorCode) -> Answers:
            answers.joins[key] = JoinAnswer(error, member_id=member_id)
            return answers

        limits = self.limits
        if not (
            limits.min_session_timeout_ms <= session_timeout_ms <= limits.max_session_timeout_ms
        ):
            return refuse(ErrorCode.INVALID_SESSION_TIMEOUT)
        if not self._accepts_joining_member(member_id):
            # A known member refused is one that has not rejoined the rebalance: it leaves
            # the group (Kafka's handleJoinGroup: group.remove, then an answer with no id).
            if member_id in self.members:
                self._remove(member_id, now_ms, wall, answers)
            answers.joins[key] = JoinAnswer(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id="")
            return answers
        if self.state is GroupState.DEAD:
            return refuse(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        names = [name for name, _ in protocols]
        if not self._supports(protocol_type, names) or len(set(names)) != len(names):
            return refuse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if not member_id:
            old_member_id = (
                None if group_instance_id is None else self.static_members.get(group_instance_id)
            )
            if old_member_id is not None:
                assert group_instance_id is not None
                return self._replace_static_member(
                    group_instance_id,
                    old_member_id,
                    new_member_id,
                    protocols,
                    now_ms,
                    wall,
                    answers,
                )
            if require_known_member_id and group_instance_id is None:
                # KIP-394: the member gets its id first and joins with it, so a join
                # whose answer is lost leaves no member behind that nobody owns. (A
                # static member needs no such round: its instance id names it.)
                self.pending_members[new_member_id] = now_ms + session_timeout_ms
                answers.joins[new_member_id] = JoinAnswer(
                    ErrorCode.MEMBER_ID_REQUIRED, member_id=new_member_id
                )
                return answers
            member_id = new_member_id
        elif member_id in self.pending_members:
            # (Before the fencing check, as Kafka's doJoinGroup: a pending member is never
            # a static one.)
            if group_instance_id is not None:
                raise UnexpectedPendingMember(
                    f"the static member {group_instance_id!r} of group {self.group_id} was"
                    f" not expected to be a pending member, with member id {member_id!r}"
                )
            del self.pending_members[member_id]
        elif self.fenced(member_id, group_instance_id):
            return refuse(ErrorCode.FENCED_INSTANCE_ID)
        elif member_id not in self.members or (
            group_instance_id is not None and group_instance_id not in self.static_members
        ):
            # (A static member that joins with an id but an instance id this group does
            # not know: it starts again without its id, as Kafka tells it to.)
            return refuse(ErrorCode.UNKNOWN_MEMBER_ID)

        member = self.members.get(member_id)
        if member is None:
            if not self.members:
                # The first member sets the group's protocol type (Kafka's add()); the
                # type of the members gone before stays until then.
                self.protocol_type = protocol_type
            member = Member(
                member_id,
                client_id,
                client_host,
                session_timeout_ms,
                rebalance_timeout_ms,
                protocol_type,
                protocols,
                group_instance_id=group_instance_id,
            )
            self.members[member_id] = member
            if group_instance_id is not None:
                self.static_members[group_instance_id] = member_id
            if not self.leader:
                self.leader = member_id
            member.awaiting_join = True
            member.is_new = True
            member.heartbeat_deadline_ms = now_ms + NEW_MEMBER_JOIN_TIMEOUT_MS
            if self.state is GroupState.PREPARING_REBALANCE and self.generation_id == 0:
                self.new_member_added = True
            self._prepare_rebalance(now_ms, wall, answers)
            self._maybe_complete_join(now_ms, wall, answers)
            return answers

        same = member.protocols == protocols
        # A known member keeps the timeouts and client details of its first JoinGroup:
        # Kafka 2.8's MemberMetadata holds them as vals, and updateMember takes only the
        # protocols (a client sending others under the same member id is not served them).
        # A known member's JoinGroup does not renew its session (Kafka 2.8's doJoinGroup
        # and updateMemberAndRebalance schedule no heartbeat expiration): one answered at
        # once keeps the deadline of its last heartbeat; one that waits is not timed
        # meanwhile, and gets a session when the join phase ends (onCompleteJoin). A new
        # member's keeps its timeout from its first JoinGroup.
        if same and (
            self.state is GroupState.COMPLETING_REBALANCE
            or (self.state is GroupState.STABLE and member_id != self.leader)
        ):
            # A follower that lost its answer: the current generation again.
            answers.joins[member_id] = self._join_answer(member)
            return answers
        member.protocols = protocols
        member.awaiting_join = True
        self._prepare_rebalance(now_ms, wall, answers)
        self._maybe_complete_join(now_ms, wall, answers)
        return answers

    def _accepts_joining_member(self, member_id: str) -> bool:
        """Whether group.max.size leaves room for the JoinGroup of ``member_id`` ("": a
        new member, a static one coming back too), as Kafka 2.8's acceptJoiningMember."""
        member = self.members.get(member_id)
        if self.state is GroupState.PREPARING_REBALANCE:
            # The members rejoined so far, not the group's size: a group over the limit
            # (read back under a lower one) keeps the first to rejoin.
            joined = sum(1 for m in self.members.values() if m.awaiting_join)
            return (member is not None and member.awaiting_join) or joined < self.limits.max_size
        if self.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return member is not None or len(self.members) < self.limits.max_size
        return True  # Empty, Dead

    def _join_answer(self, member: Member) -> JoinAnswer:
        assert self.protocol_name is not None
        members: tuple[tuple[str, bytes], ...] = ()
        instance_ids: tuple[str | None, ...] = ()
        if member.member_id == self.leader:
            members = tuple(
                (m.member_id, m.metadata(self.protocol_name)) for m in self.members.values()
            )
            if self.static_members:
                instance_ids = tuple(m.group_instance_id for m in self.members.values())
        return JoinAnswer(
            ErrorCode.NONE,
            self.generation_id,
            self.protocol_type,
            self.protocol_name,
            self.leader,
            member.member_id,
            members,
            instance_ids,
        )

    def _replace_static_member(
        self,
        group_instance_id: str,
        old_member_id: str,
        new_member_id: str,
        protocols: tuple[tuple[str, bytes], ...],
        now_ms: int,
        wall_ms: int,
        answers: Answers,
    ) -> Answers:
        """A known static member joins without a member id (it restarted): it takes its
        old place under ``new_member_id`` (Kafka 2.8's updateStaticMemberAndRebalance).
        Requests of the old id still waiting are answered FENCED_INSTANCE_ID."""
        leader_before = self.leader
        member = self.members.pop(old_member_id)
        if member.awaiting_join:
            answers.joins[old_member_id] = JoinAnswer(
                ErrorCode.FENCED_INSTANCE_ID, member_id=old_member_id
            )
        if member.awaiting_sync:
            answers.syncs[old_member_id] = SyncAnswer(ErrorCode.FENCED_INSTANCE_ID)
        member.awaiting_join = member.awaiting_sync = False
        old_protocols = member.protocols
        member.member_id = new_member_id
        member.protocols = protocols
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        self.members[new_member_id] = member
        self.static_members[group_instance_id] = new_member_id
        if self.leader == old_member_id:
            self.leader = new_member_id
        if old_member_id in self.pending_sync:
            # The instance still owes the generation its SyncGroup, under its new id.
            self.pending_sync.discard(old_member_id)
            self.pending_sync.add(new_member_id)
        if self.state is GroupState.STABLE and self.select_protocol() == self.protocol_name:
            # Its assignment stays; the answer names the leader as it was, so that a
            # member replacing the leader does not compute an assignment a Stable group
            # would not hand out.
            answers.joins[new_member_id] = JoinAnswer(
                ErrorCode.NONE,
                self.generation_id,
                self.protocol_type,
                self.protocol_name,
                leader_before,
                new_member_id,
            )
            if self.persist:
                answers.replacement = StaticReplacement(
                    group_instance_id, old_member_id, new_member_id, old_protocols
                )
            return answers
        # Stable with another protocol to choose, CompletingRebalance (the leader may be
        # assigning to the old id): a rebalance. PreparingRebalance: it joins this one.
        member.awaiting_join = True
        self._prepare_rebalance(now_ms, wall_ms, answers)
        self._maybe_complete_join(now_ms, wall_ms, answers)
        return answers

    def static_replacement_failed(
        self, replacement: StaticReplacement, error: ErrorCode
    ) -> Answers:
        """Writing the group after a static member's replacement failed: the old member
        id is put back (the new one's owner is told ``error`` and joins again)."""
        answers = Answers()
        answers.joins[replacement.new_member_id] = JoinAnswer(error, member_id="")
        member = self.members.get(replacement.new_member_id)
        if (
            member is None
            or self.static_members.get(replacement.group_instance_id) != replacement.new_member_id
        ):
            return answers  # the group moved on meanwhile
        del self.members[replacement.new_member_id]
        member.member_id = replacement.old_member_id
        member.protocols = replacement.old_protocols
        self.members[replacement.old_member_id] = member
        self.static_members[replacement.group_instance_id] = replacement.old_member_id
        if self.leader == replacement.new_member_id:
            self.leader = replacement.old_member_id
        if replacement.new_member_id in self.pending_sync:
            self.pending_sync.discard(replacement.new_member_id)
            self.pending_sync.add(replacement.old_member_id)
        return answers

    def _transition(self, state: GroupState, wall_ms: int) -> None:
        """Kafka's transitionTo: the state, and the time it changed (wall clock)."""
        self.state = state
        self.state_since_ms = wall_ms

    def _prepare_rebalance(self, now_ms: int, wall_ms: int, answers: Answers) -> None:
        self.pending_sync.clear()  # the next generation's members owe their own
        if self.state is GroupState.COMPLETING_REBALANCE:
            self.storing = None  # a write under way is for a generation that ends
            # The assignment being computed is for members that are changing: the
            # members waiting on it rejoin.
            self._answer_syncs(answers, ErrorCode.REBALANCE_IN_PROGRESS, now_ms)
        rebalance_timeout = self.rebalance_timeout_ms()
        if self.state is GroupState.EMPTY:
            delay = self.limits.initial_rebalance_delay_ms
            self.join_deadline_ms = now_ms + delay
            self.initial_join_remaining_ms = max(rebalance_timeout - delay, 0)
        elif self.state is GroupState.PREPARING_REBALANCE:
            return
        else:
            self.initial_join_remaining_ms = None
            self.join_deadline_ms = now_ms + rebalance_timeout
        self._transition(GroupState.PREPARING_REBALANCE, wall_ms)

    def _maybe_complete_join(self, now_ms: int, wall_ms: int, answers: Answers) -> None:
        if self.state is not GroupState.PREPARING_REBALANCE:
            return
        remaining = self.initial_join_remaining_ms
        if remaining is not None:
            # Every member having joined does not end it, nor every member leaving:
            # only a delay's end does (Kafka's InitialDelayedJoin never completes early).
            while now_ms >= self.join_deadline_ms:
                if not (self.new_member_added and remaining):
                    self._complete_join(now_ms, wall_ms, answers)
                    return
                self.new_member_added = False
                delay = min(self.limits.initial_rebalance_delay_ms, remaining)
                remaining -= delay
                self.initial_join_remaining_ms = remaining
                self.join_deadline_ms += delay
            return
        # (With no member left, a pending member is still waited for, as Kafka's
        # hasAllMembersJoined does: its join then completes the phase at once.)
        if self._all_joined() or now_ms >= self.join_deadline_ms:
            self._complete_join(now_ms, wall_ms, answers)

    def _generation_subscriptions(self) -> frozenset[str] | None:
        """Kafka's computeSubscribedTopics: a consumer group's members' topics for the
        protocol chosen (none for no member), else unknown. Not read again until the next
        generation: a static member taking its place in a Stable group with other
        metadata does not change them."""
        if self.protocol_type != CONSUMER_PROTOCOL:
            return None
        if not self.members:
            return frozenset()
        protocol = self.protocol_name
        if protocol is None:
            return None
        return subscribed_topics(m.metadata(protocol) for m in self.members.values())

    def _complete_join(self, now_ms: int, wall_ms: int, answers: Answers) -> None:
        """The join phase ends: members that did not rejoin are dropped, and the rest form
        the next generation (or the group is Empty)."""
        for member_id in [
            m
            for m, member in self.members.items()
            if not member.awaiting_join and member.group_instance_id is None
        ]:
            del self.members[member_id]
        # Static members that did not rejoin stay (only their session timeout drops them),
        # but they get no answer: the leader must be one that rejoined. With none, the
        # phase waits another rebalance timeout (Kafka's "no members rejoined").
        joined = [m for m in self.members.values() if m.awaiting_join]
        if self.members and not joined:
            self.initial_join_remaining_ms = None
            self.join_deadline_ms = now_ms + self.rebalance_timeout_ms()
            return
        # Pending members stay until their own deadline (Kafka keeps them until their
        # session timeout): one that rejoins after this phase joins the next.
        self.initial_join_remaining_ms = None
        self.generation_id += 1
        if not self.members:
            self._transition(GroupState.EMPTY, wall_ms)
            self.empty_since_ms = wall_ms
            # The protocol type stays (Kafka's initNextGeneration clears only the
            # protocol): the Empty group's record, ListGroups and DescribeGroups name
            # it, and Kafka expires an Empty group's offsets by it.
            self.protocol_name = None
            self.leader = ""
            self.subscribed_topics = self._generation_subscriptions()
            return
        leader = self.members.get(self.leader)
        if leader is None or not leader.awaiting_join:
            self.leader = joined[0].member_id
        self.protocol_name = self.select_protocol()
        self.subscribed_topics = self._generation_subscriptions()
        self._transition(GroupState.COMPLETING_REBALANCE, wall_ms)
        self.sync_deadline_ms = now_ms + self.rebalance_timeout_ms()
        # (Static members that did not rejoin too, as Kafka's: they are members.)
        self.pending_sync = set(self.members)
        for member in self.members.values():
            rejoined = member.awaiting_join
            member.awaiting_join = member.is_new = False
            member.assignment = b""
            member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
            if rejoined:
                answers.joins[member.member_id] = self._join_answer(member)

    # --- SyncGroup -------------------------------------------------------------------

    def sync(
        self,
        *,
        member_id: str,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        now_ms: int,
        group_instance_id: str | None = None,
        wall_ms: int | None = None,
    ) -> Answers:
        answers = Answers()
        wall = now_ms if wall_ms is None else wall_ms

        def answer(error: ErrorCode, assignment: bytes = b"") -> Answers:
            # Only a success names the protocol (Kafka's SyncGroupResult(error) has none).
            known = error == ErrorCode.NONE
            answers.syncs[member_id] = SyncAnswer(
                error,
                assignment,
                self.protocol_type if known else None,
                self.protocol_name if known else None,
            )
            return answers

        if self.state is GroupState.DEAD:
            return answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if self.fenced(member_id, group_instance_id):
            return answer(ErrorCode.FENCED_INSTANCE_ID)
        member = self.members.get(member_id)
        if member is None:
            return answer(ErrorCode.UNKNOWN_MEMBER_ID)
        if generation_id != self.generation_id:
            return answer(ErrorCode.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != self.protocol_type) or (
            protocol_name is not None and protocol_name != self.protocol_name
        ):
            return answer(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if self.state is GroupState.PREPARING_REBALANCE:
            return answer(ErrorCode.REBALANCE_IN_PROGRESS)
        self.pending_sync.discard(member_id)
        if self.state is GroupState.STABLE:
            return answer(ErrorCode.NONE, member.assignment)
        # CompletingRebalance
        member.awaiting_sync = True
        if member_id == self.leader and self.storing is None:
            if self.persist:
                self.storing = dict(assignments)
                answers.store = True
                return answers
            self._set_assignment(assignments, now_ms, wall, answers)
        return answers

    def _set_assignment(
        self, assignments: dict[str, bytes], now_ms: int, wall_ms: int, answers: Answers
    ) -> None:
        for m in self.members.values():
            m.assignment = assignments.get(m.member_id, b"")
        self._transition(GroupState.STABLE, wall_ms)
        for m in self.members.values():
            m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms
        self._answer_syncs(answers, ErrorCode.NONE, now_ms)

    def assignment_stored(
        self, generation_id: int, now_ms: int, *, wall_ms: int | None = None
    ) -> Answers:
        """The leader's assignment of ``generation_id`` is written: the group is Stable
        and its members get their assignments (unless it moved on meanwhile)."""
        answers = Answers()
        storing = self.storing
        if (
            self.state is GroupState.COMPLETING_REBALANCE
            and generation_id == self.generation_id
            and storing is not None
        ):
            self.storing = None
            self.persisted_generation = generation_id
            self._set_assignment(storing, now_ms, now_ms if wall_ms is None else wall_ms, answers)
        return answers

    def assignment_store_failed(
        self, generation_id: int, error: ErrorCode, now_ms: int, *, wall_ms: int | None = None
    ) -> Answers:
        """Writing the assignment failed: the members waiting for it get ``error`` and
        the group rebalances (Kafka's resetAndPropagateAssignmentError)."""
        answers = Answers()
        if (
            self.state is GroupState.COMPLETING_REBALANCE
            and generation_id == self.generation_id
            and self.storing is not None
        ):
            self.storing = None
            self._answer_syncs(answers, error, now_ms)
            self._prepare_rebalance(now_ms, now_ms if wall_ms is None else wall_ms, answers)
        return answers

    def to_metadata(self) -> GroupMetadata:
        """The group as Kafka's group metadata record holds it: the generation, its
        protocol and leader, and each member with its subscription and assignment (the
        one being stored, while it is); its state's timestamp is when its state last
        changed (Kafka's currentStateTimestampOrDefault: -1 for none known), which only
        an Empty group's reader looks at."""
        protocol = self.protocol_name
        assignments = self.storing
        members = tuple(
            MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                subscription=m.metadata(protocol) if protocol is not None else b"",
                assignment=(
                    assignments.get(m.member_id, b"") if assignments is not None else m.assignment
                ),
            )
            for m in self.members.values()
        )
        return GroupMetadata(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=protocol,
            leader=self.leader or None,
            current_state_timestamp_ms=(
                NO_TIMESTAMP if self.state_since_ms is None else self.state_since_ms
            ),
            members=members,
        )

    @classmethod
    def from_metadata(
        cls,
        group_id: str,
        metadata: GroupMetadata,
        limits: GroupLimits,
        now_ms: int,
        *,
        wall_ms: int | None = None,
    ) -> Group:
        """A group read back by a new coordinator: Stable with its members (each has a
        session's time, from ``now_ms`` on the monotonic clock, to heartbeat here), or
        Empty at its generation. Its record's state timestamp is kept, as Kafka's
        loadGroup keeps it, and counted from only if it is Empty."""
        group = cls(group_id, limits, persist=True)
        if metadata.current_state_timestamp_ms >= 0:
            group.state_since_ms = metadata.current_state_timestamp_ms
        group.generation_id = metadata.generation
        group.persisted_generation = metadata.generation
        # An Empty group's too, as Kafka's loadGroup ("": none).
        group.protocol_type = metadata.protocol_type or None
        if not metadata.members or metadata.protocol is None:
            if metadata.current_state_timestamp_ms >= 0:
                group.empty_since_ms = metadata.current_state_timestamp_ms
            group.subscribed_topics = group._generation_subscriptions()
            return group
        group.protocol_name = metadata.protocol
        for mm in metadata.members:
            group.members[mm.member_id] = Member(
                mm.member_id,
                mm.client_id,
                mm.client_host,
                mm.session_timeout_ms,
                mm.rebalance_timeout_ms,
                metadata.protocol_type,
                ((metadata.protocol, mm.subscription),),
                assignment=mm.assignment,
                heartbeat_deadline_ms=now_ms + mm.session_timeout_ms,
                group_instance_id=mm.group_instance_id,
            )
            if mm.group_instance_id is not None:
                group.static_members[mm.group_instance_id] = mm.member_id
        leader = metadata.leader
        group.leader = leader if leader in group.members else next(iter(group.members))
        group.subscribed_topics = group._generation_subscriptions()
        group.state = GroupState.STABLE
        if len(group.members) > limits.max_size:
            # Kafka's onGroupLoaded: a group over group.max.size (lowered since) rebalances
            # at once, its members rejoining up to the limit.
            group._prepare_rebalance(now_ms, now_ms if wall_ms is None else wall_ms, Answers())
        return group

    def _answer_syncs(self, answers: Answers, error: ErrorCode, now_ms: int) -> None:
        """Answer the members waiting on SyncGroup, each given a new session from now,
        error or not (Kafka's propagateAssignment): its session was not counted while it
        waited, and one told to rejoin after waiting longer than its session would
        otherwise be dropped before its JoinGroup arrives."""
        for m in self.members.values():
            if m.awaiting_sync:
                m.awaiting_sync = False
                m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms
                known = error == ErrorCode.NONE
                answers.syncs[m.member_id] = SyncAnswer(
                    error,
                    m.assignment if known else b"",
                    self.protocol_type if known else None,
                    self.protocol_name if known else None,
                )

    # --- Heartbeat, LeaveGroup, expiry -------------------------------------------------

    def heartbeat(
        self,
        *,
        member_id: str,
        generation_id: int,
        now_ms: int,
        group_instance_id: str | None = None,
    ) -> ErrorCode:
        if self.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.fenced(member_id, group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != self.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if self.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(
        self, member_ids: Iterable[str], now_ms: int, *, wall_ms: int | None = None
    ) -> tuple[dict[str, ErrorCode], Answers]:
        """LeaveGroup by member ids: each member's own error (see leave_members)."""
        ids = list(member_ids)
        errors, answers = self.leave_members([(m, None) for m in ids], now_ms, wall_ms=wall_ms)
        return dict(zip(ids, errors, strict=True)), answers

    def leave_members(
        self,
        members: Iterable[tuple[str, str | None]],
        now_ms: int,
        *,
        wall_ms: int | None = None,
    ) -> tuple[list[ErrorCode], Answers]:
        """LeaveGroup (v3+: a batch of member ids and group instance ids; a static member
        may be named by its instance id alone, as an administrator removes one): each
        one's own error, in order. A member that leaves makes the others rebalance."""
        answers = Answers()
        wall = now_ms if wall_ms is None else wall_ms
        errors: list[ErrorCode] = []
        for member_id, group_instance_id in members:
            if self.state is GroupState.DEAD:
                errors.append(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            elif member_id and self.fenced(member_id, group_instance_id):
                errors.append(ErrorCode.FENCED_INSTANCE_ID)
            elif member_id in self.pending_members:
                if group_instance_id is not None:
                    # (The members named before it have left: Kafka's handleLeaveGroup
                    # throws from within its map over them.)
                    raise UnexpectedPendingMember(
                        f"the static member {group_instance_id!r} of group {self.group_id}"
                        f" was not expected to be leaving as a pending member, with member"
                        f" id {member_id!r}",
                        answers,
                    )
                del self.pending_members[member_id]
                errors.append(ErrorCode.NONE)
                self._maybe_complete_join(now_ms, wall, answers)
            elif group_instance_id is not None and group_instance_id in self.static_members:
                errors.append(ErrorCode.NONE)
                self._remove(self.static_members[group_instance_id], now_ms, wall, answers)
            elif member_id in self.members:
                errors.append(ErrorCode.NONE)
                self._remove(member_id, now_ms, wall, answers)
            else:
                errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
        return errors, answers

    def _remove(self, member_id: str, now_ms: int, wall_ms: int, answers: Answers) -> None:
        self._forget(member_id, answers)
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now_ms, wall_ms, answers)
        self._maybe_complete_join(now_ms, wall_ms, answers)

    def _forget(self, member_id: str, answers: Answers) -> None:
        """The member leaves the group (Kafka's GroupMetadata.remove); a request of its
        still waiting is answered UNKNOWN_MEMBER_ID, a JoinGroup with no member id (Kafka's
        removeMemberAndUpdateGroup: a client still there joins again as new)."""
        member = self.members.pop(member_id)
        self.pending_sync.discard(member_id)
        instance_id = member.group_instance_id
        if instance_id is not None and self.static_members.get(instance_id) == member_id:
            del self.static_members[instance_id]
        if member.awaiting_join:
            answers.joins[member_id] = JoinAnswer(ErrorCode.UNKNOWN_MEMBER_ID, member_id="")
        if member.awaiting_sync:
            answers.syncs[member_id] = SyncAnswer(ErrorCode.UNKNOWN_MEMBER_ID)
        if self.leader == member_id:
            self.leader = next(iter(self.members), "")

    def tick(self, now_ms: int, *, wall_ms: int | None = None) -> Answers:
        """Time passes: members whose session expired are dropped (and new members that
        waited NEW_MEMBER_JOIN_TIMEOUT_MS in the join phase), pending members that never
        rejoined forgotten, a join phase past its deadline completed, and members
        of a generation that did not send SyncGroup within the rebalance timeout dropped."""
        answers = Answers()
        wall = now_ms if wall_ms is None else wall_ms
        if self.state is GroupState.DEAD:
            return answers
        for member_id, deadline in list(self.pending_members.items()):
            if now_ms >= deadline:
                del self.pending_members[member_id]
        if self.pending_sync and now_ms >= self.sync_deadline_ms:
            # Kafka's onExpirePendingSync: all of them go, then one rebalance.
            for member_id in [m for m in self.members if m in self.pending_sync]:
                self._forget(member_id, answers)
            self._prepare_rebalance(now_ms, wall, answers)
        for member_id in [
            m
            for m, x in self.members.items()
            if self._timed(x) and now_ms >= x.heartbeat_deadline_ms
        ]:
            if member_id in self.members:
                # A new member timed out waiting in the join phase is told with no id
                # (_forget), and joins again if still there.
                self._remove(member_id, now_ms, wall, answers)
        self._maybe_complete_join(now_ms, wall, answers)
        return answers

    @staticmethod
    def _timed(member: Member) -> bool:
        """Whether ``member``'s deadline drops it: a member waiting for its JoinGroup or
        SyncGroup answer is not timed, unless it is new (Kafka's hasSatisfiedHeartbeat)."""
        return member.is_new or not (member.awaiting_join or member.awaiting_sync)

    def next_deadline_ms(self) -> int | None:
        """When `tick` next has something to do (None: nothing is timed)."""
        if self.state is GroupState.DEAD:
            return None
        deadlines = list(self.pending_members.values())
        deadlines += [m.heartbeat_deadline_ms for m in self.members.values() if self._timed(m)]
        if self.state is GroupState.PREPARING_REBALANCE:
            deadlines.append(self.join_deadline_ms)
        if self.pending_sync:
            deadlines.append(self.sync_deadline_ms)
        return min(deadlines, default=None)

    def unload(self) -> Answers:
        """The group's partition moved to another coordinator: every waiting member is
        told NOT_COORDINATOR (it finds the new one and rejoins there)."""
        answers = Answers()
        for m in self.members.values():
            if m.awaiting_join:
                answers.joins[m.member_id] = JoinAnswer(
                    ErrorCode.NOT_COORDINATOR, member_id=m.member_id
                )
            if m.awaiting_sync:
                answers.syncs[m.member_id] = SyncAnswer(ErrorCode.NOT_COORDINATOR)
            m.awaiting_join = m.awaiting_sync = False
        self.state = GroupState.DEAD
        self.storing = None
        self.pending_sync.clear()  # (Kafka's onGroupUnloaded: removeSyncExpiration)
        return answers

    # --- OffsetCommit ------------------------------------------------------------------

    def check_commit(
        self,
        member_id: str,
        generation_id: int,
        now_ms: int,
        group_instance_id: str | None = None,
    ) -> ErrorCode:
        """Whether a member (or, with generation -1 and no members, a consumer that
        assigns its own partitions) may commit offsets now (Kafka 2.8's rules)."""
        if self.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.fenced(member_id, group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if generation_id < 0 and self.state is GroupState.EMPTY:
            return ErrorCode.NONE
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != self.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if self.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        member = self.members[member_id]
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        return ErrorCode.NONE
