"""The batch overlay over RocksDB: scans, net batch writes, commit and rollback (no broker)."""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path

import pytest

from app.runtime.kafka.store import (
    BEHIND_COMMITS,
    BEHIND_WRITES,
    DISCARDED,
    MARKER_KEY,
    THROUGH_COMMITS,
    ChangelogRecord,
    PartitionStore,
)
from operators.state import RocksStore, decode_value, encode_value
from operators.state import encode_key as _ek


def _keys(ns) -> list:
    return [k for k, _ in ns.items()]


def test_scans_see_pending_writes_in_key_order(tmp_path: Path) -> None:
    store = PartitionStore(tmp_path / "db")
    a = store.namespace("s", "q", 1)
    b = store.namespace("s", "q", 2)
    for k in (5, 1, 3):
        a.put(k, {"v": k})
    store.commit(0)
    b.put(2, "x")
    a.put(2, {"v": 2})
    a.delete(3)
    assert _keys(a) == [1, 2, 5]
    assert [v for _, v in a.items()] == [{"v": 1}, {"v": 2}, {"v": 5}]
    assert _keys(b) == [2]
    assert _keys(store.namespace("s", "q", 3)) == []
    a.put(0, {"v": 0})  # written after a scan: the next scan sorts it in
    assert _keys(a) == [0, 1, 2, 5]
    store.close()


def test_a_namespace_reads_every_key_shape_back_at_once(tmp_path: Path) -> None:
    """``items`` slices a key of one text without a zero byte out of its bytes and decodes
    the others; values written by the standard library (NaN) decode as before."""
    store = PartitionStore(tmp_path / "db")
    ns = store.namespace("s", "q", "rs")
    other = store.namespace("s", "q", "rt")  # a neighbour's keys are not read
    other.put("a", 0)
    keys = ["IBM", "", "a\x00b", "\x00", "é€", ("IBM", 2), ("", None), 7, -3, 2.5, None,
            "tail\x00"]
    for i, k in enumerate(keys):
        ns.put(k, [i, {"k": str(k)}, i])
    ns.put("nan", [float("nan")])
    store.commit(0)
    ns.put("pending", [1])  # the overlay too
    got = list(ns.items())
    want = sorted([(k, [i, {"k": str(k)}, i]) for i, k in enumerate(keys)]
                  + [("pending", [1])], key=lambda kv: _ek(kv[0]))
    assert [k for k, _ in got if k != "nan"] == [k for k, _ in want]
    assert all(type(a) is type(b) for (a, _), (b, _) in zip(
        [kv for kv in got if kv[0] != "nan"], want))
    assert [v for k, v in got if k != "nan"] == [v for _, v in want]
    nan = dict((k, v) for k, v in got if k == "nan")["nan"]
    assert nan[0] != nan[0]
    assert list(ns.values())[:3] == [v for k, v in got][:3]


def test_batch_writes_drop_rows_that_came_and_went_within_the_batch(tmp_path: Path) -> None:
    store = PartitionStore(tmp_path / "db")
    ns = store.namespace("w")
    ns.put(1, "old")
    store.commit(0)
    ns.delete(1)  # existed before the batch: the delete is kept, with no lookup
    ns.put(2, "new")
    ns.put(3, "transient")
    ns.delete(3)  # put and deleted within the batch: no trace
    ns.put(1, "again")
    ns.delete(1)  # deleted, put, deleted: it existed, so the delete stays
    writes = dict(store.batch_writes())
    assert set(writes) == {ns.prefix + b"\x00K" + k for k in (_ek(1), _ek(2))}
    assert writes[ns.prefix + b"\x00K" + _ek(1)] is None
    assert writes[ns.prefix + b"\x00K" + _ek(2)] == b'"new"'
    store.commit(1, store.batch_writes())
    assert _keys(ns) == [2]
    assert store.marker() == 1
    store.close()


