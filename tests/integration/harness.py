"""The supervised cluster, under the names the tests use (it lives in cluster/supervised.py)."""

from cluster.supervised import SupervisedBroker as BrokerProcess
from cluster.supervised import SupervisedCluster as Cluster
from cluster.supervised import wait_for

__all__ = ["BrokerProcess", "Cluster", "wait_for"]
