"""Spark jobs over kepl output topics (batch reads, a continuous stream job, summaries).

- ``jars``: the Kafka connector of the installed Spark, exactly, as ``spark.jars.packages``
  resolved by Ivy into ``~/.cache/kepl/ivy``;
- ``session``: a ``SparkSession`` on any master (``local[*]`` by default) with the connector;
- ``jobs``: ``read_output`` (batch, de-duplicated by ``kepl.id``), ``stream`` (structured
  streaming into Parquet exactly once, or the console) and ``summary`` (counts and
  numeric stats);
- ``cli``: ``main(argv)`` with the subcommands ``read``, ``stream``, ``to-parquet``,
  ``summary`` and ``packages``; ``submit``: the same under ``spark-submit``.

PySpark is imported lazily by ``session``/``jobs``/``cli``, so importing this package
costs nothing.
"""
