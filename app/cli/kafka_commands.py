"""Kafka-mode subcommands of ``kepl``: deploy, worker, send, clock, tail, demo."""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from app.statements import ConfigError, StatementFile, load_statement_file

ROOT = Path(__file__).resolve().parent.parent.parent
PROBE_TIMEOUT_S = 5.0
"""How long a command waits for the broker's metadata before saying none answers."""


class Unavailable(Exception):
    """The broker does not answer, the app is not deployed or records were not delivered:
    one line saying what failed, where and what to run (exit 1)."""


def probe_broker(command: str, bootstrap: str) -> set[str]:
    """The topics at ``bootstrap``, asked with a short timeout before a command starts its
    work, so a broker that is down is one line, not a traceback after minutes."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    try:
        return set(admin.list_topics(timeout=PROBE_TIMEOUT_S).topics)
    except KafkaException as e:
        cause = e.args[0].str().removeprefix("Failed to get metadata: ")
        raise Unavailable(f"{command}: no Kafka broker answers at {bootstrap}: {cause} "
                          "(is the broker up? kepl kafka start)") from None


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
    from app.runtime.kafka.config import AppConfig
    from app.runtime.kafka.config import ConfigError as KafkaConfigError

    try:
        return AppConfig.from_dict(sf.raw)
    except KafkaConfigError as e:
        raise ConfigError(f"{sf.path}: {e}") from None


def _check_topology(sf: StatementFile, config: Any) -> None:
    """Plan the Kafka layout; a file it cannot run is a one-line error."""
    from app.runtime.catalog import NotSupported
    from app.runtime.kafka.config import ConfigError as KafkaConfigError
    from app.runtime.kafka.topology import Topology

    try:
        Topology.plan(config)
    except (KafkaConfigError, NotSupported) as e:
        raise ConfigError(f"{sf.path}: {e}") from None


def cmd_deploy(args: argparse.Namespace, bootstrap: str) -> int:
    from app.runtime.kafka.worker import create_topics

    sf = load_statement_file(args.file)
    config = _config(sf)
    _check_topology(sf, config)
    probe_broker("deploy", bootstrap)
    for line in create_topics(config, bootstrap):
        print(line)
    return 0


def cmd_worker(args: argparse.Namespace, bootstrap: str) -> int:
    from app.runtime.kafka.worker import run_worker

    sf = load_statement_file(args.file)
    data_dir = Path(args.data_dir) if args.data_dir else Path(".kepl") / sf.app
    config = _config(sf)
    _check_topology(sf, config)
    probe_broker("worker", bootstrap)
    run_worker(config, bootstrap, data_dir)
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
        _validate_events(sf.schemas, args.type, lines)
    timeout_ms = max(1, int(args.timeout * 1000))
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "message.timeout.ms": timeout_ms, "log_level": 0})
    topic = sf.topic_of(args.type)
    errors: list[str] = []

    def done(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err.str())

    for raw in lines:
        producer.produce(topic, raw.strip().encode(), on_delivery=done)
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


def _validate_events(schemas: dict[str, Any], type_name: str, lines: list[str]) -> None:
    """Check every event as a worker would (``Routing.decode``) before producing any:
    the first one that would be a dead letter stops the command, naming it."""
    from app.runtime.catalog import Catalog, EventTypeError, event_coercer
    from app.runtime.kafka import codec

    coerce = event_coercer(Catalog.from_schemas(schemas), type_name)
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

    from app.runtime.kafka.clock import NotDelivered, publish_watermark

    sf = load_statement_file(args.file)
    cfg = _config(sf)
    if args.time is None and not args.wall:
        raise ConfigError("clock: give a time in ms or --wall")
    _check_topology(sf, cfg)
    require_deployed("clock", bootstrap, args.file, cfg)
    last = last_watermark(bootstrap, cfg.watermark_topic)
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


def last_watermark(bootstrap: str, topic: str) -> int | None:
    """The time of the last watermark on the app's watermark topic (None: none yet).

    Reads the last few records of each partition; the greatest time wins."""
    from confluent_kafka import Consumer, TopicPartition

    from app.runtime.kafka.router import decode_watermark

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kepl-clock",
                         "enable.auto.commit": False, "log_level": 0})
    last: int | None = None
    try:
        md = consumer.list_topics(topic, timeout=PROBE_TIMEOUT_S)
        for p in sorted(md.topics[topic].partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                       timeout=PROBE_TIMEOUT_S)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, p, max(low, high - 16))])
            deadline = time.monotonic() + PROBE_TIMEOUT_S
            while time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is None or msg.error():
                    continue
                try:
                    t, _ = decode_watermark(msg.value())
                    last = t if last is None else max(last, t)
                except ValueError:
                    pass
                if msg.offset() >= high - 1:
                    break
    finally:
        consumer.close()
    return last


def cmd_tail(args: argparse.Namespace, bootstrap: str) -> int:
    from app.runtime.kafka.reader import follow_rows

    sf = load_statement_file(args.file)
    stmts = [s for s in sf.statements if args.statement in (None, s.name)]
    if not stmts:
        raise ConfigError(f"{args.file}: no statement named '{args.statement}'")
    topics = {sf.output_topic(s): s.name for s in stmts}
    config = _config(sf)
    _check_topology(sf, config)
    require_deployed("tail", bootstrap, args.file, config)
    for rec in follow_rows(bootstrap, list(topics), from_beginning=args.from_beginning):
        print(json.dumps(rec, default=str), flush=True)
    return 0


def cmd_demo(args: argparse.Namespace, bootstrap: str) -> int:
    """Broker, topics, worker, sample events and the clock; output printed until Ctrl-C."""
    from app.kafka.local_broker import start, stop
    from app.runtime.kafka.clock import publish_watermark
    from app.runtime.kafka.reader import follow_rows
    from app.runtime.kafka.worker import create_topics

    file = Path(args.file) if args.file else ROOT / "examples" / "bank.yaml"
    sf = load_statement_file(file)
    cfg = _config(sf)
    print(f"kepl demo: starting the local Kafka broker on 127.0.0.1:{args.port} ...",
          flush=True)
    info = start(port=args.port)
    bootstrap = info.bootstrap
    print(f"kepl demo: broker up ({bootstrap}); creating topics", flush=True)
    for line in create_topics(cfg, bootstrap):
        print(f"  {line}", flush=True)
    data_dir = Path(".kepl") / f"demo-{int(time.time())}"
    worker = subprocess.Popen(
        [sys.executable, "-m", "app.cli.main", "worker", str(file), "--bootstrap", bootstrap,
         "--data-dir", str(data_dir)], cwd=ROOT)
    stop_flag = threading.Event()

    def produce() -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": bootstrap})
        rnd = random.Random(7)
        topic = sf.topic_of("Withdrawal")
        t = 1000
        n = 0
        while not stop_flag.is_set():
            n += 1
            event = {"account": f"A{rnd.randint(1, 9)}", "amount": float(rnd.choice(
                [50, 100, 150, 200, 250, 300, 500]))}
            producer.produce(topic, json.dumps(event).encode(), timestamp=t)
            producer.flush(10)
            publish_watermark(bootstrap, cfg, t)
            t += 1000
            stop_flag.wait(1.0)

    threading.Thread(target=produce, daemon=True).start()
    print("kepl demo: worker started; producing one Withdrawal a second. Output rows "
          "(Ctrl-C stops):", flush=True)
    topics = [sf.output_topic(s) for s in sf.statements]
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        for rec in follow_rows(bootstrap, topics, from_beginning=True):
            print(json.dumps(rec, default=str), flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        stop_flag.set()
        worker.terminate()
        try:
            worker.wait(20)
        except subprocess.TimeoutExpired:
            worker.kill()
        print("kepl demo: stopping the broker", flush=True)
        stop(port=args.port)
    return 0