def test_a_new_key_put_and_deleted_in_the_batch_leaves_no_trace_without_a_lookup(
        tmp_path: Path) -> None:
    store = PartitionStore(tmp_path / "db")
    ns = store.namespace("w")
    ns.put(1, "kept")
    store.commit(0)
    ns.put_new(2, "came and went")
    ns.delete(2)
    ns.put_new(3, "stays")
    ns.put_new(4, "came, went, came back")
    ns.delete(4)
    ns.put(4, "back")
    ns.delete(1)
    base, store.db.base = store.db.base, None  # a lookup would fail: none is needed
    writes = dict(store.batch_writes())
    store.db.base = base
    key = {k: ns.prefix + b"\x00K" + _ek(k) for k in (1, 2, 3, 4)}
    assert writes == {key[1]: None, key[3]: b'"stays"', key[4]: b'"back"'}
    store.commit(1, store.batch_writes())
    assert [(k, v) for k, v in ns.items()] == [(3, "stays"), (4, "back")]
    ns.put_new(5, "next batch")
    ns.delete(3)  # put in an earlier batch: its delete is kept
    assert dict(store.batch_writes()) == {key[3]: None, ns.prefix + b"\x00K" + _ek(5):
                                          b'"next batch"'}
    store.close()


def test_committed_writes_wait_behind_and_a_row_that_came_and_went_never_reaches_rocksdb(
        tmp_path: Path) -> None:
    store = PartitionStore(tmp_path / "db")
    ns = store.namespace("w")
    key = {k: ns.prefix + b"\x00K" + _ek(k) for k in range(8)}
    ns.put(0, "agg")
    ns.put_new(1, "row 1")
    ns.put_new(2, "row 2")
    store.commit(5, store.batch_writes())
    assert store.base.get(key[1]) is None and store.base.get(MARKER_KEY) is None
    assert ns.get(1) == "row 1"  # reads see what is behind
    ns.delete(1)  # a row put in an earlier batch, not in RocksDB yet
    ns.put(0, "agg 2")
    ns.put_new(3, "row 3")
    store.commit(6, store.batch_writes())
    assert store.db.behind == {key[0]: b'"agg 2"', key[2]: b'"row 2"', key[3]: b'"row 3"'}
    assert store.marker() == 6  # the marker flushes: RocksDB holds the committed state
    assert store.db.behind == {}
    assert [store.base.get(key[k]) for k in range(4)] == [b'"agg 2"', None, b'"row 2"',
                                                          b'"row 3"']
    ns.delete(2)  # in RocksDB now: the delete waits behind, then goes in
    store.commit(7, store.batch_writes())
    assert store.db.behind == {key[2]: None}
    assert [k for k, _ in ns.items()] == [0, 3]  # a scan flushes first
    assert store.base.get(key[2]) is None and store.db.behind == {}
    store.close()


def test_writes_behind_go_into_rocksdb_every_so_many_commits(tmp_path: Path) -> None:
    path = tmp_path / "db"
    store = PartitionStore(path)
    ns = store.namespace("w")
    for i in range(BEHIND_COMMITS + 3):
        ns.put(0, i)
        store.commit(i, store.batch_writes())
    store.base.close()  # a crash: what was behind is lost, the changelog has it
    again = PartitionStore(path)
    assert again.marker() == BEHIND_COMMITS - 1
    assert again.namespace("w").get(0) == BEHIND_COMMITS - 1
    again.close()


def test_writes_behind_go_into_rocksdb_after_so_many_writes(tmp_path: Path) -> None:
    """The flush comes after ``BEHIND_WRITES`` writes however the commits split them:
    a live input's small checkpoints wait as long, in events, as a backlog's large ones."""
    path = tmp_path / "db"
    store = PartitionStore(path)
    store.flush_at = 100  # as if the flush came after 100 writes
    ns = store.namespace("w")
    key = 0
    for c in range(4):
        for _ in range(30):
            key += 1
            ns.put(key, c)
        store.commit(c, store.batch_writes())
        assert store.base.get(MARKER_KEY) == (b"3" if c == 3 else None)
    assert store.db.behind == {} and store.flush_at == BEHIND_WRITES
    store.close()


