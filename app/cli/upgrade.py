"""``kepl deploy FILE [--plan]`` over a running app: compare FILE with the recorded
version, print the plan per statement, and (without ``--plan``) record FILE as the next
version, deleting what ``--delete-removed`` asks (docs/operations.md, "Changing a
running app")."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The upgrade options of ``kepl deploy``."""
    p.add_argument("--plan", action="store_true",
                   help="print what deploying FILE over the running version does, per "
                        "statement, and change nothing")
    p.add_argument("--rebuild", action="append", default=[], metavar="[NAME=]HOW",
                   help="how a changed statement that keeps state is rebuilt: from-now "
                        "(empty state from the next record) or from-earliest (its "
                        "retained input replayed into fresh state); NAME= for one "
                        "statement, else every such statement (repeatable)")
    p.add_argument("--delete-removed", action="store_true",
                   help="delete the state and output topic of statements FILE removes "
                        "(default: kept)")


def rebuild_choices(values: list[str]) -> dict[str, str]:
    """``--rebuild`` values as statement name (``*``: all) -> how."""
    from app.runtime.kafka.deployments import REBUILDS
    from app.statements import ConfigError

    out: dict[str, str] = {}
    for v in values:
        name, _, how = v.rpartition("=")
        if how not in REBUILDS:
            raise ConfigError(f"--rebuild {v}: say {' or '.join(REBUILDS)} "
                              "(NAME=from-now for one statement)")
        out[name or "*"] = how
    return out


def _delete_topics(bootstrap: str, topics: list[str]) -> None:
    from confluent_kafka.admin import AdminClient

    from app.runtime.kafka import client

    if not topics:
        return
    admin = AdminClient(client.conf({"bootstrap.servers": bootstrap, "log_level": 0}))
    for fut in admin.delete_topics(topics, operation_timeout=30).values():
        fut.result()


def _planned(config: Any, bootstrap: str, create: bool) -> Any:
    """The app's layout over its source topics as the broker has them; ``create``: the
    missing ones are created (a deploy), else planned with the file's ``partitions``
    (a ``--plan`` changes nothing)."""
    from confluent_kafka.admin import AdminClient

    from app.runtime.kafka import client
    from app.runtime.kafka.topology import Topology
    from app.runtime.kafka.worker import plan_on_broker

    if create:
        return plan_on_broker(config, bootstrap)
    admin = AdminClient(client.conf({"bootstrap.servers": bootstrap, "log_level": 0}))
    md = admin.list_topics(timeout=30)
    counts = {t: len(md.topics[t].partitions) for t in config.source_topics
              if t in md.topics and md.topics[t].partitions}
    return Topology.plan(config, counts)


def deploy_version(args: argparse.Namespace, config: Any, bootstrap: str) -> int | None:
    """Plan (and record) FILE's version; an exit code to stop with, or None to go on
    creating the topics."""
    from app.runtime.kafka import deployments as d

    rebuild = rebuild_choices(getattr(args, "rebuild", []) or [])
    text = Path(args.file).read_text(encoding="utf-8")
    running = d.read_latest(config, bootstrap)
    if running is None:
        if getattr(args, "plan", False):
            print(f"app {config.app}: no version recorded: deploying {args.file} records "
                  "version 1 with every statement added")
            return 0
        new = d.form_of(_planned(config, bootstrap, True), text, 1)
        d.record(config, bootstrap, new)
        print(f"app {config.app}: version 1 recorded")
        return None
    topology = _planned(config, bootstrap, not args.plan)
    new = d.form_of(topology, text, running.version + 1)
    plan = d.plan_upgrade(running, new, rebuild, args.delete_removed)
    if plan.replays and not plan.refusals:
        from app.runtime.kafka.rebuild import retention_refusals

        plan.refusals += retention_refusals(topology, bootstrap, plan.replays)
    if not plan.changes and not plan.refusals:
        print(f"app {config.app}: version {running.version} runs; {args.file} is the same")
        return 0 if args.plan else None
    head = (f"app {config.app}: version {running.version} runs; {args.file} would be "
            f"version {new.version}:" if args.plan else
            f"app {config.app}: version {running.version} -> {new.version}:")
    print(head)
    for line in plan.lines():
        print(line)
    if plan.refusals:
        print(f"kepl: deploy: {args.file} cannot be deployed over version "
              f"{running.version}: {len(plan.refusals)} refusal(s) above", file=sys.stderr)
        return 2
    if args.plan:
        return 0
    removed_outputs = [running.statements[n].output for n in plan.delete_outputs]
    resets = {**running.resets, **{n: new.version for n in plan.resets}}
    replays = {**running.replays, **{n: new.version for n in plan.replays}}
    d.record(config, bootstrap, d.Deployment(new.version, text, new.statements, new.groups,
                                             resets, replays))
    _delete_topics(bootstrap, [t for t in removed_outputs if t])
    print(f"app {config.app}: version {new.version} recorded; restart the workers (the "
          "chart's rolling restart does) to run it")
    return None
