"""The group coordinator: consumer group membership (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup) and committed offsets, kept in the replicated `__consumer_offsets` topic."""
