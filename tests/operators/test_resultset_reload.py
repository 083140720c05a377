"""A grouped result set read back from RocksDB lists its groups in the order they were
first seen, not in the order of their stored keys."""

from __future__ import annotations

from pathlib import Path

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine
from app.runtime.kafka.store import PartitionStore
from operators.resultset import ResultSet

EPL = "select symbol, count(*) as cnt from T group by symbol output snapshot every 4 events"


def _engine(store: PartitionStore | None) -> tuple[Engine, list[list[tuple]]]:
    catalog = Catalog.from_schemas({"T": {"symbol": "string"}})
    engine = Engine(store=store)
    rows: list[list[tuple]] = []
    engine.listeners.append(
        lambda name, new, old, pid: rows.append([(r["symbol"], r["cnt"]) for r in new]))
    engine.deploy(plan_statement(catalog, EPL, "g"))
    return engine, rows


def test_groups_come_back_in_first_seen_order(tmp_path: Path) -> None:
    first = ["c", "a", "d", "b"]
    then = ["a", "e", "c", "b"]
    store = PartitionStore(tmp_path / "db")
    engine, rows = _engine(store)
    for s in first:
        engine.send("T", {"symbol": s})
    store.commit(1, store.batch_writes())
    again, rows_after = _engine(store)
    for s in then:
        again.send("T", {"symbol": s})
    store.close()
    expected = [("c", 1), ("a", 1), ("d", 1), ("b", 1)]
    assert rows == [expected]
    assert rows_after == [[("c", 2), ("a", 2), ("d", 1), ("b", 2), ("e", 1)]]
    plain, plain_rows = _engine(None)
    for s in first + then:
        plain.send("T", {"symbol": s})
    assert plain_rows == rows + rows_after


def test_a_record_without_its_sequence_comes_first_then_by_sequence(tmp_path: Path) -> None:
    store = PartitionStore(tmp_path / "db")
    ns = store.namespace("rs")
    for key, rec in [("a", [[1], None, 5]), ("b", [[1], None]), ("c", [[1], None, 2]),
                     ("d", [[1], None, 9, 0]), ("e", [[1], None])]:
        ns.put(key, rec)
    store.commit(1, store.batch_writes())
    engine, _ = _engine(None)  # the spec of a grouped statement
    built = engine.statements["g"].pipelines[0].rs
    rs = ResultSet(built.spec, store.namespace("rs"), built.ctx)
    assert list(rs.groups) == ["b", "e", "c", "a", "d"]
    assert rs.next_seq == 10
    store.close()