def test_a_marker_that_need_not_be_durable_waits_with_the_writes_behind(
        tmp_path: Path) -> None:
    path = tmp_path / "db"
    store = PartitionStore(path)
    ns = store.namespace("w")
    ns.put(1, "a")
    store.commit(7, store.batch_writes())
    store.set_marker(8, durable=False)  # a snapshot part other than the last
    assert store.base.get(MARKER_KEY) is None and store.db.behind
    store.set_marker(9, durable=False)
    store.base.close()  # a crash: the database is as of its last flush
    again = PartitionStore(path)
    assert again.marker() == -1 and again.namespace("w").get(1) is None
    ns = again.namespace("w")
    ns.put(1, "a")
    again.commit(7, again.batch_writes())
    again.set_marker(8, durable=False)
    again.set_marker(9)  # the last part: the marker and the writes behind it go in
    assert again.base.get(MARKER_KEY) == b"9" and again.db.behind == {}
    assert again.base.get(ns.prefix + b"\x00K" + _ek(1)) == b'"a"'
    again.close()


def test_commits_write_through_while_waiting_does_not_pay(tmp_path: Path) -> None:
    """Keys written once each (nothing to cancel or overwrite): after a flush that wrote
    almost everything it took, each commit goes into RocksDB, for a while."""
    store = PartitionStore(tmp_path / "db")
    ns = store.namespace("w")
    key = 0
    for c in range(BEHIND_COMMITS):
        for _ in range(40):
            key += 1
            ns.put(key, "once")
        store.commit(c, store.batch_writes())
    assert store.behind_limit == 1 and store.through == THROUGH_COMMITS
    ns.put(0, "next")
    store.commit(BEHIND_COMMITS, store.batch_writes())
    assert store.db.behind == {} and store.base.get(MARKER_KEY) == b"%d" % BEHIND_COMMITS
    for c in range(BEHIND_COMMITS + 1, BEHIND_COMMITS + THROUGH_COMMITS):
        ns.put(0, c)
        store.commit(c, store.batch_writes())
    assert store.behind_limit == BEHIND_COMMITS  # waiting is tried again
    for c in range(BEHIND_COMMITS + THROUGH_COMMITS, 2 * BEHIND_COMMITS + THROUGH_COMMITS):
        ns.put(0, c)  # one key rewritten: waiting pays
        store.commit(c, store.batch_writes())
    assert store.behind_limit == BEHIND_COMMITS
    store.close()


def test_rollback_forgets_the_batch_and_its_scan_index(tmp_path: Path) -> None:
    store = PartitionStore(tmp_path / "db")
    ns = store.namespace("w")
    ns.put(1, "a")
    store.commit(0)
    ns.put(2, "b")
    assert _keys(ns) == [1, 2]
    store.rollback()
    assert _keys(ns) == [1]
    assert store.batch_writes() == []
    ns.put(3, "c")
    assert _keys(ns) == [1, 3]
    store.close()


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_random_batches_match_a_plain_rocksdb_store(tmp_path: Path, seed: int) -> None:
    """Puts (of new keys too), deletes, scans and commits in random order leave the same
    keys and values as the same writes straight into RocksDB."""
    rnd = random.Random(seed)
    store = PartitionStore(tmp_path / "overlay")
    plain = RocksStore(tmp_path / "plain")
    next_new: dict[int, int] = {}
    for step in range(3000):
        path = ("p", rnd.randrange(6))
        key = rnd.randrange(40)
        roll = rnd.random()
        if roll < 0.1:
            fresh = next_new[path[1]] = next_new.get(path[1], 100) + 1
            store.namespace(*path).put_new(fresh, step)
            plain.namespace(*path).put_new(fresh, step)
        elif roll < 0.15:
            gone = rnd.randrange(101, next_new.get(path[1], 100) + 2)
            store.namespace(*path).delete(gone)
            plain.namespace(*path).delete(gone)
        elif roll < 0.5:
            store.namespace(*path).put(key, step)
            plain.namespace(*path).put(key, step)
        elif roll < 0.8:
            store.namespace(*path).delete(key)
            plain.namespace(*path).delete(key)
        elif roll < 0.95:
            assert list(store.namespace(*path).items()) == list(plain.namespace(*path).items())
        else:
            store.commit(step, store.batch_writes())
    store.commit(3000, store.batch_writes())
    for p in range(6):
        assert list(store.namespace("p", p).items()) == list(plain.namespace("p", p).items())
    store.close()
    plain.close()


