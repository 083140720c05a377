"""Kafka mode: the Engine run per Kafka partition by consumer-group workers.

Modules: ``config`` (app config, topic names), ``topology`` (statement groups, lanes,
topics), ``router`` (what a source record is and where it goes), ``lanes`` (stateless
statements per source partition), ``partition`` (one Engine over batch-atomic RocksDB
state), ``store`` (that state and the changelog record format), ``recovery`` (reading
changelogs), ``checkpoint`` (one Kafka transaction per checkpoint), ``loop`` (the
consumer loop), ``worker`` (start-up and settings), ``codec`` (JSON bytes), ``clock``
(watermarks), ``reader`` (output reader), ``runner`` (apps and scenarios on a broker).
"""
