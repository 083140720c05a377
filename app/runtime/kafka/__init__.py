"""Kafka mode: the Engine run per Kafka partition by consumer-group workers.

Modules: ``config`` (app config, topic names), ``topology`` (statement groups, lanes,
topics), ``wiring`` (which rooms a topic feeds), ``router`` (what a source record is and
where it goes), ``lanes`` (stateless statements per source partition), ``partition`` (one
Engine over batch-atomic RocksDB state), ``store`` (that state and the changelog record
format), ``recovery`` (reading changelogs), ``checkpoint`` (one Kafka transaction per
checkpoint), ``loop`` (the consumer loop: consume, dispatch, rebalance), ``intake`` (a
consumed record's validation and dispatch), ``assignment`` (the inputs and engine
partitions of a rebalance), ``inputs`` (one object per assigned partition), ``rows``
(output records), ``lost_input`` (input deleted before it was read), ``watch``,
``health``, ``collector``, ``shutdown`` (stalls, probes, garbage collection, the stop),
``worker`` (start-up and settings), ``codec`` (JSON bytes), ``clock`` (watermarks),
``reader`` (output reader), ``runner`` (apps and scenarios on a broker).
"""
