"""Kafka-mode subcommands of ``kepl``: deploy, worker, send, clock, tail, status,
undeploy, reset, demo."""

from __future__ import annotations

import argparse
import json
import logging
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.statements import ConfigError, StatementFile, load_statement_file

ROOT = Path(__file__).resolve().parent.parent.parent
DEMO_FILE = Path(__file__).with_name("bank.yaml")
"""The demo's statement file (package data; ``examples/bank.yaml`` links to it)."""
PROBE_TIMEOUT_S = 5.0
"""How long a command waits for the broker's metadata before saying none answers."""


class Unavailable(Exception):
    """The broker does not answer, the app is not deployed or records were not delivered:
    one line saying what failed, where and what to run (exit 1)."""


def probe_broker(command: str, bootstrap: str) -> set[str]:
    """The topics at ``bootstrap``, asked with a short timeout before a command starts its
    work, so a broker that is down, or one that refuses the credentials, is one line,
    not a traceback after minutes."""
    from app.runtime.kafka import client

    try:
        return client.probe(bootstrap, command, PROBE_TIMEOUT_S)
    except (client.BrokerUnavailable, client.ClientConfigError) as e:
        raise Unavailable(str(e)) from None


def require_deployed(command: str, bootstrap: str, file: str | Path, config: Any) -> None:
    """Probe the broker and check that every topic of the app exists (``kepl deploy``)."""
    from app.runtime.kafka.topology import Topology

    missing = sorted(set(Topology.plan(config).topic_specs()) - probe_broker(command, bootstrap),
                     key=lambda t: (t not in config.source_topics, t))
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise Unavailable(f"{command}: app {config.app} is not deployed at {bootstrap}: "
                          f"topic {missing[0]}{more} does not exist (kepl deploy {file})")


def _config(sf: StatementFile) -> Any:
    """The app config of a statement file; its ``kafka:`` settings become this process's
    client settings (``app.runtime.kafka.client``)."""
    from app.runtime.kafka import client
    from app.runtime.kafka.config import AppConfig
    from app.runtime.kafka.config import ConfigError as KafkaConfigError

    try:
        config = AppConfig.from_dict(sf.raw, sf.base_dir)
        client.configure(config.kafka)
    except (KafkaConfigError, client.ClientConfigError) as e:
        raise ConfigError(f"{sf.path}: {e}") from None
    return config


def client_conf(sf: StatementFile, base: dict[str, Any]) -> dict[str, Any]:
    """A client configuration for a command that reads a statement file but needs no
    app config (``kepl send``): its ``kafka:`` settings laid over ``base``."""
    from app.runtime.kafka import client

    try:
        client.configure(sf.raw.get("kafka"))
        return client.conf(base)
    except client.ClientConfigError as e:
        raise ConfigError(f"{sf.path}: {e}") from None


def _check_topology(sf: StatementFile, config: Any) -> None:
    """Plan the Kafka layout; a file it cannot run is a one-line error (an invalid
    statement: its first error at its line and column in the file)."""
    from app.cli.check import first_error
    from app.epl.errors import EplError
    from app.runtime.catalog import NotSupported
    from app.runtime.kafka.config import ConfigError as KafkaConfigError
    from app.runtime.kafka.topology import Topology

    try:
        Topology.plan(config)
    except (KafkaConfigError, NotSupported) as e:
        raise ConfigError(f"{sf.path}: {e}") from None
    except EplError as e:
        raise ConfigError(first_error(sf.path) or f"{sf.path}: {e.message}") from None


def cmd_deploy(args: argparse.Namespace, bootstrap: str) -> int:
    from app.cli.upgrade import deploy_version
    from app.runtime.kafka.worker import create_topics

    sf = load_statement_file(args.file)
    config = _config(sf)
    _check_topology(sf, config)
    existing = probe_broker("deploy", bootstrap)
    code = deploy_version(args, config, bootstrap)
    if code is not None:
        return code
    for line in create_topics(config, bootstrap) + _register_outputs(config):
        print(line)
    for note in retention_notes(bootstrap, [t for t in config.source_topics if t in existing]):
        print(f"kepl: deploy: note: {note}", file=sys.stderr)
    return 0


