"""The supervised cluster, under the names the tests use (it lives in cluster/supervised.py),
and a helper for ZooKeeper ensemble faults."""

from cluster import zookeeper as zkp
from cluster.supervised import SupervisedBroker as BrokerProcess
from cluster.supervised import SupervisedCluster as Cluster
from cluster.supervised import wait_for

__all__ = ["BrokerProcess", "Cluster", "serving_member", "wait_for"]


def serving_member(ensemble: zkp.LocalZooKeeper, session_id: int) -> zkp.LocalServer:
    """The ensemble member a session is connected to (from each member's `cons` list)."""

    def find() -> zkp.LocalServer | None:
        for s in ensemble.servers:
            cons = zkp.four_letter_word(zkp.HOST, s.client_port, "cons") or ""
            if f"sid=0x{session_id:x}," in cons or f"sid=0x{session_id:x})" in cons:
                return s
        return None

    return wait_for(find, 30, f"the member serving session 0x{session_id:x}")
