"""``zkctl broker identities``: the allocated broker ids, their names, addresses, liveness.

Persistent identities (broker.identity.mode=persistent) are the claims under
``/brokers/identities``; brokers registered without a claim hold Kafka-mode ids (static
or generated from ``/brokers/seqid``, whose version counts the ids generated so far).
A broker is alive while its ephemeral ``/brokers/ids/<id>`` exists; its address is the
registration's, else the last address its claim recorded.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from watch.text import printable
from zkctl.common import out, print_json, report_problems, zk_session

if TYPE_CHECKING:
    from zkctl.common import Subparsers
    from zkdata.znodes import BrokerRegistration, IdentityClaim


def register(subparsers: Subparsers, common: argparse.ArgumentParser) -> None:
    broker = subparsers.choices.get("broker")
    if broker is None:  # the broker command group comes from zkctl.cluster_commands
        broker = subparsers.add_parser("broker", help="broker commands")
        broker.add_subparsers(dest="broker_command", metavar="ACTION", required=True)
    actions = next(
        a for a in broker._actions if isinstance(a, argparse._SubParsersAction)
    )  # argparse has no public accessor for an existing subparsers group
    text = "list the allocated broker ids: identity, address, alive or not"
    p = actions.add_parser(
        "identities",
        parents=[common],
        help=text,
        description=(
            f"{text[0].upper()}{text[1:]}. Persistent identities (cluster:broker-name:id) come"
            " from /brokers/identities; brokers registered without one have Kafka-mode ids"
            " (static, or generated from /brokers/seqid)."
        ),
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=_identities, parser=p)


@dataclass(frozen=True)
class IdentityRow:
    broker_id: int
    mode: str  # persistent, kafka
    identity: str
    cluster_name: str | None
    broker_name: str | None
    address: str
    claimed_address: str | None
    alive: bool
    broker_epoch: int | None
    claim_written_ms: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            "broker_id": self.broker_id,
            "mode": self.mode,
            "identity": self.identity,
            "cluster_name": self.cluster_name,
            "broker_name": self.broker_name,
            "address": self.address,
            "claimed_address": self.claimed_address,
            "alive": self.alive,
            "broker_epoch": self.broker_epoch,
            "claim_written_ms": self.claim_written_ms,
        }


def identity_rows(
    claims: dict[int, IdentityClaim],
    registrations: dict[int, tuple[BrokerRegistration, int]],
) -> list[IdentityRow]:
    """One row per allocated or registered id, by id (a pure function of what was read)."""
    rows = []
    for broker_id in sorted(set(claims) | set(registrations)):
        claim = claims.get(broker_id)
        reg, epoch = registrations.get(broker_id, (None, None))
        address = f"{reg.host}:{reg.port}" if reg is not None else ""
        if claim is not None:
            rows.append(
                IdentityRow(
                    broker_id,
                    "persistent",
                    claim.identity,
                    claim.cluster_name,
                    claim.broker_name,
                    address or claim.address,
                    claim.address,
                    reg is not None,
                    epoch,
                    claim.timestamp_ms,
                )
            )
        else:
            rows.append(
                IdentityRow(
                    broker_id, "kafka", str(broker_id), None, None, address, None, True, epoch, None
                )
            )
    return rows


def _identities(args: argparse.Namespace) -> int:
    from admin.errors import Problems
    from zkdata import paths
    from zkdata.znodes import MalformedZnode, decode_broker, decode_identity_claim

    with zk_session(args) as zk:
        claimed = [
            i
            for i in map(paths.parse_broker_id, zk.get_children(paths.BROKER_IDENTITIES) or [])
            if i is not None
        ]
        registered = [
            i
            for i in map(paths.parse_broker_id, zk.get_children(paths.BROKER_IDS) or [])
            if i is not None
        ]
        got_claims = zk.get_many([paths.broker_identity(i) for i in claimed])
        got_regs = zk.get_many([paths.broker(i) for i in registered])
        seqid = zk.exists(paths.BROKER_SEQID)
    problems = Problems()
    claims: dict[int, IdentityClaim] = {}
    for i, got in zip(claimed, got_claims, strict=True):
        if got is None:
            continue
        try:
            claims[i] = decode_identity_claim(i, got[0])
        except MalformedZnode as e:
            problems.add(e)
    registrations: dict[int, tuple[BrokerRegistration, int]] = {}
    for i, got in zip(registered, got_regs, strict=True):
        if got is None:
            continue
        try:
            registrations[i] = (decode_broker(i, got[0]), int(got[1].czxid))
        except MalformedZnode as e:
            problems.add(e)
    report_problems(problems)
    rows = identity_rows(claims, registrations)
    generated = int(seqid.version) if seqid is not None else 0
    if args.json:
        print_json(
            {
                "identities": [r.to_json() for r in rows],
                "seqid_version": generated,
                "problems": problems.to_json(),
            }
        )
        return 0
    persistent = sum(1 for r in rows if r.mode == "persistent")
    alive = sum(1 for r in rows if r.alive)
    kafka = len(rows) - persistent
    out(
        f"{persistent} persistent {'identity' if persistent == 1 else 'identities'},"
        f" {kafka} Kafka-mode {'id' if kafka == 1 else 'ids'}; {alive} alive."
        f" Ids generated from /brokers/seqid so far: {generated}"
    )
    table = [("ID", "IDENTITY", "ADDRESS", "STATE", "BROKER EPOCH", "CLAIM WRITTEN")]
    for r in rows:
        state = "alive" if r.alive else "not registered (last address)"
        written = (
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.claim_written_ms / 1000))
            if r.claim_written_ms
            else "-"
        )
        epoch = str(r.broker_epoch) if r.broker_epoch is not None else "-"
        table.append((str(r.broker_id), r.identity, r.address or "-", state, epoch, written))
    cells = [[printable(c) for c in row] for row in table]  # escapes counted in the widths
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    for row in cells:
        out("  ".join(c.rjust(w) if i in (0, 4) else c.ljust(w) for i, (c, w) in
                      enumerate(zip(row, widths, strict=True))).rstrip())  # fmt: skip
    return 0
