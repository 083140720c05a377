"""``kepl acls FILE``: the least privileges a worker of FILE needs, as ``kafka-acls.sh``
commands for a platform team to run (``app.runtime.kafka.acls`` says which and why)."""

from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Mount ``acls`` on the ``kepl`` sub-command parser."""
    p = sub.add_parser(
        "acls", help="print the ACLs a worker needs as kafka-acls.sh commands",
        description="Print one kafka-acls.sh --add command per resource a worker of FILE "
                    "uses, with the least operations it needs: its topics, consumer group "
                    "and transactional ids. Topics are assumed created by kepl deploy "
                    "run as the set-up principal.")
    p.add_argument("file", help="the app's statement file (YAML)")
    p.add_argument("--principal", default="User:kepl",
                   help="the worker's principal (default: %(default)s)")
    p.add_argument("--bootstrap", default="127.0.0.1:9092",
                   help="the --bootstrap-server the commands name (default: %(default)s)")
    p.add_argument("--command-config", default=None, metavar="FILE",
                   help="the admin client properties the commands pass to kafka-acls.sh")
    p.add_argument("--create-topics", action="store_true",
                   help="the worker creates the topics itself: add Create on each")
    p.add_argument("--idempotent-write", action="store_true",
                   help="add cluster IdempotentWrite (brokers before Kafka 3.0 need it)")


def cmd_acls(args: argparse.Namespace) -> int:
    """Print the commands; a statement file that is not valid is one line (exit 2)."""
    from app.runtime.kafka.acls import kafka_acls_commands, worker_acls
    from app.runtime.kafka.config import AppConfig
    from app.runtime.kafka.config import ConfigError as KafkaConfigError
    from app.statements import load_statement_file

    sf = load_statement_file(args.file)
    try:
        config = AppConfig.from_dict(sf.raw, sf.base_dir)
    except KafkaConfigError as e:
        print(f"kepl: acls: {args.file}: {e}", file=sys.stderr)
        return 2
    acls = worker_acls(config, args.create_topics, args.idempotent_write)
    print(f"# ACLs of a worker of app {config.app} (principal {args.principal})")
    for acl, line in zip(acls, kafka_acls_commands(acls, args.principal, args.bootstrap,
                                                   args.command_config), strict=True):
        print(f"# {acl.describe()}")
        print(line)
    return 0
