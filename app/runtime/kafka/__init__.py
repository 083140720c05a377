"""Kafka mode: the Engine run per Kafka partition by a faust worker (see ``worker``).

Modules: ``config`` (app config, topic names), ``topology`` (statement groups, topics),
``router`` (source records -> repartition topics / DLQ), ``partition`` (one Engine over
batch-atomic RocksDB state), ``store`` (that state and the changelog record format),
``worker`` (the faust app), ``clock`` (watermarks), ``reader`` (deduplicating output
reader), ``runner`` (conformance scenarios against a broker).
"""
