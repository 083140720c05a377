"""The ``kepl`` command line: one entry point, a subcommand per job."""

from __future__ import annotations

import argparse
import gc
import json
import os
import signal
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def _bootstrap(args: argparse.Namespace) -> str:
    return args.bootstrap or os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or DEFAULT_BOOTSTRAP


def _add_bootstrap(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap", help="Kafka bootstrap servers (default: "
                   "$KAFKA_BOOTSTRAP_SERVERS, else 127.0.0.1:9092)")


EXIT_CODES = """\
exit codes:
  0    success
  1    runtime failure: no broker answers, the app is not deployed, events or
       watermarks not delivered, steps or events rejected (run), scenarios failed,
       undeploy or reset refused while the app's workers run
  2    usage or validation error: bad arguments, an invalid statement file, an event
       or a time the app refuses (e.g. a watermark that goes backwards), undeploy or
       reset without --yes
  3    a worker fenced by a newer one (a zombie) stops
  4    a worker stops on input deleted before it was read (on_lost_input: stop)
  5    a worker's shutdown outlasted KEPL_SHUTDOWN_TIMEOUT_S, or a second signal
  6    a worker's statement file is not the app's deployed version (kepl deploy)
  130  interrupted (Ctrl-C)
  141  the reader closed the output early (kepl run ... | head): stopped quietly
"""


class _Version(argparse.Action):
    """``--version``: the installed package's version, looked up only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the version of kepl and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("kepl")
        except PackageNotFoundError:
            v = "unknown (not installed)"
        print(f"kepl {v}")
        parser.exit()


class _Formatter(argparse.HelpFormatter):
    """Wrapped descriptions, the epilog (exit codes) printed as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("exit codes:"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kepl",
        description="kepl runs Esper-style EPL statements over event streams: embedded "
                    "in-process with an explicit clock, or on Kafka with per-partition "
                    "workers and RocksDB state.",
        epilog=EXIT_CODES, formatter_class=_Formatter)
    parser.add_argument("--version", action=_Version)
    parser.add_argument("--kafka-config", metavar="FILE",
                        help="librdkafka properties file for every Kafka client (security, "
                             "SASL, SSL); before or after the command; as KEPL_KAFKA_CONFIG")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("run", help="run a statement file in-process over events from a file",
                       description="Deploy the statements of FILE in an embedded runtime and "
                                   "feed it the steps of EVENTS (JSON lines: {\"time\": ms} or "
                                   "{\"send\": Type, \"event\": {...}}; '-' reads stdin). "
                                   "Output rows are printed as JSON lines.")
    p.add_argument("file", metavar="FILE", nargs="?",
                   help="statement file (.yaml) or EPL module (.epl)")
    p.add_argument("--file", dest="file_opt", metavar="FILE", default=None,
                   help="the statement file, as the FILE argument")
    p.add_argument("--events", default="-", help="JSON-lines steps (default: stdin)")

    p = sub.add_parser("query", help="on-demand query over a named window or table",
                       description="Deploy the statements of FILE in an embedded runtime, "
                                   "replay the steps of --events (JSON lines as for 'run'), "
                                   "then run QUERY (a select over a named window or a table) "
                                   "against the current rows and print the result rows as "
                                   "JSON lines. The form QUERY --file FILE is also accepted.")
    p.add_argument("file", metavar="FILE", nargs="?",
                   help="statement file (.yaml) or EPL module (.epl)")
    p.add_argument("query", metavar="QUERY", nargs="?",
                   help="e.g. 'select * from MyWindow where x > 1' (or use --iterate)")
    p.add_argument("--file", dest="file_opt", metavar="FILE", default=None,
                   help="the statement file; then the one positional argument is QUERY")
    p.add_argument("--events", default=None,
                   help="JSON-lines steps to replay first ('-' reads stdin; default: none)")
    p.add_argument("--iterate", metavar="STATEMENT", default=None,
                   help="print a statement's current result rows instead of running QUERY")
    p.add_argument("--context-partition", metavar="SEL", action="append", default=[],
                   help="only the context partitions selected: ID, id=ID, key=V1[,V2...], "
                        "label=L, PROP=V or Outer.PROP=V (nested); repeat for a union")
    p.add_argument("--kafka", action="store_true",
                   help="query the state of the app running on Kafka (rebuilt from its "
                        "changelog topics) instead of replaying --events embedded")
    _add_bootstrap(p)

    p = sub.add_parser("check", help="validate statement files and EPL modules",
                       description="Parse and validate every statement of each FILE. Exit 0 "
                                   "when all are valid, 2 with every error listed otherwise.")
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="statement file (.yaml) or EPL module (.epl)")

    p = sub.add_parser("explain", help="print the plan of each statement",
                       description="Print, per statement, the operator chain, its state, the "
                                   "context partitioning and the Kafka topics it uses.")
    p.add_argument("file", help="statement file (.yaml) or EPL module (.epl)")

    p = sub.add_parser("scenario", help="run or record scenarios (tests of statements)",
                       description="Scenarios: statements, steps and the rows expected "
                                   "(docs/testing-your-statements.md).")
    ssub = p.add_subparsers(dest="scenario_command", metavar="ACTION")
    sr = ssub.add_parser("run", help="run scenario files or folders",
                         description="Run each scenario; print PASS/FAIL per scenario and a "
                                     "closing 'N passed, N failed' line; exit 1 if any failed.")
    sr.add_argument("paths", nargs="+", metavar="PATH",
                    help="a scenario file (.yaml) or a folder searched for them")
    sr.add_argument("--kafka", action="store_true",
                    help="run against a real broker instead of in-process")
    sr.add_argument("-v", "--verbose", action="store_true", help="print failure details")
    sr.add_argument("--time-limit", type=float, default=60.0, metavar="SECONDS",
                    help="per-scenario time limit; a scenario still running is a FAIL "
                         "'time limit' and the run goes on (default 60, 0: no limit)")
    sr.add_argument("--format", choices=["text", "junit"], default="text",
                    help="text: PASS/FAIL lines (default); junit: JUnit XML on stdout, "
                         "for CI systems")
    sr.add_argument("--junit-xml", metavar="FILE", default=None,
                    help="also write JUnit XML to FILE (the text report stays on stdout)")
    _add_bootstrap(sr)
    rec = ssub.add_parser(
        "record", help="write a scenario whose expectations are today's rows",
        description="Run the statements of FILE embedded over the steps of --events (JSON "
                    "lines as for 'kepl run'; {\"expect\": null} marks where rows are "
                    "checked, else after every step that produced rows) and write a "
                    "scenario file whose expectations are the rows they gave: a golden "
                    "file that 'kepl scenario run' (and --kafka) checks later.")
    rec.add_argument("file", metavar="FILE", help="statement file (.yaml) or EPL module")
    rec.add_argument("--events", required=True, metavar="STEPS",
                     help="JSON-lines steps: {\"time\": ms}, {\"send\": Type, \"event\": "
                          "{...}}, {\"expect\": null | [statement, ...]}")
    rec.add_argument("-o", "--output", metavar="SCENARIO", default=None,
                     help="the scenario file to write (default: stdout)")
    rec.add_argument("--name", default=None,
                     help="the scenario's name (default: APP_STEPS)")

    p = sub.add_parser("kafka", help="start, stop or inspect the local Kafka broker",
                       description="Manage the project's own Apache Kafka broker (KRaft, no "
                                   "Docker). Run 'kepl kafka start --help' for options.",
                       add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER, metavar="ACTION ...",
                   help="start, stop, status, ... and their options")

    p = sub.add_parser("registry", help="start, stop or inspect the local schema registry",
                       description="The project's own schema registry (Apicurio, in memory, "
                                   "no Docker). Run 'kepl registry start --help' for options.",
                       add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER, metavar="ACTION ...",
                   help="start, stop, status and their options")

    p = sub.add_parser("spark", help="PySpark jobs over output topics (read, to-parquet, "
                       "summary)", description="Downstream analysis of output rows with a local "
                       "PySpark session. Run 'kepl spark --help' for the jobs.", add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER, metavar="JOB ...",
                   help="read, to-parquet or summary and their options")

    p = sub.add_parser("worker", help="run a Kafka worker for a statement file",
                       description="Consume the input topics of FILE, run its statements per "
                                   "partition with RocksDB state and changelogs, and write "
                                   "output rows to the output topics. Stop with Ctrl-C.")
    p.add_argument("file", help="the app's statement file (YAML)")
    p.add_argument("--data-dir", default=None,
                   help="RocksDB state directory (default .kepl/<app>)")
    p.add_argument("--metrics-port", type=int, default=None, metavar="N",
                   help="serve /metrics, /healthz and /readyz on port N (0: any free port; "
                        "default: off)")
    p.add_argument("--log-level", default="warning",
                   choices=["debug", "info", "warning", "error", "critical"],
                   help="the worker's log level (default warning); the start-up banner, "
                        "rebalances and the closing line are printed at any level")
    _add_bootstrap(p)

    p = sub.add_parser("deploy", help="create the Kafka topics a statement file needs",
                       description="Create input, internal and output topics of FILE and "
                                   "record FILE as the app's next version; over a running "
                                   "version, say per statement what changes (--plan).")
    p.add_argument("file", help="the app's statement file (YAML)")
    from app.cli.upgrade import add_arguments as add_upgrade_arguments

    add_upgrade_arguments(p)
    _add_bootstrap(p)

    from app.cli.acls import add_parser as add_acls

    add_acls(sub)

    p = sub.add_parser("send", help="produce events to an event type's topic",
                       description="Produce each JSON EVENT (or JSON lines from stdin) to the "
                                   "topic of TYPE, in TYPE's format (formats: avro, "
                                   "json-schema or protobuf: encoded with its registry "
                                   "subject's schema).")
    p.add_argument("file", help="the app's statement file (YAML)")
    p.add_argument("type", help="the event type (a schema of FILE)")
    p.add_argument("events", nargs="*", metavar="EVENT", help="JSON events (default: stdin)")
    p.add_argument("--no-validate", action="store_true",
                   help="produce without checking the events against the schema")
    p.add_argument("--timeout", type=float, default=10.0,
                   help="seconds to wait for the broker's acknowledgements (default 10)")
    _add_bootstrap(p)

    p = sub.add_parser("clock", help="publish a watermark (runtime time) to the workers",
                       description="Publish watermark TIME (ms) to every input partition of "
                                   "FILE and wait for the broker's acknowledgements; with "
                                   "--wall, publish the wall clock every --interval ms. A "
                                   "time before the last published watermark is refused.")
    p.add_argument("file", help="the app's statement file (YAML)")
    p.add_argument("time", nargs="?", type=int,
                   help="runtime time in ms, not before the last watermark (or use --wall)")
    p.add_argument("--wall", action="store_true", help="publish the wall clock repeatedly")
    p.add_argument("--from-events", action="store_true",
                   help="follow the source topics and publish watermarks from the events' "
                        "time (the app's event_time: section) until stopped")
    p.add_argument("--interval", type=int, default=1000,
                   help="ms between watermarks with --wall (default 1000)")
    p.add_argument("--timeout", type=float, default=10.0,
                   help="seconds to wait for the broker's acknowledgements (default 10)")
    _add_bootstrap(p)

    p = sub.add_parser("tail", help="print output rows, each once",
                       description="Print the rows of the output topics of FILE (or of one "
                                   "statement), each once: repeats a crash left are dropped "
                                   "by row id. From the beginning of the topics unless "
                                   "--from-end; then new rows as they arrive unless "
                                   "--no-follow. A broker that goes away is one line on "
                                   "stderr, and one more when it answers again.")
    p.add_argument("file", help="the app's statement file (YAML)")
    p.add_argument("statement", nargs="?", help="only this statement's rows (as --statement)")
    p.add_argument("--statement", dest="statement_opt", metavar="NAME", default=None,
                   help="only this statement's rows (default: all)")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", dest="from_beginning", action="store_true",
                       default=True, help="start at the beginning of the topics (default)")
    start.add_argument("--from-end", dest="from_beginning", action="store_false",
                       help="start at the end: only rows written from now on")
    p.add_argument("--follow", action=argparse.BooleanOptionalAction, default=True,
                   help="keep printing new rows (default); --no-follow stops at the end "
                        "of the topics, exit 0")
    _add_bootstrap(p)

    p = sub.add_parser("status", help="topics, consumer group, lag, DLQ of a deployed app",
                       description="Print the app's statements and topics (partitions), its "
                                   "consumer group (state, members, their partitions), the "
                                   "lag of every partition it consumes (end offset minus "
                                   "committed offset, as kafka-consumer-groups --describe), "
                                   "the last watermark, the dead-letter count, changelog "
                                   "offsets and snapshots, and local state directories "
                                   "(--data-dir).")
    p.add_argument("file", help="the app's statement file (YAML)")
    p.add_argument("--json", action="store_true", help="one JSON document instead of text")
    p.add_argument("--data-dir", default=None,
                   help="also list the engine partition directories of this state directory")
    p.add_argument("--watch", action="store_true",
                   help="refresh the table in place every --interval seconds, with events "
                        "in/s, rows out/s per statement and the lag's trend (Ctrl-C stops)")
    p.add_argument("--interval", type=float, default=2.0, metavar="SECONDS",
                   help="seconds between refreshes with --watch (default 2)")
    p.add_argument("--count", type=int, default=None, metavar="N",
                   help="with --watch: stop after N refreshes (implies --watch)")
    _add_bootstrap(p)

    p = sub.add_parser("undeploy", help="delete a stopped app's topics and consumer group",
                       description="Delete the app's internal and output topics (not its "
                                   "input topics) and its consumer group; with --delete-state "
                                   "also its local state directory. Without --yes, print "
                                   "what would be deleted and exit 2. Refused (exit 1) while "
                                   "the consumer group has members.")
    p.add_argument("file", help="the app's statement file (YAML)")
    p.add_argument("--delete-state", action="store_true",
                   help="also delete the local state directory")
    p.add_argument("--data-dir", default=None,
                   help="the state directory (default .kepl/<app>, as kepl worker)")
    p.add_argument("--yes", action="store_true", help="delete (default: only say what)")
    _add_bootstrap(p)

    p = sub.add_parser("reset", help="rewind a stopped app to the start of its inputs",
                       description="Delete the consumer group (its committed offsets), "
                                   "delete and recreate the topics derived from the inputs "
                                   "(repartition, changelog, output, dead-letter, progress) "
                                   "and the local state directory: the next worker reads "
                                   "every input from the beginning into fresh state. Without "
                                   "--yes, print what would be done and exit 2. Refused "
                                   "(exit 1) while the consumer group has members.")
    p.add_argument("file", help="the app's statement file (YAML)")
    p.add_argument("--data-dir", default=None,
                   help="the state directory (default .kepl/<app>, as kepl worker)")
    p.add_argument("--yes", action="store_true", help="reset (default: only say what)")
    _add_bootstrap(p)

    p = sub.add_parser("demo", help="the main job: broker, worker, sample events, output",
                       description="Start the local broker, deploy examples/bank.yaml, start a "
                                   "worker, produce sample events and print output rows as "
                                   "they arrive. Stop with Ctrl-C.")
    p.add_argument("--file", default=None, help="statement file (default examples/bank.yaml)")
    p.add_argument("--port", type=int, default=9092)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``kepl`` command; its exit code (``EXIT_CODES``)."""
    try:
        code = _main(argv)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # The reader closed the pipe (`kepl run ... | head`): stop without a traceback;
        # stdout goes to /dev/null so the flush at exit does not fail again.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 128 + signal.SIGPIPE


def _take_kafka_config(argv: list[str]) -> list[str]:
    """``--kafka-config FILE`` wherever it stands: it becomes ``KEPL_KAFKA_CONFIG``, which
    every Kafka client of this process reads (``app.runtime.kafka.client``)."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--kafka-config" and i + 1 < len(argv):
            os.environ["KEPL_KAFKA_CONFIG"] = argv[i + 1]
            i += 2
            continue
        if a.startswith("--kafka-config="):
            os.environ["KEPL_KAFKA_CONFIG"] = a.partition("=")[2]
        else:
            out.append(a)
        i += 1
    return out


