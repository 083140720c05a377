"""Command line of the Spark jobs: ``kepl spark read | stream | to-parquet | summary | packages``.

PySpark is imported only once a subcommand runs, so ``--help`` stays fast and works
without it (an optional dependency: ``pip install 'kepl[spark]'``). Every job takes
``--master`` (default ``local[*]``) and ``--kafka-config`` (Kafka client security
settings, as the worker's). The same jobs run under ``spark-submit`` through
app/analytics/submit.py.
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

    from app.cli.progress import Progress

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
PYSPARK_MISSING = "PySpark is not installed: pip install 'kepl[spark]'"


def _add_source(p: argparse.ArgumentParser, required: bool = True) -> None:
    """Arguments naming the Spark master, the Kafka cluster and the output topics."""
    p.add_argument("--master", default=None,
                   help="Spark master URL (default local[*]; under spark-submit: its own)")
    p.add_argument("--bootstrap", help="Kafka bootstrap servers (default: "
                   "$KAFKA_BOOTSTRAP_SERVERS, else 127.0.0.1:9092)")
    p.add_argument("--kafka-config", metavar="FILE",
                   help="Kafka client properties (security.protocol, sasl.*, ssl.*); "
                        "default $KEPL_KAFKA_CONFIG; KEPL_KAFKA_* variables win")
    group = p.add_mutually_exclusive_group(required=required)
    group.add_argument("--topic", action="append", metavar="TOPIC",
                       help="an output topic (repeatable)")
    group.add_argument("--app", help="all output topics of this kepl app (kepl.APP.out.*)")
    p.add_argument("--schema", help="Spark DDL schema of the rows, e.g. 'sym string, "
                   "price double' (default: the row as map<string,string>)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="show Spark's and Ivy's own output (the connector's resolution "
                        "report, JVM warnings) instead of keeping it in a log file")


def build_parser(prog: str = "kepl spark") -> argparse.ArgumentParser:
    """The argument parser of the ``kepl spark`` subcommands."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Spark jobs over kepl output topics (the Kafka connector of the "
                    "installed Spark comes through spark.jars.packages, resolved once "
                    "into an Ivy cache).")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("read", help="print the rows of output topics, repeats dropped")
    _add_source(p)
    p.add_argument("--limit", type=int, default=1000, help="rows to print (default 1000)")
    p.add_argument("--json", action="store_true", help="JSON lines instead of a table")

    p = sub.add_parser("stream", help="continuous job: output topics into Parquet (exactly "
                                      "once, repeats dropped) or the console")
    _add_source(p, required=False)
    p.add_argument("sources", nargs="*", metavar="FILE-or-TOPIC",
                   help="a statement file (all its output topics, its kafka: settings) "
                        "or an output topic")
    p.add_argument("--sink", choices=("parquet", "console"), default="parquet",
                   help="where rows go (default parquet)")
    p.add_argument("--path", help="Parquet output directory (parquet sink)")
    p.add_argument("--checkpoint", help="checkpoint directory (parquet sink: required; "
                   "keep it: it holds the read offsets and the de-duplication state)")
    _add_stream_options(p)

    p = sub.add_parser("to-parquet", help="stream output topics into Parquet files")
    _add_source(p)
    p.add_argument("--path", required=True, help="Parquet output directory")
    p.add_argument("--checkpoint", required=True, help="checkpoint directory (keep it: "
                   "it holds the read offsets and the de-duplication state)")
    _add_stream_options(p)

    p = sub.add_parser("summary", help="row counts and numeric min/max/avg per statement "
                                       "and stream")
    _add_source(p, required=False)
    p.add_argument("--parquet", help="summarise a to-parquet export instead of topics")
    p.add_argument("--json", action="store_true", help="JSON lines instead of a table")

    sub.add_parser("packages", help="print the Kafka connector coordinates of the installed "
                                    "Spark (for spark-submit --packages)")
    return parser


def _add_stream_options(p: argparse.ArgumentParser) -> None:
    """Trigger, de-duplication and layout options of the streaming jobs."""
    p.add_argument("--once", action="store_true",
                   help="process what is in the topics now, then stop (availableNow)")
    p.add_argument("--interval", default="10 seconds",
                   help="micro-batch interval without --once (default '10 seconds')")
    p.add_argument("--dedupe-window", default="1 hour",
                   help="how long after a row a repeat of it is still dropped (default '1 hour')")
    p.add_argument("--partition-by", action="append", default=[], metavar="COLUMN",
                   help="Parquet partition column, e.g. statement (repeatable)")


def stream_topics(sources: Sequence[str], kafka_config: str | None = None) -> list[str]:
    """Output topics named by statement files (their statements' topics) or directly.

    A statement file's ``kafka:`` section becomes this process's Kafka client settings
    (under a ``--kafka-config`` file and ``KEPL_KAFKA_*`` variables), as for a worker.
    """
    from pathlib import Path

    topics: list[str] = []
    for source in sources:
        if not Path(source).is_file():
            topics.append(source)
            continue
        from app.runtime.kafka import client
        from app.runtime.kafka.config import AppConfig
        from app.runtime.kafka.topology import Topology

        config = AppConfig.from_file(source)
        client.configure(config.kafka, kafka_config)
        topics += [topic for topic, _ in Topology.plan(config).output_topics().values()]
    return list(dict.fromkeys(topics))


def _source_rows(spark: SparkSession, args: argparse.Namespace) -> DataFrame:
    """The de-duplicated rows of the topics named on the command line."""
    from app.analytics.jobs import output_topic_pattern, read_output

    pattern = output_topic_pattern(args.app) if args.app else None
    return read_output(spark, _bootstrap(args), args.topic, pattern=pattern, schema=args.schema)


