"""Who the controller is: /controller (its broker id) and /controller_epoch (its term)."""

from __future__ import annotations

from dataclasses import dataclass, field

from admin.errors import Problems
from zkdata import paths, znodes
from zkdata.client import ZkClient
from zkdata.znodes import MalformedZnode


@dataclass
class ControllerInfo:
    controller_id: int | None
    epoch: int | None
    # The zkVersion of /controller_epoch: the controller's fencing token.
    epoch_zk_version: int | None
    # When /controller was created (ZooKeeper's ctime, epoch ms): the election time.
    elected_at_ms: int | None
    # The controller broker's registration, when it is registered.
    endpoint: str | None
    problems: Problems = field(default_factory=Problems)

    def to_json(self) -> dict[str, object]:
        return {
            "controller_id": self.controller_id,
            "epoch": self.epoch,
            "epoch_zk_version": self.epoch_zk_version,
            "elected_at_ms": self.elected_at_ms,
            "endpoint": self.endpoint,
            "problems": self.problems.to_json(),
        }


def read_controller(zk: ZkClient) -> ControllerInfo:
    problems = Problems()
    controller, epoch_node = zk.get_many([paths.CONTROLLER, paths.CONTROLLER_EPOCH])
    controller_id = elected_at = None
    if controller is not None:
        elected_at = controller[1].ctime
        try:
            controller_id = znodes.decode_controller(controller[0])
        except MalformedZnode as e:
            problems.add(e)
    epoch = epoch_version = None
    if epoch_node is not None:
        epoch_version = epoch_node[1].version
        try:
            epoch = znodes.decode_controller_epoch(epoch_node[0])
        except MalformedZnode as e:
            problems.add(e)
    endpoint = None
    if controller_id is not None:
        got = zk.get(paths.broker(controller_id))
        if got is not None:
            try:
                reg = znodes.decode_broker(controller_id, got[0])
                endpoint = reg.endpoints[0].connection_string()
            except MalformedZnode as e:
                problems.add(e)
    return ControllerInfo(controller_id, epoch, epoch_version, elected_at, endpoint, problems)