def _main(argv: Sequence[str] | None) -> int:
    argv = _take_kafka_config(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser()
    if argv and argv[0] == "kafka":
        from app.kafka.cli import main as kafka_main

        return int(kafka_main(argv[1:]) or 0)
    if argv and argv[0] == "registry":
        from app.registry.cli import main as registry_main

        return registry_main(argv[1:])
    if argv and argv[0] == "spark":
        from app.analytics.cli import main as spark_main

        return int(spark_main(argv[1:]) or 0)
    args = parser.parse_args(argv)
    if args.command in ("run", "query"):
        _statement_file_arg(args, parser)
    if args.command is None:
        parser.print_help()
        return 0
    # check and explain are short and bounded: what they build (parser tables, plans)
    # lives until they end, so cyclic collections on the way find nothing and cost a
    # tenth of the start-up
    paused = args.command in ("check", "explain") and gc.isenabled()
    if paused:
        gc.disable()
    try:
        return _dispatch(args, parser)
    except KeyboardInterrupt:
        return 130
    finally:
        if paused:
            gc.enable()


def _statement_file_arg(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """``run`` and ``query`` take FILE first; ``--file FILE`` (the older form of
    ``query``) also works, and then ``query``'s one positional argument is QUERY."""
    if args.file_opt is None:
        if args.file is None:
            parser.error(f"{args.command}: the statement file FILE is required")
        return
    if args.command == "query":
        if args.query is not None:
            parser.error("query: give the statement file once (FILE or --file)")
        args.query, args.file = args.file, args.file_opt
    elif args.file is not None and args.file != args.file_opt:
        parser.error("run: give the statement file once (FILE or --file)")
    else:
        args.file = args.file_opt


def _dispatch(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from app.statements import ConfigError

    try:
        if args.command == "run":
            return cmd_run(args)
        if args.command == "check":
            return cmd_check(args)
        if args.command == "query":
            return cmd_query(args)
        if args.command == "explain":
            return cmd_explain(args)
        if args.command == "scenario":
            if args.scenario_command == "record":
                return cmd_scenario_record(args)
            if args.scenario_command != "run":
                parser.parse_args(["scenario", "--help"])
            return cmd_scenario(args)
        if args.command == "acls":
            from app.cli.acls import cmd_acls

            return cmd_acls(args)
        if args.command in ("worker", "deploy", "send", "clock", "tail", "status", "undeploy",
                            "reset", "demo"):
            from app.cli import kafka_commands

            try:
                return int(getattr(kafka_commands, f"cmd_{args.command}")(
                    args, _bootstrap(args) if hasattr(args, "bootstrap") else DEFAULT_BOOTSTRAP))
            except kafka_commands.Unavailable as e:
                print(f"kepl: {e}", file=sys.stderr)
                return 1
    except ConfigError as e:
        print(f"kepl: {_positioned(e)}", file=sys.stderr)
        return 2
    parser.print_help()
    return 2


def _positioned(e: Exception) -> str:
    """A statement file's shape error as its first error at its line and column in the
    file (as ``kepl check`` finds it), else the error's own line."""
    from app.statements import InvalidFile

    if isinstance(e, InvalidFile) and not e.path.endswith(".epl"):
        from app.cli.check import first_error

        return first_error(e.path) or str(e)
    return str(e)


def _embedded(path: str) -> tuple[Any, Any, Any] | None:
    """Deploy a statement file in an embedded runtime: (statement file, catalog, engine),
    None on error."""
    from app.epl.errors import EplError
    from app.epl.planner import plan_statement
    from app.runtime.catalog import Catalog, NotSupported, string_limits
    from app.runtime.engine import Engine
    from app.statements import load_statement_file

    sf = load_statement_file(path)
    catalog = Catalog.from_schemas(sf.schemas,
                                   string_limits(sf.raw.get("max_string_length")),
                                   sf.functions)
    engine = Engine()
    try:
        for s in sf.statements:
            engine.deploy(plan_statement(catalog, s.epl, s.name))
    except NotSupported as e:
        print(f"kepl: {path}: not supported yet: {e}", file=sys.stderr)
        return None
    except EplError as e:
        from app.cli.check import first_error

        # a module's positions are the file's own; a YAML file's are mapped to it
        line = None if path.endswith(".epl") else first_error(path)
        print(f"kepl: {line or f'{path}:{e.line}:{e.column}: {e.message}'}", file=sys.stderr)
        return None
    return sf, catalog, engine


def _kafka_layout(sf: Any) -> Any:
    """The Topology a Kafka worker would run the file with (None: an EPL module, or a
    file that runs embedded only), so that ``kepl run`` numbers rows as the worker."""
    from app.epl.errors import EplError
    from app.runtime.catalog import NotSupported
    from app.runtime.kafka.config import AppConfig, ConfigError
    from app.runtime.kafka.topology import Topology

    if not sf.raw:
        return None
    try:
        return Topology.plan(AppConfig.from_dict(sf.raw, sf.base_dir))
    except (ConfigError, EplError, NotSupported):
        return None


class _Replayed:
    """What a replay did so far, and the progress line that shows it (``kepl run``)."""

    def __init__(self, progress: Any = None) -> None:
        self.events = 0
        self.rows = 0
        self.read = 0
        self.size: int | None = None
        self.progress = progress

    def line(self, final: bool) -> str:
        """'kepl run: N events, N rows' and, while running, the rate and what is left."""
        text = f"kepl run: {self.events} events, {self.rows} rows"
        if final:
            return text + ", done"
        text += f", {self.progress.rate(self.rows):.0f} rows/s"
        if self.size:
            text += f", lag {max(0, 100 - 100 * self.read // self.size)}% of the steps"
        return text

    def say(self, text: str) -> None:
        """A line on stderr (a refused step), clearing the progress line first."""
        if self.progress is not None:
            self.progress.out(text, sys.stderr)
        else:
            print(text, file=sys.stderr)


def _replay(events: str, catalog: Any, engine: Any, done: _Replayed | None = None,
            send: Any = None) -> int:
    """Apply JSON-lines steps ({"time": ms} or {"send": Type, "event": {...}}); a step the
    engine refuses is reported on stderr and skipped. Returns how many were refused.
    ``send``: what sends an event (default ``engine.send``)."""
    from app.conformance.runner import ScenarioError, clock_or_event
    from app.runtime.catalog import EventTypeError
    from app.runtime.functions import UserFunctionError

    src = sys.stdin if events == "-" else open(events)  # noqa: SIM115
    done = done if done is not None else _Replayed()
    progress = done.progress
    if progress is not None and progress.enabled:
        try:
            st = os.fstat(src.fileno())
            done.size = st.st_size if stat.S_ISREG(st.st_mode) else None
        except (OSError, ValueError):
            done.size = None
    rejected = 0
    for n, line in enumerate(src, 1):
        if progress is not None:
            done.read += len(line)
            progress.tick()
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            step = json.loads(line)
            if not isinstance(step, dict):
                raise ScenarioError("a step is a JSON object")
            if not clock_or_event(step, lambda t: engine.advance_time(int(t)),
                                  send or engine.send, catalog):
                raise ScenarioError("a step needs 'time' or 'send'")
            if "send" in step:
                done.events += 1
        except (ValueError, EventTypeError, ScenarioError, UserFunctionError) as e:
            done.say(f"kepl: {events}:{n}: {e}")
            rejected += 1
    return rejected


def cmd_run(args: argparse.Namespace) -> int:
    """Embedded run: exit 2 for invalid statements, 1 when a step or event was rejected."""
    from app.cli.progress import Progress
    from app.runtime.rows import RowNumbering

    deployed = _embedded(args.file)
    if deployed is None:
        return 2
    sf, catalog, engine = deployed
    numbering = RowNumbering(engine, _kafka_layout(sf))
    done = _Replayed()
    progress = done.progress = Progress(done.line)

    def show(stmt: str, new: list, old: list, pid: Any) -> None:
        for row in numbering.rows(stmt, new, old, pid):
            done.rows += 1
            progress.out(json.dumps(row, default=str))

    def send(type_name: str, event: Any) -> Any:
        numbering.sending(type_name, event)
        return engine.send(type_name, event)

    engine.listeners.append(show)
    with progress:
        rejected = _replay(args.events, catalog, engine, done, send)
    if rejected:
        print(f"kepl: run: {rejected} step(s) rejected", file=sys.stderr)
        return 1
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    """Replay steps embedded, then an on-demand query over a named window or a table."""
    from app.epl.errors import EplError
    from app.epl.planner import plan_query
    from app.runtime.catalog import NotSupported
    from app.runtime.selector import SelectorError, selector_predicate

    if (args.query is None) == (args.iterate is None):
        print("kepl query: give either QUERY or --iterate STATEMENT", file=sys.stderr)
        return 2
    try:
        select = selector_predicate(args.context_partition)
    except SelectorError as e:
        print(f"kepl query: {e}", file=sys.stderr)
        return 2
    if args.kafka:
        if args.events is not None:
            print("kepl query: --events replays embedded; with --kafka the state comes "
                  "from the running app", file=sys.stderr)
            return 2
        return _query_kafka(args, select)
    deployed = _embedded(args.file)
    if deployed is None:
        return 1
    _, catalog, engine = deployed
    plan = None
    if args.query is not None:
        try:
            plan = plan_query(catalog, args.query)
        except (EplError, NotSupported) as e:
            print(e.render() if isinstance(e, EplError) else f"not supported yet: {e}",
                  file=sys.stderr)
            return 1
    elif args.iterate not in engine.statements:
        print(f"kepl query: no statement named {args.iterate!r} in {args.file}",
              file=sys.stderr)
        return 1
    if args.events is not None:
        _replay(args.events, catalog, engine)
    rows = (engine.query(plan, select) if plan is not None
            else engine.iterate(args.iterate, select))
    for row in rows:
        print(json.dumps(row, default=str), flush=True)
    return 0


def _query_kafka(args: argparse.Namespace, select: Any) -> int:
    """``kepl query --kafka``: the query over every engine partition's restored state."""
    from app.cli.kafka_commands import Unavailable, _check_topology, _config, require_deployed
    from app.epl.errors import EplError
    from app.epl.planner import plan_query, plan_statement
    from app.runtime.catalog import NotSupported
    from app.runtime.kafka.inspect import restored_engines
    from app.statements import load_statement_file

    sf = load_statement_file(args.file)
    config = _config(sf)
    _check_topology(sf, config)
    try:
        require_deployed("query", _bootstrap(args), args.file, config)
    except Unavailable as e:
        print(f"kepl: {e}", file=sys.stderr)
        return 1
    catalog = None
    with restored_engines(config, _bootstrap(args)) as engines:
        if not any(args.iterate in e.statements for _, _, e in engines) and args.iterate:
            print(f"kepl query: no statement named {args.iterate!r} in {args.file}",
                  file=sys.stderr)
            return 1
        for _group, _p, engine in engines:
            if args.iterate is not None:
                rows = (engine.iterate(args.iterate, select)
                        if args.iterate in engine.statements else [])
            else:
                if catalog is None:
                    from app.runtime.catalog import Catalog

                    catalog = Catalog.from_schemas(config.schemas,
                                                   functions=config.functions)
                    for st in config.statements:
                        plan_statement(catalog, st.epl, st.name)
                try:
                    rows = engine.query(plan_query(catalog, args.query), select)
                except (EplError, NotSupported) as e:
                    print(e.render() if isinstance(e, EplError) else f"not supported yet: {e}",
                          file=sys.stderr)
                    return 1
            for row in rows:
                print(json.dumps(row, default=str), flush=True)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """Every error of every file, positioned in the file; exit 2 if there is any."""
    from app.cli.check import check_paths

    lines, failures = check_paths(args.files)
    for line in lines:
        print(line)
    if failures:
        print(f"{failures} error(s)")
        return 2
    print(f"{len(args.files)} file(s) valid")
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from app.cli.explain import explain_file
    from app.statements import load_statement_file

    lines, ok = explain_file(load_statement_file(args.file))
    print("\n".join(lines))
    return 0 if ok else 1


def cmd_scenario(args: argparse.Namespace) -> int:
    import time
    from datetime import UTC, datetime

    from app.conformance.junit import Timed, junit_xml
    from app.conformance.limits import LimitedRunner
    from app.conformance.runner import run_scenario_embedded, scenario_files

    if args.kafka:
        from app.cli.kafka_commands import Unavailable, probe_broker
        from app.runtime.kafka.runner import run_scenario_kafka

        bootstrap = _bootstrap(args)
        try:  # once, before the scenarios: not a time limit per scenario to find it down
            probe_broker("scenario", bootstrap)
        except Unavailable as e:
            print(f"kepl: {e}", file=sys.stderr)
            return 1

        def runner(doc: dict) -> str | None:
            return run_scenario_kafka(doc, bootstrap)
    else:
        runner = run_scenario_embedded
    from app.cli.progress import Progress

    files = [Path(f) for f in scenario_files(args.paths) if Path(f).name != "INDEX.md"]
    passed = failed = 0
    current = ""
    junit = args.format == "junit"
    results: list[Timed] = []
    started = datetime.now(UTC)

    def line(final: bool) -> str:
        text = f"kepl scenario run: {passed + failed}/{len(files)} scenarios, {failed} failed"
        if final:
            return text + ", done"
        return text + f", {progress.rate(passed + failed):.1f}/s, running {current}"

    progress = Progress(line, interval=0.0)
    with LimitedRunner(runner, args.time_limit) as limited, progress:
        for f in files:
            current = f.stem
            progress.tick()
            t0 = time.monotonic()
            out = limited.run(f)
            results.append(Timed(out, time.monotonic() - t0))
            if out.passed:
                passed += 1
                if not junit:
                    progress.out(f"PASS {out.name}")
            else:
                failed += 1
                if not junit:
                    progress.out(f"FAIL {out.name}: {out.detail}")
    summary = (f"{passed} passed, {failed} failed "
               f"({len(files)} file{'' if len(files) == 1 else 's'})")
    xml = junit_xml(results, "kepl scenarios" + (" (kafka)" if args.kafka else ""), started)
    if args.junit_xml:
        Path(args.junit_xml).write_text(xml)
    if junit:
        sys.stdout.write(xml)
        print(f"kepl scenario run: {summary}", file=sys.stderr)
    else:
        print(summary)
    return 1 if failed else 0


def cmd_scenario_record(args: argparse.Namespace) -> int:
    """Record a golden scenario; exit 2 for invalid statements, 1 for a bad steps file."""
    from app.conformance.record import dump, record
    from app.conformance.runner import ScenarioError
    from app.statements import load_statement_file

    if _embedded(args.file) is None:  # says what is wrong with the statements
        return 2
    out = Path(args.output) if args.output else Path("scenario.yaml")
    try:
        rec = record(load_statement_file(args.file), args.events, out, args.name)
    except ScenarioError as e:
        print(f"kepl: scenario record: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"kepl: scenario record: {args.events}: {e.strerror}", file=sys.stderr)
        return 1
    text = dump(rec.doc)
    if args.output:
        out.write_text(text)
        print(f"kepl scenario record: {out}: {rec.events} events, {rec.expects} "
              f"expectation(s) over {len(rec.checked)} statement(s)", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
