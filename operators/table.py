"""Tables: rows organised by primary key (Esper ref. 4.7; Esper ref. 2, named windows and tables).

``create table Name (k string primary key, total sum(double), note string)`` declares key
columns, plain columns and aggregation columns.  A table instance (one per context
partition when the table declares a context) keeps each row under one key of its state
namespace: the JSON of the primary-key values.  A row record holds the key values, the
plain column values, the state of every aggregation column (an aggregator state, as the
result sets keep them) and a sequence number giving first-insert order.
``into table`` statements aggregate into the aggregation columns; on-actions read, insert,
update and delete rows; on-demand queries read them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from itertools import product
from typing import Any

from operators.aggregates import Aggregator
from operators.base import PartitionCtx, Row, Rows, StateNamespace
from operators.resultset import ResultSet, ResultSetSpec, group_key, group_values
from operators.windows.java_order import hashmap_order, multikey_hash


@dataclass(frozen=True)
class TableColumn:
    """A column: a key or plain column (``type_name``) or an aggregation (``aggregator``)."""

    name: str
    type_name: str | None = None
    key: bool = False
    aggregator: Aggregator | None = field(default=None, compare=False)
    agg_text: str = ""


@dataclass(frozen=True)
class TableSpec:
    """A validated ``create table``."""

    name: str
    columns: tuple[TableColumn, ...]
    context: str | None = None

    @property
    def keys(self) -> tuple[str, ...]:
        """Names of the primary-key columns, in declaration order."""
        return tuple(c.name for c in self.columns if c.key)

    @property
    def key_types(self) -> tuple[str, ...]:
        """Declared types of the primary-key columns, in declaration order."""
        return tuple(str(c.type_name or "object") for c in self.columns if c.key)

    @property
    def plain(self) -> tuple[str, ...]:
        """Names of the columns that are neither keys nor aggregations."""
        return tuple(c.name for c in self.columns if not c.key and c.aggregator is None)

    @property
    def aggregations(self) -> dict[str, TableColumn]:
        """The aggregation columns by name."""
        return {c.name: c for c in self.columns if c.aggregator is not None}

    def column(self, name: str) -> TableColumn | None:
        """A column by name, or None."""
        return next((c for c in self.columns if c.name == name), None)

    def describe(self) -> str:
        """The declaration for ``kepl explain``."""
        cols = []
        for c in self.columns:
            if c.aggregator is not None:
                cols.append(f"{c.name} {c.agg_text}")
            else:
                cols.append(f"{c.name} {c.type_name}" + (" primary key" if c.key else ""))
        return f"table {self.name}({', '.join(cols)})"

    def build(self, state: StateNamespace) -> Table:
        """A table instance over ``state`` (restoring the rows it holds)."""
        return Table(self, state)


def table_key(values: list | tuple) -> str:
    """The store key of a row: its primary-key values encoded as group keys are."""
    return group_key(tuple(values))


_INT_KEYS = frozenset({"int", "integer", "long", "short", "byte", "biginteger"})
_FLOAT_KEYS = frozenset({"double", "float", "bigdecimal"})


def coerce_key(type_name: str, value: Any) -> Any:
    """A key value as a key column of ``type_name`` holds it: Esper coerces the key
    expressions of a table access to the key column types (an int expression reads a
    long key, Esper ref. 4.7); a value that cannot be coerced is returned unchanged."""
    t = type_name.lower()
    if isinstance(value, bool) or value is None:
        return value
    if t in _INT_KEYS and isinstance(value, float) and value.is_integer():
        return int(value)
    if t in _FLOAT_KEYS and isinstance(value, int):
        return float(value)
    return value


def _numeric_forms(value: Any) -> list[Any]:
    """The value and, for an integral number, its other numeric form (5 and 5.0): rows
    aggregated from events keep the key as the event carried it."""
    if isinstance(value, bool):
        return [value]
    if isinstance(value, float) and value.is_integer():
        return [value, int(value)]
    if isinstance(value, int):
        return [value, float(value)]
    return [value]


class Table:
    """One table instance: rows by primary key, an in-memory mirror over its namespace."""

    def __init__(self, spec: TableSpec, state: StateNamespace) -> None:
        self.spec = spec
        self.state = state
        self.records: dict[str, dict[str, Any]] = {}
        loaded = sorted(state.items(), key=lambda kv: kv[1]["s"])
        for k, rec in loaded:
            self.records[k] = rec
        self.next_seq = max((r["s"] for r in self.records.values()), default=-1) + 1

    # -- records -----------------------------------------------------------
    def get(self, key: str) -> dict[str, Any] | None:
        """The record under a key, or None."""
        return self.records.get(key)

    def lookup(self, key_values: Sequence[Any]) -> dict[str, Any] | None:
        """The record whose primary key is ``key_values`` (coerced to the key types), or
        None.  A dict probe per numeric form of the key, usually exactly one."""
        vals = [coerce_key(t, v) for t, v in zip(self.spec.key_types, key_values)]
        rec = self.records.get(table_key(vals))
        if rec is not None or not any(isinstance(v, int | float) for v in vals):
            return rec
        for alt in product(*(_numeric_forms(v) for v in vals)):
            rec = self.records.get(table_key(list(alt)))
            if rec is not None:
                return rec
        return None

    def value(self, rec: dict[str, Any], column: str) -> Any:
        """One column of a record: a key or plain value, or an aggregation's result."""
        spec = self.spec
        col = spec.column(column)
        if col is None:
            return None
        if col.key:
            return rec["k"][spec.keys.index(column)]
        if col.aggregator is not None:
            state = rec["a"].get(column)
            return col.aggregator.result(state if state is not None
                                         else col.aggregator.initial())
        return rec["c"].get(column)

    def create(self, key_values: list | tuple, plain: dict[str, Any] | None = None
               ) -> dict[str, Any]:
        """A new record (aggregation columns at their initial state); not yet stored."""
        spec = self.spec
        rec = {"k": list(key_values), "c": {c: (plain or {}).get(c) for c in spec.plain},
               "a": {n: c.aggregator.initial() for n, c in spec.aggregations.items()
                     if c.aggregator is not None},
               "s": self.next_seq, "r": None}
        self.next_seq += 1
        return rec

    def put(self, key: str, rec: dict[str, Any]) -> None:
        """Store a record (one key written)."""
        self.records[key] = rec
        self.state.put(key, rec)

    def delete(self, key: str) -> None:
        """Remove a row."""
        if self.records.pop(key, None) is not None:
            self.state.delete(key)

    def keys(self) -> list[str]:
        """Row keys in first-insert order."""
        return list(self.records)

    def clear(self) -> None:
        """Drop every row (the table's context partition ended)."""
        self.records.clear()
        self.state.clear()

    # -- rows as statements see them ---------------------------------------
    def row(self, rec: dict[str, Any]) -> Row:
        """A record as a row: key columns, plain columns, aggregation results."""
        spec = self.spec
        out: Row = dict(zip(spec.keys, rec["k"]))
        out.update(rec["c"])
        for name, col in spec.aggregations.items():
            if col.aggregator is not None:
                out[name] = col.aggregator.result(rec["a"].get(name, col.aggregator.initial()))
        return out

    def rows(self) -> Rows:
        """Every row, in the order Esper iterates a table: its hash map by primary key
        (the bucket of the key's Java hash code, then insertion within a bucket)."""
        recs = list(self.records.values())
        if len(recs) > 1:
            boxes = self.spec.key_types
            order, _ = hashmap_order([multikey_hash(r["k"], boxes) for r in recs])
            recs = [recs[i] for i in order]
        return [self.row(r) for r in recs]

    def key_of_row(self, row: Row) -> str:
        """The store key of a row given as statements see it."""
        return table_key([row.get(k) for k in self.spec.keys])

    def insert_row(self, row: Row) -> tuple[Row, Row | None]:
        """Insert (or replace) a row from column values; returns (new row, replaced row)."""
        spec = self.spec
        keyvals = [row.get(k) for k in spec.keys]
        key = table_key(keyvals)
        previous = self.records.get(key)
        rec = self.create(keyvals, {c: row.get(c) for c in spec.plain})
        self.put(key, rec)
        return self.row(rec), (self.row(previous) if previous is not None else None)

    def update_row(self, old: Row, values: dict[str, Any]) -> Row | None:
        """Set plain columns of the row ``old`` (keys may change); the updated row."""
        key = self.key_of_row(old)
        rec = self.records.get(key)
        if rec is None:
            return None
        spec = self.spec
        new_keys = [values.get(k, v) for k, v in zip(spec.keys, rec["k"])]
        rec = {**rec, "c": {**rec["c"], **{c: values[c] for c in spec.plain if c in values}},
               "k": new_keys}
        new_key = table_key(new_keys)
        if new_key != key:
            self.delete(key)
        self.put(new_key, rec)
        return self.row(rec)

    def delete_row(self, row: Row) -> bool:
        """Remove the row ``row``; whether it was there."""
        key = self.key_of_row(row)
        if key in self.records:
            self.delete(key)
            return True
        return False