def _register_outputs(config: Any) -> list[str]:
    """The Avro, JSON Schema and Protobuf output schemas registered
    (``formats.register_outputs``)."""
    from app.runtime.kafka import formats

    try:
        return formats.register_outputs(config)
    except formats.FormatError as e:
        raise ConfigError(f"kepl deploy: {e}") from None


def retention_notes(bootstrap: str, topics: list[str]) -> list[str]:
    """A line per source topic that existed before ``kepl deploy`` (which leaves it as
    it is) and deletes records by time: records stamped with runtime times near 0, as
    ``kepl clock`` and ``kepl demo`` write them, go at the broker's next retention check
    (source topics kepl creates keep every record: ``topology.SOURCE_CONFIG``)."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    from app.runtime.kafka import client

    if not topics:
        return []
    admin = AdminClient(client.conf({"bootstrap.servers": bootstrap, "log_level": 0}))
    res = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
    out = []
    for r, fut in admin.describe_configs(res, request_timeout=PROBE_TIMEOUT_S).items():
        try:
            ms = int(fut.result().get("retention.ms").value)
        except Exception:  # noqa: BLE001 - a note only: no answer, no note
            continue
        if ms >= 0:
            out.append(f"source topic {r.name} existed and deletes records older than "
                       f"{ms / 3_600_000:g} h (retention.ms={ms}) by their timestamps; "
                       "records stamped with runtime times (kepl clock, kepl demo) are "
                       "that old at once (kafka-configs --alter --add-config "
                       f"retention.ms=-1 --entity-type topics --entity-name {r.name} "
                       "keeps them)")
    return out


def data_dir_of(args: argparse.Namespace, app: str) -> Path:
    """``--data-dir``, else ``.kepl/<app>``: where ``kepl worker`` keeps its state."""
    return Path(args.data_dir) if args.data_dir else Path(".kepl") / app


def cmd_worker(args: argparse.Namespace, bootstrap: str) -> int:
    """Run a worker; a banner, its rebalances and restores and a closing line go to
    stderr whatever ``--log-level`` says, the worker's own logs by ``--log-level``."""
    from app.runtime.kafka.refusals import NotAuthorized
    from app.runtime.kafka.shutdown import SHUTDOWN
    from app.runtime.kafka.worker import run_worker

    sf = load_statement_file(args.file)
    data_dir = data_dir_of(args, sf.app)
    config = _config(sf)
    _check_topology(sf, config)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    probe_broker("worker", bootstrap)

    def announce(line: str) -> None:
        print(f"kepl worker: {line}", file=sys.stderr, flush=True)

    SHUTDOWN.install()  # a stop before the loop runs exits at once, cleanly
    from app.runtime.kafka.deployments import EXIT_OTHER_VERSION, OtherVersion

    try:
        run_worker(config, bootstrap, data_dir, args.log_level, args.metrics_port,
                   announce)
    except OtherVersion as e:
        print(f"kepl: {e}", file=sys.stderr)
        return EXIT_OTHER_VERSION
    except NotAuthorized as e:
        raise Unavailable(f"worker: {e}") from None
    return 0


