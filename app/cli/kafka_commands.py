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
    for line in create_topics(config, bootstrap):
        print(line)
    return 0


def cmd_worker(args: argparse.Namespace, bootstrap: str) -> int:
    from app.runtime.kafka.worker import run_worker

    sf = load_statement_file(args.file)
    data_dir = Path(args.data_dir) if args.data_dir else Path(".kepl") / sf.app
    config = _config(sf)
    _check_topology(sf, config)
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
    from app.runtime.kafka.clock import publish_watermark

    sf = load_statement_file(args.file)
    cfg = _config(sf)
    if args.wall:
        while True:
            publish_watermark(bootstrap, cfg, int(time.time() * 1000))
            time.sleep(args.interval / 1000)
    if args.time is None:
        raise ConfigError("kepl clock: give a time in ms or --wall")
    publish_watermark(bootstrap, cfg, args.time)
    print(f"watermark {args.time} published")
    return 0


def cmd_tail(args: argparse.Namespace, bootstrap: str) -> int:
    from app.runtime.kafka.reader import follow_rows

    sf = load_statement_file(args.file)
    stmts = [s for s in sf.statements if args.statement in (None, s.name)]
    if not stmts:
        raise ConfigError(f"{args.file}: no statement named '{args.statement}'")
    topics = {sf.output_topic(s): s.name for s in stmts}
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