class GlobalTables(Mapping[str, Table]):
    """The instances of the tables declared without a context, fetched when read: what
    expressions evaluated outside a statement (context conditions) may read.  A table
    without a context is global (Esper ref. 4.7), so every reader sees the same instance."""

    def __init__(self, specs: Mapping[str, TableSpec],
                 instance: Callable[[str, Any], Table]) -> None:
        self.specs = specs
        self.instance = instance

    def __getitem__(self, name: str) -> Table:
        spec = self.specs.get(name)
        if spec is None or spec.context is not None:
            raise KeyError(name)
        return self.instance(name, 0)

    def __iter__(self) -> Iterator[str]:
        return iter([n for n, s in self.specs.items() if s.context is None])

    def __len__(self) -> int:
        return sum(1 for s in self.specs.values() if s.context is None)


class _TableGroups:
    """The result set's group map, backed by a table's rows (an ``into table`` statement).

    Group records are built from table rows on first access within an update and written
    back on ``put``; ``begin`` forgets them so that changes made by other statements to the
    same table (on-merge, on-delete, other ``into table`` statements) are always seen.
    """

    def __init__(self, table: Table, columns: tuple[str, ...], aggregators: list[Any]) -> None:
        self.table = table
        self.columns = columns
        self.aggregators = aggregators
        self.cache: dict[str, list] = {}

    @staticmethod
    def _tkey(key: str) -> str:
        """The table key of a group key (an ungrouped statement uses the key-less row)."""
        return group_key(()) if key == "" else key

    def begin(self) -> None:
        """Forget the records read so far (a new update or read starts)."""
        self.cache.clear()

    def _load(self, key: str) -> list | None:
        """A group record built from the table row, cached for this update."""
        rec = self.cache.get(key)
        if rec is not None:
            return rec
        trec = self.table.get(self._tkey(key))
        if trec is None:
            return None
        states = [trec["a"].get(col) if col is not None else None for col in self.columns]
        states = [s if s is not None else self.aggregators[i].initial()
                  for i, s in enumerate(states)]
        rec = [states, trec.get("r"), trec["s"]]
        self.cache[key] = rec
        return rec

    def get(self, key: str, default: Any = None) -> Any:
        """The group record, or ``default``."""
        rec = self._load(key)
        return default if rec is None else rec

    def __getitem__(self, key: str) -> list:
        rec = self._load(key)
        if rec is None:
            raise KeyError(key)
        return rec

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._load(key) is not None

    def __setitem__(self, key: str, rec: list) -> None:
        self.cache[key] = rec
        self.put(key, rec)

    def put(self, key: str, rec: list) -> None:
        """Write a group record back into its table row."""
        tkey = self._tkey(key)
        trec = self.table.get(tkey)
        if trec is None:
            keyvals = group_values(tkey)
            trec = self.table.create(keyvals)
        trec = {**trec, "a": dict(trec["a"]), "r": rec[1]}
        for col, state in zip(self.columns, rec[0]):
            if col is not None:
                trec["a"][col] = state
        rec[2] = trec["s"]
        self.table.put(tkey, trec)

    def keys(self) -> list[str]:
        """Names of the primary-key columns, in declaration order."""
        return ["" if k == "[]" else k for k in self.table.keys()]

    def __iter__(self) -> Any:
        return iter(self.keys())

    def values(self) -> list[list]:
        """Every group record in first-insert order."""
        return [self[k] for k in self.keys()]