def cmd_send(args: argparse.Namespace, bootstrap: str) -> int:
    """Produce events and wait for every acknowledgement: what was not acknowledged in
    ``--timeout`` seconds is reported (exit 1), never announced as sent."""
    from confluent_kafka import Producer

    sf = load_statement_file(args.file)
    if args.type not in sf.schemas:
        raise ConfigError(f"{args.file}: unknown event type '{args.type}'")
    lines = args.events or [ln for ln in sys.stdin if ln.strip()]
    if not args.no_validate:
        _validate_events(sf.schemas, args.type, lines, sf.raw.get("max_string_length"))
    timeout_ms = max(1, int(args.timeout * 1000))
    producer = Producer(client_conf(sf, {"bootstrap.servers": bootstrap,
                                         "enable.idempotence": True,
                                         "message.timeout.ms": timeout_ms, "log_level": 0}))
    topic = sf.topic_of(args.type)
    values = _encoded(sf, args.type, topic, lines)
    errors: list[str] = []

    def done(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err.str())

    for value in values:
        producer.produce(topic, value, on_delivery=done)
    left = producer.flush(args.timeout + 5)
    failed = len(errors) + left
    if failed:
        cause = errors[0] if errors else "no acknowledgement"
        print(f"kepl: send: {failed} of {len(lines)} event(s) not delivered to {topic} at "
              f"{bootstrap}: {cause} (is the broker up? kepl kafka start; is the app "
              f"deployed? kepl deploy {args.file})", file=sys.stderr)
        return 1
    print(f"sent {len(lines)} event(s) to {topic}")
    return 0


def _encoded(sf: Any, type_name: str, topic: str, lines: list[str]) -> list[bytes]:
    """The record values of JSON-line events: as they are for a JSON topic, else in the
    type's format (``formats.event_encoder``: Avro, JSON Schema or Protobuf, the
    Confluent wire format, the writer schema from the registry)."""
    from app.runtime.kafka import codec, formats

    try:
        encode = formats.event_encoder(sf.raw, type_name, topic)
    except formats.FormatError as e:
        raise ConfigError(f"send: {e}") from None
    if encode is None:
        return [raw.strip().encode() for raw in lines]
    out = []
    for n, raw in enumerate(lines, 1):
        try:
            out.append(encode(codec.loads(raw.strip().encode())))
        except ValueError as e:
            raise ConfigError(f"send: event {n} not sent (nothing was): {e}") from None
    return out


def _validate_events(schemas: dict[str, Any], type_name: str, lines: list[str],
                     max_string_length: Any = None) -> None:
    """Check every event as a worker would (``Routing.decode``) before producing any:
    the first one that would be a dead letter stops the command, naming it."""
    from app.runtime.catalog import Catalog, EventTypeError, event_coercer, string_limits
    from app.runtime.kafka import codec

    coerce = event_coercer(Catalog.from_schemas(schemas, string_limits(max_string_length)),
                           type_name)
    for n, raw in enumerate(lines, 1):
        try:
            try:
                event = codec.loads(raw.strip().encode())
            except ValueError as e:
                raise EventTypeError(f"not JSON: {e}") from None
            if not isinstance(event, dict):
                raise EventTypeError(f"an event of {type_name} must be a JSON object")
            coerce(event)
        except EventTypeError as e:
            raise ConfigError(f"send: event {n} not sent (nothing was): {e}") from None


def cmd_clock(args: argparse.Namespace, bootstrap: str) -> int:
    """Publish watermark TIME (or the wall clock, repeatedly, with ``--wall``) once the
    broker answers and the app is deployed; a time before the last watermark on the
    app's watermark topic is refused (exit 2), as the embedded engine refuses it."""
    from confluent_kafka import KafkaException

    from app.runtime.kafka.clock import NotDelivered, last_watermark, publish_watermark

    sf = load_statement_file(args.file)
    cfg = _config(sf)
    if getattr(args, "from_events", False):
        return _clock_from_events(args, bootstrap, sf, cfg)
    if args.time is None and not args.wall:
        raise ConfigError("clock: give a time in ms, --wall or --from-events")
    _check_topology(sf, cfg)
    require_deployed("clock", bootstrap, args.file, cfg)
    last = last_watermark(bootstrap, cfg.watermark_topic, PROBE_TIMEOUT_S)
    t = int(time.time() * 1000) if args.wall else args.time
    if last is not None and t < last:
        raise ConfigError(f"clock: time cannot move backwards ({t} < {last}, the last "
                          f"watermark on {cfg.watermark_topic})")
    while True:
        try:
            publish_watermark(bootstrap, cfg, t, args.timeout)
        except (NotDelivered, KafkaException) as e:
            cause = e.cause if isinstance(e, NotDelivered) else e.args[0].str()
            raise Unavailable(f"clock: watermark {t} not delivered at {bootstrap}: {cause} "
                              "(is the broker up? kepl kafka start)") from None
        if not args.wall:
            print(f"watermark {t} published")
            return 0
        time.sleep(args.interval / 1000)
        t = max(t, int(time.time() * 1000))


