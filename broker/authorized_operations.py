"""The authorized-operations bitfields of Metadata v8+, DescribeCluster and DescribeGroups
v3+, as Kafka 2.8 answers them without an authorizer (AuthHelper.authorizedOperations):
every operation the resource type supports (AclEntry.supportedOperations), each as the bit
of its AclOperation code (Utils.to32BitField). Not asked for: the schema's default."""

from __future__ import annotations

import enum
from typing import Final


class AclOperation(enum.IntEnum):
    """Kafka's AclOperation codes (the concrete ones)."""

    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


def bitfield(operations: frozenset[AclOperation]) -> int:
    return sum(1 << op for op in operations)


_Op = AclOperation
TOPIC_OPERATIONS: Final = bitfield(
    frozenset(
        {_Op.READ, _Op.WRITE, _Op.CREATE, _Op.DESCRIBE, _Op.DELETE, _Op.ALTER}
        | {_Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS}
    )
)
CLUSTER_OPERATIONS: Final = bitfield(
    frozenset(
        {_Op.CREATE, _Op.CLUSTER_ACTION, _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS}
        | {_Op.IDEMPOTENT_WRITE, _Op.ALTER, _Op.DESCRIBE}
    )
)
GROUP_OPERATIONS: Final = bitfield(frozenset({_Op.READ, _Op.DESCRIBE, _Op.DELETE}))

#: The schema's default (Int.MinValue): the client did not ask.
NOT_ASKED: Final = -(2**31)
