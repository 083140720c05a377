"""The local cluster's layout (ports, quorum, replication of internal topics) and its
command line, without starting a JVM (``test_cluster.py`` starts one)."""

from __future__ import annotations

from pathlib import Path

from app.kafka import cli, local_cluster


def props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines()
                if line and not line.startswith("#"))


def test_each_node_has_its_ports_and_the_quorum_of_all(tmp_path: Path) -> None:
    p = props(local_cluster._properties(9300, 3, 2, tmp_path / "node-2", None))
    assert p["node.id"] == "2"
    assert p["listeners"] == "PLAINTEXT://127.0.0.1:9302,CONTROLLER://127.0.0.1:9303"
    assert p["controller.quorum.voters"] == (
        "1@127.0.0.1:9301,2@127.0.0.1:9303,3@127.0.0.1:9305")
    assert "controller.quorum.bootstrap.servers" not in p
    assert p["process.roles"] == "broker,controller"
    assert p["log.dirs"] == str(tmp_path / "node-2" / "data")
    for key in ("offsets.topic.replication.factor",
                "transaction.state.log.replication.factor", "default.replication.factor"):
        assert p[key] == "3"
    assert p["transaction.state.log.min.isr"] == "2"


def test_status_of_a_cluster_never_started(tmp_path: Path, capsys) -> None:
    assert cli.main(["status", "--nodes", "3", "--port", "9300",
                     "--data-dir", str(tmp_path)]) == 3
    out = capsys.readouterr().out
    assert "node 3: stopped  127.0.0.1:9304" in out


def test_nodes_must_be_a_small_count(capsys) -> None:
    assert cli.main(["start", "--nodes", "0"]) == 2
    assert "nodes must be within 1..9, got 0" in capsys.readouterr().err