def _bootstrap(args: argparse.Namespace) -> str:
    """``--bootstrap``, else ``$KAFKA_BOOTSTRAP_SERVERS``, else the local default."""
    return args.bootstrap or os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or DEFAULT_BOOTSTRAP


def _print(df: DataFrame, as_json: bool, limit: int, progress: Progress) -> None:
    """Print a DataFrame as a table or as JSON lines (timestamps in UTC), once it is
    computed (the progress line is cleared first)."""
    if as_json:
        from pyspark.sql import functions as F

        lines = df.limit(limit).select(F.to_json(F.struct(*df.columns)).alias("line"))
        rows = lines.collect()
        for row in rows:
            progress.out(row.line)
    else:
        progress.out(df._show_string(limit, False))  # what df.show(truncate=False) prints


def cmd_read(spark: SparkSession, args: argparse.Namespace, progress: Progress) -> int:
    """``read``: print rows in topic order."""
    rows = _source_rows(spark, args).orderBy("topic", "partition", "offset")
    _print(rows, args.json, args.limit, progress)
    return 0


def cmd_stream(spark: SparkSession, args: argparse.Namespace, progress: Progress) -> int:
    """``stream``/``to-parquet``: run the streaming job (until done with --once, else ^C)."""
    from app.analytics.jobs import output_topic_pattern, stream

    sink = getattr(args, "sink", "parquet")
    query = stream(
        spark, _bootstrap(args), None if args.app else args.topic, sink=sink, path=args.path,
        checkpoint=args.checkpoint,
        pattern=output_topic_pattern(args.app) if args.app else None,
        schema=args.schema, dedupe_window=args.dedupe_window, available_now=args.once,
        interval=args.interval, partition_by=args.partition_by,
    )
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
        return 130
    batches = query.recentProgress
    written = sum(int(p.get("numInputRows", 0)) for p in batches)
    progress.out(json.dumps({"sink": sink, "path": args.path, "batches": len(batches),
                             "input_rows": written}))
    return 0


def cmd_summary(spark: SparkSession, args: argparse.Namespace, progress: Progress) -> int:
    """``summary``: statistics of topics or of a Parquet export."""
    from app.analytics.jobs import summary

    rows = spark.read.parquet(args.parquet) if args.parquet else _source_rows(spark, args)
    _print(summary(rows), args.json, 10_000, progress)
    return 0


_COMMANDS = {"read": cmd_read, "stream": cmd_stream, "to-parquet": cmd_stream,
             "summary": cmd_summary}


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Argument combinations argparse cannot express."""
    if args.command == "summary" and bool(args.parquet) == bool(args.topic or args.app):
        parser.error("summary needs exactly one of --parquet or --topic/--app")
    if args.command == "stream":
        if bool(args.topic or args.sources) == bool(args.app):
            parser.error("stream needs statement files or topics, or --app (not both)")
        if args.sink == "parquet" and not (args.path and args.checkpoint):
            parser.error("the parquet sink needs --path and --checkpoint")


def main(argv: Sequence[str] | None = None, *, submitted: bool = False) -> int:
    """Run one ``kepl spark`` subcommand; returns the exit status.

    ``submitted``: started by ``spark-submit`` (app/analytics/submit.py), which set the
    master and the packages: the job uses that session as it is.
    """
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["cluster"]:
        from app.analytics.cluster import main as cluster_main

        return cluster_main(words[1:])
    parser = build_parser()
    args = parser.parse_args(words)
    _check(parser, args)
    try:
        from pyspark.sql import SparkSession
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "pyspark":
            raise
        print(f"kepl spark: {PYSPARK_MISSING}", file=sys.stderr)
        return 2

    from app.analytics.jars import SparkJarsError, connector_package

    if args.command == "packages":
        print(connector_package())
        return 0
    from app.analytics.session import DEFAULT_MASTER, local_session
    from app.runtime.kafka import client

    try:  # --kafka-config first: a statement file's kafka: section goes under it
        client.configure(None, args.kafka_config)
        if args.command == "stream":
            args.topic = list(args.topic or []) + stream_topics(args.sources, args.kafka_config)
    except (OSError, ValueError) as exc:  # ClientConfigError is a ValueError
        print(f"kepl spark: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "topic", None) or getattr(args, "app", None):
        try:  # before Spark starts: its Kafka source would wait minutes, then a stack trace
            client.probe(_bootstrap(args), "spark")
        except (client.BrokerUnavailable, client.ClientConfigError) as exc:
            print(f"kepl: {exc}", file=sys.stderr)
            return 1

    owned = SparkSession.getActiveSession() is None  # stop only a session we started
    from app.analytics.progress import SparkProgress
    from app.analytics.session import JvmStartError, jvm_log

    with SparkProgress(args.command) as progress:
        try:
            if submitted:
                spark = SparkSession.builder.appName(
                    f"kepl-spark-{args.command}").getOrCreate()
            else:
                spark = local_session(f"kepl-spark-{args.command}",
                                      master=args.master or DEFAULT_MASTER,
                                      verbose=args.verbose)
        except SparkJarsError as exc:
            print(f"kepl spark: {exc}", file=sys.stderr)
            return 2
        except JvmStartError as exc:
            print(f"kepl spark: {exc}", file=sys.stderr)
            return 1
        progress.running(spark)
        try:
            return _COMMANDS[args.command](spark, args, progress.progress)
        except ValueError as exc:
            print(f"kepl spark: {exc}", file=sys.stderr)
            return 2
        finally:
            if owned:
                spark.stop()
                if not submitted and not args.verbose:
                    jvm_log().unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
