"""Conformance scenarios in Kafka mode: a representative share on the real broker.

Every window kind, every public context case, the output forms, an insert-into chain
of three statements, joins (inner, outer, in a keyed context), subqueries (over a
named window, a table, in a keyed context, in on-statements) and match_recognize
(partition by, spread over engine partitions by it, interval, data windows in and out of
arrival order, a named window); the same files pass
embedded (tests/app/conformance).  A hash context numbered by first use also runs with
two workers, two source partitions and a worker killed around a checkpoint.  The whole
public suite runs with ``kepl scenario run --kafka ../shared/conformance/cases``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.conformance.runner import run_file
from app.runtime.kafka.runner import run_scenario_kafka

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parents[4]
PUBLIC = ROOT.parent / "shared" / "conformance" / "cases"
OWN = ROOT / "tests" / "scenarios"

CASES = [
    PUBLIC / "basics_irstream_remove_stream.yaml",
    PUBLIC / "basics_time_window_walkthrough.yaml",
    PUBLIC / "window_time_batch_flow_control.yaml",
    PUBLIC / "window_groupwin_length.yaml",
    PUBLIC / "window_expr_sum_price.yaml",
    PUBLIC / "window_sort.yaml",
    PUBLIC / "window_time_order_rstream.yaml",
    PUBLIC / "window_uni.yaml",
    PUBLIC / "apama_batched_within_every_sum.yaml",
    PUBLIC / "spl_time_interval_partitioned.yaml",
    PUBLIC / "output_last_every_4_seconds.yaml",
    PUBLIC / "output_when_terminated_count_insert.yaml",
    PUBLIC / "output_snapshot_when_terminated.yaml",
    PUBLIC / "basics_batch4seconds_context.yaml",
    *sorted(PUBLIC.glob("context_*.yaml")),  # every context kind, as the issue asks
    OWN / "insert_into_chain.yaml",
    OWN / "context_priority_statement_first.yaml",
    OWN / "table_access_keyed_filter.yaml",
    OWN / "window_linest_regression.yaml",
    OWN / "window_correl_correlation.yaml",
    OWN / "join_inner_windows.yaml",
    OWN / "join_outer.yaml",
    OWN / "join_keyed_context.yaml",
    OWN / "context_hash_ids_first_use.yaml",
    OWN / "subquery_named_window_table_context.yaml",
    OWN / "subquery_on_statements.yaml",
    OWN / "match_recognize_partition.yaml",
    OWN / "match_recognize_interval.yaml",
    OWN / "match_recognize_window.yaml",
    OWN / "match_recognize_window_out_of_order.yaml",
    OWN / "match_recognize_named_window.yaml",
    OWN / "match_recognize_partition_routed.yaml",
]

SPREAD = [OWN / "context_hash_ids_first_use.yaml",
          OWN / "match_recognize_partition_routed.yaml"]
"""Scenarios whose rows must not depend on how many workers and source partitions run
them (a hash context numbers its buckets across engine partitions; match_recognize
statements spread by their partition by)."""


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_scenario_in_kafka_mode(path: Path, kafka_bootstrap: str) -> None:
    outcome = run_file(path, lambda doc: run_scenario_kafka(doc, kafka_bootstrap))
    assert outcome.passed, outcome.detail


@pytest.mark.parametrize(("workers", "sources", "crash_at"),
                         [(2, 1, None), (1, 2, None), (2, 2, None),
                          (1, 2, "before_flush:2"), (1, 2, "after_flush:2")])
@pytest.mark.parametrize("path", SPREAD, ids=[p.stem for p in SPREAD])
def test_scenario_with_workers_and_source_partitions(
        path: Path, workers: int, sources: int, crash_at: str | None,
        kafka_bootstrap: str) -> None:
    """Several workers, several source partitions, a worker killed around a checkpoint
    and started again: the same rows."""
    outcome = run_file(path, lambda doc: run_scenario_kafka(
        doc, kafka_bootstrap, crash_at, workers=workers, source_partitions=sources))
    assert outcome.passed, outcome.detail
