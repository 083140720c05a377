"""Command line of the Spark analytics: ``kepl spark read | to-parquet | summary``.

PySpark is imported only once a subcommand runs, so ``--help`` stays fast and works
without it (an optional dependency: ``pip install 'kepl[spark]'``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
PYSPARK_MISSING = "PySpark is not installed: pip install 'kepl[spark]'"


def _add_source(p: argparse.ArgumentParser, required: bool = True) -> None:
    """Arguments naming the Kafka cluster and the output topics to read."""
    p.add_argument("--bootstrap", help="Kafka bootstrap servers (default: "
                   "$KAFKA_BOOTSTRAP_SERVERS, else 127.0.0.1:9092)")
    group = p.add_mutually_exclusive_group(required=required)
    group.add_argument("--topic", action="append", metavar="TOPIC",
                       help="an output topic (repeatable)")
    group.add_argument("--app", help="all output topics of this kepl app (kepl.APP.out.*)")
    p.add_argument("--schema", help="Spark DDL schema of the rows, e.g. 'sym string, "
                   "price double' (default: the row as map<string,string>)")


def build_parser(prog: str = "kepl spark") -> argparse.ArgumentParser:
    """The argument parser of the ``kepl spark`` subcommands."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="PySpark analytics over kepl output topics (local Spark with the "
                    "Kafka connector; the connector jars are fetched once with Maven).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("read", help="print the rows of output topics, repeats dropped")
    _add_source(p)
    p.add_argument("--limit", type=int, default=1000, help="rows to print (default 1000)")
    p.add_argument("--json", action="store_true", help="JSON lines instead of a table")

    p = sub.add_parser("to-parquet", help="stream output topics into Parquet files")
    _add_source(p)
    p.add_argument("--path", required=True, help="Parquet output directory")
    p.add_argument("--checkpoint", required=True, help="checkpoint directory (keep it: "
                   "it holds the read offsets and the de-duplication state)")
    p.add_argument("--once", action="store_true",
                   help="process what is in the topics now, then stop (availableNow)")
    p.add_argument("--interval", default="10 seconds",
                   help="micro-batch interval without --once (default '10 seconds')")
    p.add_argument("--dedupe-window", default="1 hour",
                   help="how long after a row a repeat of it is still dropped (default '1 hour')")
    p.add_argument("--partition-by", action="append", default=[], metavar="COLUMN",
                   help="Parquet partition column, e.g. statement (repeatable)")

    p = sub.add_parser("summary", help="row counts and numeric min/max/avg per statement "
                                       "and stream")
    _add_source(p, required=False)
    p.add_argument("--parquet", help="summarise a to-parquet export instead of topics")
    p.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    return parser


def _source_rows(spark: SparkSession, args: argparse.Namespace) -> DataFrame:
    """The de-duplicated rows of the topics named on the command line."""
    from app.analytics.jobs import output_topic_pattern, read_output

    pattern = output_topic_pattern(args.app) if args.app else None
    return read_output(spark, _bootstrap(args), args.topic, pattern=pattern, schema=args.schema)


def _bootstrap(args: argparse.Namespace) -> str:
    """``--bootstrap``, else ``$KAFKA_BOOTSTRAP_SERVERS``, else the local default."""
    return args.bootstrap or os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or DEFAULT_BOOTSTRAP


def _print(df: DataFrame, as_json: bool, limit: int) -> None:
    """Print a DataFrame as a table or as JSON lines (timestamps in UTC)."""
    if as_json:
        from pyspark.sql import functions as F

        lines = df.limit(limit).select(F.to_json(F.struct(*df.columns)).alias("line"))
        for row in lines.collect():
            print(row.line)
    else:
        df.show(limit, truncate=False)


def cmd_read(spark: SparkSession, args: argparse.Namespace) -> int:
    """``read``: print rows in topic order."""
    rows = _source_rows(spark, args).orderBy("topic", "partition", "offset")
    _print(rows, args.json, args.limit)
    return 0


def cmd_to_parquet(spark: SparkSession, args: argparse.Namespace) -> int:
    """``to-parquet``: run the streaming export (until done with --once, else until ^C)."""
    from app.analytics.jobs import output_topic_pattern, to_parquet

    query = to_parquet(
        spark, _bootstrap(args), args.path, args.checkpoint, args.topic,
        pattern=output_topic_pattern(args.app) if args.app else None,
        schema=args.schema, dedupe_window=args.dedupe_window, available_now=args.once,
        interval=args.interval, partition_by=args.partition_by,
    )
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
        return 130
    progress = query.recentProgress
    written = sum(int(p.get("numInputRows", 0)) for p in progress)
    print(json.dumps({"path": args.path, "batches": len(progress), "input_rows": written}))
    return 0


def cmd_summary(spark: SparkSession, args: argparse.Namespace) -> int:
    """``summary``: statistics of topics or of a Parquet export."""
    from app.analytics.jobs import summary

    rows = spark.read.parquet(args.parquet) if args.parquet else _source_rows(spark, args)
    _print(summary(rows), args.json, 10_000)
    return 0


_COMMANDS = {"read": cmd_read, "to-parquet": cmd_to_parquet, "summary": cmd_summary}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``kepl spark`` subcommand; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.command == "summary" and bool(args.parquet) == bool(args.topic or args.app):
        parser.error("summary needs exactly one of --parquet or --topic/--app")
    try:
        from pyspark.sql import SparkSession
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "pyspark":
            raise
        print(f"kepl spark: {PYSPARK_MISSING}", file=sys.stderr)
        return 2

    from app.analytics.jars import SparkJarsError
    from app.analytics.session import local_session

    if getattr(args, "topic", None) or getattr(args, "app", None):
        from app.runtime.kafka import client

        try:  # before Spark starts: its Kafka source would wait minutes, then a stack trace
            client.probe(_bootstrap(args), "spark")
        except (client.BrokerUnavailable, client.ClientConfigError) as exc:
            print(f"kepl: {exc}", file=sys.stderr)
            return 1

    owned = SparkSession.getActiveSession() is None  # stop only a session we started
    try:
        spark = local_session(f"kepl-spark-{args.command}")
    except SparkJarsError as exc:
        print(f"kepl spark: {exc}", file=sys.stderr)
        return 2
    try:
        return _COMMANDS[args.command](spark, args)
    except ValueError as exc:
        print(f"kepl spark: {exc}", file=sys.stderr)
        return 2
    finally:
        if owned:
            spark.stop()


if __name__ == "__main__":
    sys.exit(main())
