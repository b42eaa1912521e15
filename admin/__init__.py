"""Cluster administration through znodes, as Kafka's ZooKeeper-based tools (AdminZkClient):
topics, reassignment, preferred leader election, controller info. Pure validation (parse_*,
plan_*, check_*) is kept apart from the reads and writes."""