def test_min_max_median_of_large_windows_restore_from_their_entries(tmp_path: Path) -> None:
    """Bags past BAG_FROM values are stored per value; an engine rebuilt from the
    committed database posts what one that never stopped posts."""
    from app.epl.planner import plan_statement
    from app.runtime.catalog import Catalog
    from app.runtime.engine import Engine
    from operators.aggregates import BAG_FROM

    epl = (f"select k, min(p) as lo, max(p) as hi, median(p) as mid from T#length({3 * BAG_FROM}) "
           "group by k")
    schemas = {"T": {"k": "string", "p": "double"}}
    rnd = random.Random(3)
    events = [{"k": rnd.choice("ab"), "p": float(rnd.randrange(5000))}
              for _ in range(6 * BAG_FROM)]

    def engine(store: object = None) -> tuple[Engine, list]:
        e = Engine(store=store) if store is not None else Engine()
        e.deploy(plan_statement(Catalog.from_schemas(schemas), epl, "s"))
        rows: list = []
        e.listeners.append(lambda stmt, new, old, pid: rows.append((new, old)))
        return e, rows

    ref, ref_rows = engine()
    store = PartitionStore(tmp_path / "db")
    live, _ = engine(store)
    half = 4 * BAG_FROM
    for i, ev in enumerate(events[:half]):
        ref.send("T", ev)
        live.send("T", ev)
        if i % 100 == 99:
            store.commit(i)
    store.commit(half)
    store.close()
    store = PartitionStore(tmp_path / "db")
    again, rows = engine(store)
    del ref_rows[:]
    for ev in events[half:]:
        ref.send("T", ev)
        again.send("T", ev)
    assert rows == ref_rows and len(rows) == len(events) - half
    store.close()


def _encoded_batches(seed: int, n: int) -> list[bytes]:
    """``n`` changelog records of random puts, overwrites and deletes."""
    from app.runtime.kafka.store import ChangelogRecord

    rnd = random.Random(seed)
    out = []
    for i in range(n):
        writes: dict[bytes, bytes | None] = {}
        for _ in range(rnd.randrange(1, 40)):
            k = b"k%05d" % rnd.randrange(500)
            writes[k] = None if rnd.random() < 0.2 else b"v%d" % rnd.randrange(10**6)
        out.append(ChangelogRecord(i - 1, {}, list(writes.items())).encode())
    return out


def test_a_bulk_load_holds_what_a_plain_load_holds_and_ends_compacted(tmp_path: Path
                                                                       ) -> None:
    """``begin_bulk``/``end_bulk`` around a restore, and the encoded writes applied in
    key order, change when and how RocksDB works, not what it holds: the same entries
    and marker as the records' decoded writes applied in order with compactions on,
    and afterwards every entry in one sorted run (no flushed file left for a later
    compaction) with automatic compactions back on."""
    from app.runtime.kafka.store import ChangelogRecord

    records = _encoded_batches(7, 300)
    stores = {}
    for bulk in (False, True):
        store = PartitionStore(tmp_path / f"db{bulk}")
        if bulk:
            store.begin_bulk()
            store.wipe()  # a snapshot restore may wipe midway: still loading in bulk
            assert store.base.property_value("rocksdb.num-files-at-level0") == "0"
        for offset, data in enumerate(records):
            if bulk:  # a restore: the encoded writes go to RocksDB in key order
                _, at = ChangelogRecord.decode_head(data)
                store.apply_encoded(data, at, offset)
            else:  # the writes decoded to a list, applied in their recorded order
                store.apply_record(ChangelogRecord.decode(data).writes, offset)
            if bulk and offset % 50 == 49:
                store.base.flush()  # several flushed files, none compacted meanwhile
        if bulk:
            assert int(store.base.property_value("rocksdb.num-files-at-level0")) == 6
            store.end_bulk()
            levels = [int(store.base.property_value(f"rocksdb.num-files-at-level{i}"))
                      for i in range(7)]
            assert sum(levels) == 1 and levels[0] == 0
            assert not store.bulk
        stores[bulk] = store
    plain, bulk_loaded = stores[False], stores[True]
    assert list(bulk_loaded.state_items()) == list(plain.state_items())
    assert list(plain.state_items())  # something was loaded
    assert bulk_loaded.marker() == plain.marker() == len(records) - 1
    for store in stores.values():
        store.close()


