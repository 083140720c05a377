"""A worker's /metrics, /healthz and /readyz against a real broker, the warning a worker
gives when records wait for a watermark that does not come, and (without a broker) what a
checkpoint moves in the metrics."""

from __future__ import annotations

import re
import socket
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from app.runtime.kafka.config import AppConfig
from app.runtime.kafka.health import STALL_ENV
from app.runtime.kafka.reader import RowReader
from app.runtime.kafka.runner import KafkaApp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return 0, ""


def wait_for(check, timeout_s: float = 60, what: str = "condition") -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def make_app(bootstrap: str, epl: str, partitions: int) -> KafkaApp:
    name = f"health-{uuid.uuid4().hex[:8]}"
    return KafkaApp(AppConfig.from_dict({
        "app": name, "partitions": partitions,
        "schemas": {"Trade": {"symbol": "string", "price": "double"}},
        "topics": {"Trade": f"{name}.trade"},
        "statements": [{"name": "s", "epl": epl}],
    }), bootstrap)


def metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in the exposition")


def scraped_series(text: str) -> set[str]:
    """The sample names a scrape can hold, from its ``# TYPE`` lines (a family with no
    sample yet, such as a labelled gauge never set, is still declared there)."""
    suffixes = {"counter": ("",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}
    out = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            out |= {name + s for s in suffixes.get(kind, ("",))}
    return out


def queried_metrics() -> set[str]:
    """Every metric the Helm chart's dashboard panels and alerts read."""
    chart = Path(__file__).resolve().parents[4] / "helm" / "kepl"
    dashboard = (chart / "dashboards" / "kepl.json").read_text()
    rules = (chart / "templates" / "prometheusrule.yaml").read_text()
    names = set(re.findall(r"\bkepl_[a-z_]+\b", dashboard + rules))
    assert len(names) > 15
    return names


@pytest.mark.kafka
def test_metrics_count_what_the_worker_did(kafka_bootstrap: str) -> None:
    kapp = make_app(kafka_bootstrap, "select symbol, price from Trade(price > 50)", 1)
    port = free_port()
    reader = RowReader(kafka_bootstrap, [kapp.config.output_topic("s")])
    try:
        kapp.worker.start(args=["--metrics-port", str(port)])
        wait_for(lambda: get(port, "/readyz")[0] == 200, what="/readyz")
        assert get(port, "/healthz") == (200, "ok\n")
        for i in range(300):
            kapp.send("Trade", {"symbol": f"S{i % 3}", "price": float(i % 100)})
        kapp.send("Trade", b"not json")
        kapp.settle()
        rows = reader.read_available()
        assert len(rows) == 147  # prices 51..99, three times

        def counted() -> bool:
            text = get(port, "/metrics")[1]
            return f'kepl_rows_out_total{{app="{kapp.config.app}",statement="s"}} 147.0' \
                in text
        wait_for(counted, 30, "the rows counter")
        text = get(port, "/metrics")[1]
        assert metric(text, "kepl_events_in_total") == 300
        assert metric(text, "kepl_dead_letters_total") == 1
        assert metric(text, "kepl_checkpoints_total") >= 1
        topic = kapp.config.topic_of("Trade")
        lag = f'kepl_consumer_lag{{app="{kapp.config.app}",partition="0",topic="{topic}"}}'
        wait_for(lambda: lag + " 0.0" in get(port, "/metrics")[1], 30, "lag 0")
        assert get(port, "/nothing")[0] == 404
        text = get(port, "/metrics")[1]
        assert queried_metrics() <= scraped_series(text)
        lane = f'app="{kapp.config.app}",group="lanes:{topic}"'
        assert metric(text, f"kepl_processing_seconds_total{{{lane}}}") > 0
        statement = f'app="{kapp.config.app}",statement="s"'
        assert metric(text, f"kepl_statement_processing_seconds_total{{{statement}}}") > 0
        assert metric(text, f'kepl_statement_info{{{lane},statement="s"}}') == 1
        app = kapp.config.app
        assert metric(text, f'kepl_rebalances_total{{app="{app}",kind="assigned"}}') >= 1
        assert metric(text, "kepl_assigned_partitions") == 1
    finally:
        reader.close()
        kapp.close()


@pytest.mark.kafka
def test_records_waiting_for_a_watermark_are_reported(kafka_bootstrap: str) -> None:
    # no context: one engine partition reads three source partitions and merges them
    # at watermarks, so events wait until every partition brought one
    kapp = make_app(kafka_bootstrap, "select count(*) as n from Trade#length(10)", 3)
    port = free_port()
    try:
        kapp.worker.start(env={STALL_ENV: "1"}, args=["--metrics-port", str(port)])
        wait_for(lambda: get(port, "/readyz")[0] == 200, what="/readyz")
        for _ in range(5):
            kapp.send("Trade", {"symbol": "A", "price": 1.0}, partition=0)
        kapp.producer.flush(10)
        wait_for(lambda: get(port, "/readyz")[0] == 503, 30, "unready")
        status, why = get(port, "/readyz")
        topic = kapp.config.topic_of("Trade")
        assert why.startswith("engine partition main[0]: 5 record(s) wait for a watermark "
                              f"from {topic}:0, {topic}:1, {topic}:2; oldest: {topic}:0 "
                              "offset 0")
        assert get(port, "/healthz")[0] == 200  # alive, only waiting
        assert metric(get(port, "/metrics")[1], "kepl_waiting_records") == 5
        kapp.settle()
        wait_for(lambda: get(port, "/readyz")[0] == 200, 30, "ready again")
        # the #length(10) window holds the five events now: its state has bytes
        state = f'kepl_state_bytes{{app="{kapp.config.app}",statement="s"}} '
        wait_for(lambda: any(ln.startswith(state) and float(ln.split()[-1]) > 0
                             for ln in get(port, "/metrics")[1].splitlines()),
                 30, "state bytes")
        busy = f'kepl_processing_seconds_total{{app="{kapp.config.app}",group="main"}}'
        text = get(port, "/metrics")[1]
        assert metric(text, busy) > 0
        statement = f'app="{kapp.config.app}",statement="s"'
        assert metric(text, f"kepl_statement_processing_seconds_total{{{statement}}}") > 0
        log = kapp.worker.log_path.read_text()
        assert "no progress: engine partition main[0]: 5 record(s) wait" in log
        assert "progress again" in log
    finally:
        kapp.close()


def test_a_checkpoint_moves_the_counters_to_the_loops_totals() -> None:
    from app.runtime.kafka.health import Metrics

    m = Metrics("unit")
    stats = {"events": 10, "dead": 1, "checkpoints": 1, "changelog_bytes": 300}
    m.checkpointed(0.02, stats, {"s": 4})
    m.checkpointed(0.03, {**stats, "events": 25, "checkpoints": 2}, {"s": 9, "t": 1})
    lines = [ln for ln in m.exposition().decode().splitlines()
             if ln.startswith(("kepl_events_in_total", "kepl_dead_letters_total",
                               "kepl_checkpoints_total", "kepl_changelog_bytes_total",
                               "kepl_rows_out_total", "kepl_checkpoint_seconds_count"))]
    assert sorted(lines) == [
        'kepl_changelog_bytes_total{app="unit"} 300.0',
        'kepl_checkpoint_seconds_count{app="unit"} 2.0',
        'kepl_checkpoints_total{app="unit"} 2.0',
        'kepl_dead_letters_total{app="unit"} 1.0',
        'kepl_events_in_total{app="unit"} 25.0',
        'kepl_rows_out_total{app="unit",statement="s"} 9.0',
        'kepl_rows_out_total{app="unit",statement="t"} 1.0']