class _PutThrough:
    """Stands in for the result set's namespace: group writes go to the table."""

    def __init__(self, groups: _TableGroups) -> None:
        self.groups = groups

    def put(self, key: str, rec: list) -> None:
        """Write a group record back into its table row."""
        self.groups.put(key, rec)

    def items(self) -> list:
        """Nothing: the groups live in the table, not in this namespace."""
        return []


class TableResultSet(ResultSet):
    """A result set whose groups are the rows of a table (``into table``, Esper ref. 4.7)."""

    refcounted = False

    def __init__(self, spec: ResultSetSpec, state: StateNamespace, ctx: PartitionCtx,
                 want_old: bool = True) -> None:
        table = ctx.tables.get(spec.table) if spec.table else None
        if table is None:
            raise RuntimeError(f"table '{spec.table}' is not available to this statement")
        super().__init__(spec, state, ctx, want_old)
        self.table_groups = _TableGroups(table, spec.table_columns,
                                         [a.aggregator for a in spec.aggregates])
        self.groups = self.table_groups  # type: ignore[assignment]
        self.state = _PutThrough(self.table_groups)  # type: ignore[assignment]

    def _begin(self) -> None:
        """Read the table afresh at each entry point."""
        self.table_groups.begin()


@dataclass(frozen=True)
class IntoTableSpec(ResultSetSpec):
    """The result set of an ``into table`` statement: its groups are the table's rows."""

    @classmethod
    def of(cls, rs: ResultSetSpec, table: str, columns: tuple[str, ...]) -> IntoTableSpec:
        """``rs`` with its aggregation state kept in ``table``'s ``columns``."""
        values = {f.name: getattr(rs, f.name) for f in fields(rs)}
        return cls(**{**values, "table": table, "table_columns": columns})

    def build(self, state: StateNamespace, ctx: PartitionCtx,
              want_old: bool = True) -> ResultSet:
        return TableResultSet(self, state, ctx, want_old)
