"""The worker's metrics registry without a broker: what a checkpoint, a rebalance and a
fenced predecessor put in the exposition, and that it holds only declared series."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.health import (
    METRICS,
    Metrics,
    note_rebalance,
    record_exit,
    series_names,
)
from app.runtime.kafka.statesize import StateSizes
from app.runtime.kafka.topology import Topology
from app.runtime.timing import StatementTiming


def samples(m: Metrics) -> dict[str, float]:
    out = {}
    for line in m.exposition().decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def fake_worker() -> SimpleNamespace:
    config = AppConfig.from_dict({
        "app": "shop",
        "schemas": {"Order": {"id": "string", "amount": "double"}},
        "statements": [
            {"name": "big", "epl": "select * from Order(amount > 100)"},
            {"name": "totals", "epl": "select sum(amount) as t from Order#length(10)"},
        ]})
    topology = Topology.plan(config)
    [group] = topology.active_groups()
    sizes = StateSizes()
    sizes.bytes, sizes.cursor = {"totals": 640}, None  # counted
    part_timing, lane_timing = StatementTiming(every=4), StatementTiming(every=4)
    part_timing.add("totals", 0.25)
    lane_timing.add("big", 0.125)
    part = SimpleNamespace(group=group, busy_s=0.25, sizes=sizes,
                           store=SimpleNamespace(base=None),
                           engine=SimpleNamespace(timing=part_timing))
    lane = SimpleNamespace(busy_s=0.5, engine=SimpleNamespace(timing=lane_timing))
    inputs = [SimpleNamespace(topic=config.topic_of("Order"), lane=lane)]
    return SimpleNamespace(config=config, topology=topology, parts={(group.name, 0): part},
                           inputs=inputs)


def test_a_checkpoint_exports_processing_time_and_state_bytes(tmp_path: Path) -> None:
    worker = fake_worker()
    m = Metrics("shop", tmp_path)
    m.observe_parts(worker)
    s = samples(m)
    group = worker.topology.active_groups()[0].name
    topic = worker.config.topic_of("Order")
    assert s[f'kepl_processing_seconds_total{{app="shop",group="{group}"}}'] == 0.25
    assert s[f'kepl_processing_seconds_total{{app="shop",group="lanes:{topic}"}}'] == 0.5
    assert s[f'kepl_statement_info{{app="shop",group="{group}",statement="totals"}}'] == 1
    assert s[f'kepl_statement_info{{app="shop",group="lanes:{topic}",statement="big"}}'] == 1
    assert s['kepl_state_bytes{app="shop",statement="totals"}'] == 640
    # the sampled step times, each standing for 4 events
    assert s['kepl_statement_processing_seconds_total{app="shop",statement="totals"}'] == 1.0
    assert s['kepl_statement_processing_seconds_total{app="shop",statement="big"}'] == 0.5
    assert worker.parts[(group, 0)].busy_s == 0 and worker.inputs[0].lane.busy_s == 0
    # a partition that moved away leaves its statement at 0, not at its last figure
    worker.parts.clear()
    m.observe_parts(worker)
    assert samples(m)['kepl_state_bytes{app="shop",statement="totals"}'] == 0


def test_rebalances_and_a_fenced_predecessor(tmp_path: Path) -> None:
    record_exit(tmp_path, 3)
    m = Metrics("shop", tmp_path)
    assert samples(m)['kepl_previous_exit_code{app="shop"}'] == 3
    assert not (tmp_path / "last-exit").exists()
    assert samples(Metrics("shop", tmp_path))['kepl_previous_exit_code{app="shop"}'] == 0
    note_rebalance(m, "assigned", 4)
    note_rebalance(m, "revoked", 0)
    note_rebalance(m, "assigned", 2)
    note_rebalance(None, "lost", 0)
    s = samples(m)
    assert s['kepl_rebalances_total{app="shop",kind="assigned"}'] == 2
    assert s['kepl_rebalances_total{app="shop",kind="revoked"}'] == 1
    assert s['kepl_rebalances_total{app="shop",kind="lost"}'] == 0
    assert s['kepl_assigned_partitions{app="shop"}'] == 2


def test_the_exposition_holds_the_declared_families_only(tmp_path: Path) -> None:
    m = Metrics("shop", tmp_path)
    m.observe_parts(fake_worker())
    m.set_lag({("orders", 0): 5})
    m.add_rows({"big": 3})
    m.add_lost("orders[0]", 1)
    m.restore_s.observe(0.5)
    m.checkpoint_s.observe(0.01)
    text = m.exposition().decode()
    families = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")}
    assert {n.removesuffix("_total").removesuffix("_created") for n in families} \
        == set(METRICS)
    names = {line.split("{")[0].split(" ")[0] for line in text.splitlines()
             if line and not line.startswith("#")}
    assert names <= series_names()