def _clock_from_events(args: argparse.Namespace, bootstrap: str, sf: Any, cfg: Any) -> int:
    """``kepl clock FILE --from-events``: watermarks from the events' time, until
    stopped (``eventtime.EventClock``)."""
    from app.runtime.kafka.clock import last_watermark
    from app.runtime.kafka.event_clock import EventClock
    from app.runtime.kafka.shutdown import SHUTDOWN

    if cfg.event_time is None:
        raise ConfigError(f"clock: {args.file} has no 'event_time' section "
                          "(event_time: {delay_ms: ..., idle_ms: ...})")
    if args.time is not None or args.wall:
        raise ConfigError("clock: --from-events takes no time and no --wall")
    _check_topology(sf, cfg)
    require_deployed("clock", bootstrap, args.file, cfg)
    clock = EventClock(bootstrap, cfg,
                       last_watermark(bootstrap, cfg.watermark_topic, PROBE_TIMEOUT_S))
    SHUTDOWN.install()
    SHUTDOWN.worker = clock  # a signal sets clock.stopping
    print(f"clock: watermarks from the events of {', '.join(cfg.source_topics)} "
          f"(delay {cfg.event_time.delay_ms} ms, idle {cfg.event_time.idle_ms} ms); "
          "Ctrl-C stops", file=sys.stderr)
    try:
        clock.run(lambda: clock.stopping)
    finally:
        clock.close()
    print(f"clock: {clock.published} watermark(s) published, the last {clock.last}",
          file=sys.stderr)
    return 0


