"""Failover analytics: turn brokers' state-change logs into controller tenures, failover
incidents, partition unavailability, ISR churn, fencing counts and leader balance.

The pure parts (no Spark) are importable and testable alone:

* `pipeline.schema`: the line format (docs/state-change-log.md) as data, and a validator;
* `pipeline.control`: controller tenures, no-controller gaps, broker losses and incidents,
  from one cluster's control-plane events;
* `pipeline.partitions`: one partition's state history walked in (epoch, time) order into
  unavailability and under-replication windows, ISR churn and leader-balance deltas;
* `pipeline.stats`: percentiles, incident completion, leader balance over time, summary;
* `pipeline.html`: the one-page report with inline SVG plots.

`pipeline.job` wires them together on Spark (`zkctl report`); `pipeline.generate` writes
large, realistic logs by driving the controller's own decision code.
"""