class _Bag:
    """A state object written as its ``plain()`` list (as a sorted bag is)."""

    def __init__(self, items: list) -> None:
        self.items = items

    def plain(self) -> list:
        return self.items


_VALUES = [
    0, 1, -1, 2, (1 << 63) - 1, -(1 << 63), 1 << 63, -(1 << 63) - 1, 1 << 64, 10 ** 30,
    True, False, None, 0.5, -0.0, 1e300, float("nan"), float("inf"), float("-inf"),
    "", "a\u00e9\u2603", "x" * 2000, [], {}, [[22, [2200.0, 22]], None, 0],
    [[1, [float("nan"), 1]], None, 0], {"account": "A0", "amount": 0.0, "sent": 0},
    {"a": None, "b": [1, None, float("-inf")]}, [0, {"k": "v", "n": None}], {1: "int key"},
    (1, 2), [1 << 70], _Bag([3, 1, 2]), _Bag([float("nan")]), [_Bag([None, 2.5])],
]


def test_deferred_values_encode_to_encode_values_bytes(tmp_path: Path) -> None:
    """The overlay's inlined encoding writes exactly ``encode_value``'s bytes."""
    store = PartitionStore(tmp_path / "db")
    ns = store.namespace("s", "v")
    for i, v in enumerate(_VALUES):
        ns.put(i, v)
    pending = store.pending
    assert [pending[ns._key(i)] for i in range(len(_VALUES))] == [
        encode_value(v) for v in _VALUES]
    store.commit(0)
    for i, v in enumerate(_VALUES):
        got = ns.get(i)
        assert repr(got) == repr(decode_value(encode_value(v)))
    store.close()


def _encode_plainly(rec: ChangelogRecord) -> bytes:
    """A changelog record's layout written out one ``struct.pack`` at a time: the head,
    the count of writes, every key's length, every value's length (0xFFFFFFFF: deleted),
    the keys, the values."""
    head = json.dumps({"prev": rec.prev, "meta": rec.meta}, separators=(",", ":")).encode()
    out = b"KCL2" + struct.pack(">I", len(head)) + head + struct.pack(">I", len(rec.writes))
    for k, _ in rec.writes:
        out += struct.pack(">I", len(k))
    for _, v in rec.writes:
        out += struct.pack(">I", 0xFFFFFFFF if v is None else len(v))
    for k, _ in rec.writes:
        out += k
    for _, v in rec.writes:
        out += b"" if v is None else v
    return out


def _encode_v1(rec: ChangelogRecord) -> bytes:
    """The earlier layout (``KCL1``), which changelogs written before still hold: each
    write's key length, key, value length and value."""
    head = json.dumps({"prev": rec.prev, "meta": rec.meta}, separators=(",", ":")).encode()
    out = b"KCL1" + struct.pack(">I", len(head)) + head + struct.pack(">I", len(rec.writes))
    for k, v in rec.writes:
        out += struct.pack(">I", len(k)) + k
        out += struct.pack(">I", 0xFFFFFFFF) if v is None else struct.pack(">I", len(v)) + v
    return out


WRITES = [(b"k", b"v"), (b"gone", None), (b"", b""), (b"x" * 1023, b"y" * 1024),
          (b"z" * 1024, b"w" * 70000), (b"k2" * 600, None)]


def test_changelog_record_bytes_pinned_for_short_and_long_entries() -> None:
    rec = ChangelogRecord(41, {"group": "g", "partition": 3, "now": 7}, WRITES)
    data = rec.encode()
    assert data == _encode_plainly(rec)
    again = ChangelogRecord.decode(data)
    assert (again.prev, again.meta, again.writes) == (41, rec.meta, WRITES)
    empty = ChangelogRecord(0, {})
    assert ChangelogRecord.decode(empty.encode()) == empty == ChangelogRecord.decode(
        _encode_v1(empty))