class BrokerWatch:
    """One line per change of the broker's reachability, instead of librdkafka's log
    lines: its logs go to a silent logger, its errors to ``error_cb``.

    librdkafka says ``_ALL_BROKERS_DOWN`` only when every broker connection it keeps is
    down at once, and nothing at all while a broker hangs with its connections open.
    So a connection error, or ``IDLE_PROBE_S`` without a row, makes ``check`` ask for
    metadata: no answer within ``PROBE_S`` is "unreachable"."""

    DOWN = ("_ALL_BROKERS_DOWN",)
    SUSPECT = ("_TRANSPORT", "_ALL_BROKERS_DOWN", "_TIMED_OUT")
    IDLE_PROBE_S = 5.0
    PROBE_S = 3.0

    def __init__(self, command: str, bootstrap: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.command = command
        self.bootstrap = bootstrap
        self.clock = clock
        self.down = False
        self.suspect = False
        """A connection error since the last check: ask the broker."""
        self.answered = clock()
        """When the broker last answered (a row, or metadata)."""
        self.closing = False
        """Set while the clients close: errors they queued while not polled are old news."""
        quiet = logging.getLogger(f"kepl.{command}.kafka")
        quiet.propagate = False
        quiet.addHandler(logging.NullHandler())
        self.conf: dict[str, Any] = {"logger": quiet, "error_cb": self.error,
                                     "log.connection.close": False}

    def say(self, text: str) -> None:
        print(f"kepl: {self.command}: {text}", file=sys.stderr, flush=True)

    def error(self, err: Any) -> None:
        from confluent_kafka import KafkaError

        if self.closing or self.down:
            return
        if err.code() in {getattr(KafkaError, name) for name in self.DOWN}:
            self.went_down()
        elif err.code() in {getattr(KafkaError, name) for name in self.SUSPECT}:
            self.suspect = True

    def went_down(self) -> None:
        self.down = True
        self.suspect = False
        self.say(f"broker {self.bootstrap} unreachable, retrying")

    def alive(self) -> None:
        """The broker answered (a row arrived)."""
        self.answered = self.clock()

    def check(self, client: Any) -> None:
        """Between polls: while down, an answer to a metadata request means connected
        again; while up, after a connection error or a quiet spell, no answer means
        down."""
        from confluent_kafka import KafkaException

        now = self.clock()
        if not self.down and not self.suspect and now - self.answered < self.IDLE_PROBE_S:
            return
        try:
            client.list_topics(timeout=1.0 if self.down else self.PROBE_S)
        except KafkaException:
            if not self.down:
                self.went_down()
            return
        finally:
            self.suspect = False
        self.answered = self.clock()
        if self.down:
            self.down = False
            self.say(f"connected to {self.bootstrap}")


def cmd_tail(args: argparse.Namespace, bootstrap: str) -> int:
    """Rows of the output topics, each once (by row id): from the beginning (default) or
    the end, then as they arrive (``--follow``, default) or up to the current end."""
    from app.runtime.kafka.reader import RowReader

    sf = load_statement_file(args.file)
    if args.statement and args.statement_opt and args.statement != args.statement_opt:
        raise ConfigError(f"tail: two statements given ({args.statement}, "
                          f"{args.statement_opt}); give one")
    name = args.statement_opt or args.statement
    stmts = [s for s in sf.statements if name in (None, s.name)]
    if not stmts:
        raise ConfigError(f"{args.file}: no statement named '{name}'")
    topics = sorted({sf.output_topic(s) for s in stmts})
    config = _config(sf)
    _check_topology(sf, config)
    require_deployed("tail", bootstrap, args.file, config)
    if not args.follow and not args.from_beginning:
        return 0  # from the end, up to the end: nothing
    watch = BrokerWatch("tail", bootstrap)
    reader = RowReader(bootstrap, topics, from_beginning=args.from_beginning, conf=watch.conf)
    try:
        if not args.follow:
            # topic by topic, each in its order: the same output for the same topics
            for row in sorted(reader.read_available(),
                              key=lambda r: (r.topic, r.partition, r.offset)):
                print(json.dumps(row.as_dict(), default=str), flush=True)
            return 0
        for row in reader.follow(on_poll=lambda: watch.check(reader.consumer)):
            watch.alive()
            print(json.dumps(row.as_dict(), default=str), flush=True)
    finally:
        watch.closing = True
        reader.close()
    return 0


def _ops_config(args: argparse.Namespace, command: str, bootstrap: str) -> Any:
    sf = load_statement_file(args.file)
    config = _config(sf)
    _check_topology(sf, config)
    probe_broker(command, bootstrap)
    return config


def cmd_status(args: argparse.Namespace, bootstrap: str) -> int:
    """The app's topics, consumer group, lag, watermark, dead letters and changelogs."""
    from confluent_kafka import KafkaException

    from app.runtime.kafka.ops import BrokerError, app_status, render_status

    config = _ops_config(args, "status", bootstrap)

    def fetch() -> dict[str, Any]:
        try:
            return app_status(config, bootstrap,
                              data_dir=Path(args.data_dir) if args.data_dir else None)
        except (BrokerError, KafkaException) as e:
            # a broker that keeps answering with a transient error (a group coordinator
            # still loading), or refuses a request: which request, and why
            cause = e.args[0].str() if isinstance(e, KafkaException) and e.args and \
                hasattr(e.args[0], "str") else str(e)
            raise Unavailable(f"status: {cause} (at {bootstrap})") from None

    if args.watch or args.count is not None:
        from app.cli.status_watch import watch

        if args.json:
            raise ConfigError("status: --watch shows the table; --json is one document")
        if args.interval <= 0:
            raise ConfigError("status: --interval must be above 0 seconds")
        return watch(fetch, render_status, args.interval, args.count)
    st = fetch()
    if args.json:
        print(json.dumps(st, indent=2))
    else:
        print("\n".join(render_status(st)))
    return 0


def _confirm(command: str, plan: list[str], yes: bool) -> bool:
    """Without ``--yes``: print what ``command`` would do and say how to do it."""
    if yes:
        return True
    print(f"{command} would:")
    for line in plan:
        print(f"  {line}")
    print(f"kepl: {command}: nothing done; add --yes to do it", file=sys.stderr)
    return False


def cmd_undeploy(args: argparse.Namespace, bootstrap: str) -> int:
    """Delete the app's internal and output topics and its consumer group (and, with
    ``--delete-state``, the local state); refused while workers run."""
    from app.runtime.kafka.ops import (
        Broker,
        BrokerError,
        Busy,
        group_id,
        planned_topics,
        require_idle,
    )
    from app.runtime.kafka.ops import undeploy as do_undeploy

    config = _ops_config(args, "undeploy", bootstrap)
    state = data_dir_of(args, config.app) if args.delete_state else None
    try:
        require_idle(Broker(bootstrap), config, "undeploy")
        topics = [t for _, t, _ in planned_topics(config, bootstrap, (
            "repartition", "changelog", "output", "dlq", "watermark", "progress"))]
        from app.runtime.kafka.deployments import deployments_topic

        if deployments_topic(config) in Broker(bootstrap).topics:  # its recorded versions
            topics.append(deployments_topic(config))
        plan = [f"delete topic {t}" for t in topics]
        plan.append(f"delete consumer group {group_id(config)}")
        if state is not None:
            plan.append(f"delete state directory {state}")
        if not _confirm("undeploy", plan, args.yes):
            return 2
        for line in do_undeploy(config, bootstrap, topics, state):
            print(line)
    except (Busy, BrokerError) as e:
        raise Unavailable(f"{e}" if isinstance(e, Busy) else f"{args.command}: {e} (at "
                          f"{bootstrap})") from None
    return 0


def cmd_reset(args: argparse.Namespace, bootstrap: str) -> int:
    """Rewind the app to the beginning of its inputs with fresh state; refused while
    workers run."""
    from app.runtime.kafka.ops import (
        RESET_ROLES,
        Broker,
        BrokerError,
        Busy,
        group_id,
        planned_topics,
        require_idle,
    )
    from app.runtime.kafka.ops import reset as do_reset

    config = _ops_config(args, "reset", bootstrap)
    state = data_dir_of(args, config.app)
    try:
        require_idle(Broker(bootstrap), config, "reset")
        topics = planned_topics(config, bootstrap, RESET_ROLES)
        plan = [f"delete consumer group {group_id(config)} (its committed offsets)"]
        plan += [f"delete and recreate topic {t}" for _, t, _ in topics]
        plan.append(f"delete state directory {state}")
        if not _confirm("reset", plan, args.yes):
            return 2
        for line in do_reset(config, bootstrap, topics, state):
            print(line)
    except (Busy, BrokerError) as e:
        raise Unavailable(f"{e}" if isinstance(e, Busy) else f"{args.command}: {e} (at "
                          f"{bootstrap})") from None
    return 0


def demo_file(sf: StatementFile, data_dir: Path) -> Path:
    """A copy of the statement file whose app (``<app>-demo``) and topics
    (``<app>-demo.<topic>``) are the demo's own, so the demo never feeds nor reads the
    app the README's steps deploy.  Written into ``data_dir``."""
    import yaml

    doc = dict(sf.raw)
    app = f"{sf.app}-demo"
    doc["app"] = app
    doc["topics"] = {t: f"{app}.{sf.topic_of(t)}" for t in sf.schemas}
    doc["statements"] = [
        {**s, "output_topic": f"{app}.{s['output_topic']}"} if s.get("output_topic") else s
        for s in doc.get("statements") or []]
    data_dir.mkdir(parents=True, exist_ok=True)
    out = data_dir / f"{app}.yaml"
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def cmd_demo(args: argparse.Namespace, bootstrap: str) -> int:
    """Broker, topics, worker, sample events and the clock; output printed until Ctrl-C."""
    from app.cli.progress import Progress
    from app.kafka.local_broker import start, stop
    from app.runtime.kafka.children import die_with_parent
    from app.runtime.kafka.clock import publish_watermark
    from app.runtime.kafka.reader import RowReader
    from app.runtime.kafka.worker import create_topics

    given = Path(args.file) if args.file else DEMO_FILE
    # absolute: the worker runs from the project's root, the demo from anywhere
    data_dir = (Path(".kepl") / f"demo-{int(time.time())}").resolve()
    file = demo_file(load_statement_file(given), data_dir)
    sf = load_statement_file(file)
    cfg = _config(sf)
    print(f"kepl demo: starting the local Kafka broker on 127.0.0.1:{args.port} ...",
          flush=True)
    info = start(port=args.port)
    bootstrap = info.bootstrap
    ours = info.started_in_s is not None  # stopped at the end; one already up goes on
    print(f"kepl demo: broker up ({bootstrap}{'' if ours else ', already running'}); "
          "creating topics", flush=True)
    for line in create_topics(cfg, bootstrap):
        print(f"  {line}", flush=True)
    worker = subprocess.Popen(
        [sys.executable, "-m", "app.cli.main", "worker", str(file), "--bootstrap", bootstrap,
         "--data-dir", str(data_dir)], cwd=ROOT,
        preexec_fn=die_with_parent(signal.SIGTERM))
    stop_flag = threading.Event()

    def produce() -> None:
        from confluent_kafka import Producer

        from app.runtime.kafka import client

        producer = Producer(client.conf({"bootstrap.servers": bootstrap,
                                         "message.timeout.ms": 10_000}))
        rnd = random.Random(7)
        topic = sf.topic_of("Withdrawal")
        t = 1000
        failed: list[str] = []

        def done(err: Any, _msg: Any) -> None:
            if err is not None:
                failed.append(err.str())

        while not stop_flag.is_set():
            event = {"account": f"A{rnd.randint(1, 9)}", "amount": float(rnd.choice(
                [50, 100, 150, 200, 250, 300, 500]))}
            producer.produce(topic, json.dumps(event).encode(), timestamp=t,
                             on_delivery=done)
            if producer.flush(15) or failed:
                cause = failed[0] if failed else "no acknowledgement within 15 s"
                print(f"kepl demo: an event was not delivered to {topic} at {bootstrap}: "
                      f"{cause}; the producer stops", file=sys.stderr, flush=True)
                return
            try:
                publish_watermark(bootstrap, cfg, t)
            except RuntimeError as e:
                print(f"kepl demo: {e}; the producer stops", file=sys.stderr, flush=True)
                return
            seen["events"] += 1
            seen["clock"] = t
            t += 1000
            stop_flag.wait(1.0)

    # events produced, the last watermark, rows read and the newest row's time
    seen = {"events": 0, "clock": 0, "rows": 0, "time": 0}

    def line(final: bool) -> str:
        text = f"kepl demo: {seen['events']} events, {seen['rows']} rows"
        if final:
            return text
        lag = max(0, seen["clock"] - seen["time"]) if seen["rows"] else seen["clock"]
        return text + f", {progress.rate(seen['rows']):.1f} rows/s, lag {lag} ms"

    progress = Progress(line)
    threading.Thread(target=produce, daemon=True).start()
    print("kepl demo: worker started; producing one Withdrawal a second. Output rows "
          "(Ctrl-C stops):", flush=True)
    topics = [sf.output_topic(s) for s in sf.statements]
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    reader = None
    try:
        reader = RowReader(bootstrap, topics, from_beginning=True)
        for row in reader.follow(on_poll=progress.tick):
            seen["rows"] += 1
            seen["time"] = max(seen["time"], row.time_ms)
            progress.out(json.dumps(row.as_dict(), default=str))
            progress.tick()
    except KeyboardInterrupt:
        pass
    finally:
        progress.close()
        if reader is not None:
            reader.close()
        stop_flag.set()
        worker.terminate()
        try:
            worker.wait(20)
        except subprocess.TimeoutExpired:
            worker.kill()
        if ours:
            print("kepl demo: stopping the broker", flush=True)
            stop(port=args.port)
        else:
            print(f"kepl demo: the broker at {bootstrap} was running before the demo; "
                  "it goes on (kepl kafka stop stops it)", flush=True)
    return 0
