"""A new context partition's RocksDB namespaces read nothing while its pipeline is built,
and the keyed engine that uses this gives the rows and the state of the ordinary build."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine
from app.runtime.kafka.store import PartitionStore
from operators.state import RocksNamespace


class _CountingDb(dict):
    """A dict database that counts its reads."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def get(self, key: bytes, default: Any = None) -> Any:
        self.reads += 1
        return super().get(key, default)

    def scan(self, prefix: bytes) -> list[tuple[bytes, bytes]]:
        self.reads += 1
        return sorted((k, v) for k, v in self.items() if k.startswith(prefix))


def test_unread_namespace_reads_nothing_until_written_then_the_database() -> None:
    db = _CountingDb()
    RocksNamespace(db, b"P", None).child("w").put(1, "stored before")
    ns = RocksNamespace(db, b"P", None)
    settle = ns.unread()
    view = ns.child("w")
    assert (ns.get("x"), list(view.items()), list(view.values())) == (None, [], [])
    assert db.reads == 0
    ns.child("rs").put("", [1])  # a write anywhere under it: reads go to the database
    assert view.get(1) == "stored before" and list(view.items()) == [(1, "stored before")]
    settle()
    assert type(ns) is RocksNamespace and type(view) is RocksNamespace
    assert type(ns.child("later")) is RocksNamespace
    put = view.putter(2)  # the ordinary putter: the key encoded once
    put("two")
    assert view.get(2) == "two"


def test_putter_while_unread_ends_it() -> None:
    db = _CountingDb()
    ns = RocksNamespace(db, b"P", None)
    ns.put("", "old")
    settle = ns.unread()
    assert ns.get("") is None  # what a new partition's namespace would read
    ns.putter("")("new")
    assert ns.get("") == "new"
    settle()
    assert ns.get("") == "new"


KEYED = "create context BySymbol partition by symbol from T"
HASHED = ("create context BySymbol coalesce by consistent_hash_crc32(symbol) from T "
          "granularity 64")


def _keyed(store: Any, context: str = KEYED) -> tuple[Engine, list[tuple]]:
    catalog = Catalog.from_schemas({"T": {"symbol": "string", "amount": "double"}})
    engine = Engine(store=store)
    rows: list[tuple] = []
    engine.listeners.append(lambda name, new, old, pid: rows.append((name, pid, new, old)))
    for i, epl in enumerate([
            context,
            "context BySymbol select symbol, count(*) as cnt, sum(amount) as total, "
            "min(amount) as low from T#length(2)",
            "context BySymbol select symbol, count(*) as cnt from T#time(1 sec) "
            "output last every 1 sec"]):
        engine.deploy(plan_statement(catalog, epl, f"s{i}"))
    return engine, rows


def _events(engine: Engine, lo: int, hi: int, keys: int) -> None:
    for i in range(lo, hi):
        engine.send("T", {"symbol": f"S{i % keys}", "amount": float(i % 5)})
        if i % 4 == 3:
            engine.advance_time(engine.now_ms + 300)


def _run(path: Path, context: str) -> tuple[list[tuple], dict[bytes, bytes]]:
    """Rows and committed state of 20 events over 7 keys, a restore, then 20 events over
    11 keys (4 of them new)."""
    store = PartitionStore(path)
    engine, rows = _keyed(store, context)
    _events(engine, 0, 20, 7)
    store.commit(1, store.batch_writes())
    again, rows_after = _keyed(store, context)
    again.now_ms = engine.now_ms
    _events(again, 20, 40, 11)
    store.commit(2, store.batch_writes())
    state = dict(store.state_items())
    store.close()
    return rows + rows_after, state


@pytest.mark.parametrize("context", [KEYED, HASHED])
def test_new_keys_built_unread_give_the_rows_and_state_of_an_ordinary_build(
        tmp_path: Path, monkeypatch: Any, context: str) -> None:
    """Keys (hash buckets) first seen after a restore are built with their namespaces
    unread; rows and the committed state equal those of the build that reads them (and
    of the memory store, which reads everything)."""
    rows, state = _run(tmp_path / "unread", context)
    mem_engine, mem_rows = _keyed(None, context)
    _events(mem_engine, 0, 20, 7)
    _events(mem_engine, 20, 40, 11)
    assert rows == mem_rows
    monkeypatch.delattr(RocksNamespace, "unread")
    read_rows, read_state = _run(tmp_path / "read", context)
    assert (rows, state) == (read_rows, read_state)