def test_a_changelog_of_the_earlier_layout_reads_and_restores_the_same(
        tmp_path: Path) -> None:
    """Records written before the current layout decode to the same writes and load the
    same entries, as batches (key order) and as snapshot parts (recorded order)."""
    from app.runtime.kafka.store import ChangelogRecord

    rec = ChangelogRecord(41, {"group": "g", "partition": 3, "now": 7}, WRITES)
    old = ChangelogRecord.decode(_encode_v1(rec))
    assert (old.prev, old.meta, old.writes) == (41, rec.meta, WRITES)
    records = [ChangelogRecord.decode(d) for d in _encoded_batches(5, 60)]
    loaded = []
    for encode in (ChangelogRecord.encode, _encode_v1):
        store = PartitionStore(tmp_path / encode.__name__)
        store.begin_bulk()
        for offset, r in enumerate(records):
            data = encode(r)
            _, at = ChangelogRecord.decode_head(data)
            store.apply_encoded(data, at, offset if offset % 7 else None)
        store.end_bulk()
        loaded.append((list(store.state_items()), store.marker()))
        store.close()
    assert loaded[0] == loaded[1] and len(loaded[0][0]) > 100


def _committed(path: Path) -> None:
    store = PartitionStore(path)
    store.namespace("s", "q", 1).put(1, "x")
    store.commit(7)
    store.close()


def test_a_database_whose_manifest_a_crash_removed_starts_empty(tmp_path: Path) -> None:
    _committed(tmp_path / "db")
    for manifest in (tmp_path / "db").glob("MANIFEST-*"):
        manifest.unlink()
    store = PartitionStore(tmp_path / "db")
    assert store.marker() == -1
    assert _keys(store.namespace("s", "q", 1)) == []
    store.namespace("s", "q", 1).put(2, "y")
    store.commit(3)
    store.close()
    again = PartitionStore(tmp_path / "db")
    assert (again.marker(), _keys(again.namespace("s", "q", 1))) == (3, [2])
    again.close()


def test_a_database_with_a_truncated_table_file_starts_empty(tmp_path: Path) -> None:
    store = PartitionStore(tmp_path / "db")
    ns = store.namespace("s", "q", 1)
    for k in range(500):
        ns.put(k, "v" * 50)
    store.commit(9)
    store.flushed().flush()  # a table file on disk
    store.close()
    tables = list((tmp_path / "db").glob("*.sst"))
    assert tables
    data = tables[0].read_bytes()
    tables[0].write_bytes(data[: len(data) // 2])
    again = PartitionStore(tmp_path / "db")
    assert (again.marker(), _keys(again.namespace("s", "q", 1))) == (-1, [])
    again.close()


def test_a_wipe_a_kill_cut_short_is_finished_at_the_next_open(tmp_path: Path) -> None:
    _committed(tmp_path / "db")
    # the kill came after the rename, before the files were deleted
    (tmp_path / "db").rename(tmp_path / ("db" + DISCARDED))
    store = PartitionStore(tmp_path / "db")
    assert store.marker() == -1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db"]
    store.close()


def test_a_wipe_leaves_one_empty_database_and_no_discarded_files(tmp_path: Path) -> None:
    _committed(tmp_path / "db")
    store = PartitionStore(tmp_path / "db")
    assert store.marker() == 7
    store.wipe()
    assert store.marker() == -1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db"]
    store.close()


def test_a_database_another_open_holds_is_not_taken_for_a_damaged_one(tmp_path: Path) -> None:
    _committed(tmp_path / "db")
    first = PartitionStore(tmp_path / "db")
    with pytest.raises(Exception, match="(?i)lock"):
        PartitionStore(tmp_path / "db")
    assert first.marker() == 7
    first.close()


def test_state_listing_leaves_out_a_database_being_removed(tmp_path: Path) -> None:
    from app.runtime.kafka.ops import state_dirs

    for name, size in (("0", 10), ("1" + DISCARDED, 99)):
        d = tmp_path / "g" / name
        d.mkdir(parents=True)
        (d / "000001.sst").write_bytes(b"x" * size)
    assert state_dirs(tmp_path) == [{"path": str(tmp_path / "g" / "0"), "bytes": 10}]
