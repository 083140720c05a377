"""PySpark analytics over kepl output topics (batch reads, Parquet export, summaries).

- ``jars``: fetch the Spark Kafka connector jars once with Maven (``app/analytics/pom.xml``);
- ``session``: a small local ``SparkSession`` with those jars;
- ``jobs``: ``read_output`` (batch, de-duplicated by ``kepl.id``), ``to_parquet``
  (structured streaming with a checkpoint) and ``summary`` (counts and numeric stats);
- ``cli``: ``main(argv)`` with the subcommands ``read``, ``to-parquet`` and ``summary``.

PySpark is imported lazily by ``session``/``jobs``/``cli``, so importing this package
costs nothing.
"""
