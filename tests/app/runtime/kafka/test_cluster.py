"""A worker on a local 3-node cluster (replication factor 3, ``min.insync.replicas``
2): the node leading an input partition is killed with ``kill -9`` and started again
mid-stream; the raw output (read_committed, no deduplication) equals the embedded run,
and the worker says once that the broker was lost and once that it is back.
Marked ``cluster`` (three JVMs, about 90 s on two cores): ``make test-cluster`` runs
it; ``make chaos-cluster`` runs the long version (``cluster_chaos.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.kafka import local_cluster
from tests.app.runtime.kafka.cluster_chaos import ClusterChaos, cluster_app


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[local_cluster.ClusterInfo]:
    data_dir: Path = tmp_path_factory.mktemp("kafka-cluster")
    port = local_cluster.free_port_run(6)
    try:
        info = local_cluster.start(port, 3, data_dir, wait_s=180, die_with_parent=True)
    except BaseException:
        local_cluster.stop(data_dir=data_dir, timeout_s=10)
        raise
    try:
        yield info
    finally:
        local_cluster.stop(data_dir=data_dir, timeout_s=20)


def test_cluster_app_asks_for_three_replicas() -> None:
    from app.runtime.kafka.topology import REPLICATION, Topology

    specs = Topology.plan(cluster_app("x")).topic_specs()
    assert {cfg[REPLICATION] for _, cfg in specs.values()} == {"3"}
    assert specs["kepl.x.changelog.ByAccount"][1]["min.insync.replicas"] == "2"


@pytest.mark.kafka
@pytest.mark.cluster
@pytest.mark.timeout(420)
def test_leader_of_an_input_partition_killed(cluster: local_cluster.ClusterInfo) -> None:
    chaos = ClusterChaos(cluster, events=3000, kills=1, rolling=False, outage=False,
                         scale=False, down_s=(3, 3))
    try:
        outcome = chaos.run(timeout_s=360)
    finally:
        chaos.close()
    summary = outcome.summary()
    print(summary)
    assert outcome.kills == {"input": 1}, summary
    assert outcome.expected > 3000, summary
    assert (outcome.lost, outcome.duplicated, outcome.mismatched) == (0, 0, 0), \
        (outcome.problems, summary)
    assert outcome.read == outcome.expected, summary
    assert outcome.tracebacks == 0, summary
    # one line when the broker is lost, one when it is back (a broker that drops the
    # connection again while it starts is lost and back once more)
    assert outcome.broker_lines["lost"] >= 1, summary
    assert outcome.broker_lines["back"] == outcome.broker_lines["lost"], summary
