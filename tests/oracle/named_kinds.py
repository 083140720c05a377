"""Generated named windows and tables with their on-actions (Esper ref. 6 Named windows
and tables, 2.11 named windows and on-merge, 4.8 contexts with named windows and tables).

A named window over ``Ev`` (a data window of its own, filled by ``insert into``) or a
table (keyed by ``k``, aggregated by ``into table`` or written by ``on ... merge``); an
action on ``Fx`` (``on ... delete``, ``select``, ``select and delete``, ``update``,
``merge``); and a consumer (``q``): a statement over the named window, or a table
access from ``Ev``. All of them may run in a context. Every statement is listened to:
the named window's own statement posts its insert and remove stream, the action what it
selected, deleted or changed.
"""

from __future__ import annotations

import random

from tests.oracle.generate import (
    OUTPUTS,
    STREAMS,
    TERMINATING,
    WINDOWS,
    Shape,
    _context,
    _output,
)

NAMED_WINDOWS = ["keepall", "length", "unique", "time", "lastevent", "firstlength",
                 "time_batch", "length_batch", "groupwin_length"]
CONTEXTS = ["keyed", "hash", "start_after", "initiated", "start_end", "nested"]
BOTH = ("Ev", "Fx")

WINDOW_ACTIONS: dict[str, str] = {
    "delete": "on Fx as f delete from W as w where w.k = f.k",
    # (no range beside a key: Esper's composite index returns such matches in the order
    # of a set of event objects, which is no order kepl can follow)
    "delete_cond": "on Fx as f delete from W as w where w.k = f.k and w.v != f.w",
    "delete_all": "on Fx delete from W",
    "select": "on Fx as f select w.k as k, w.v as v from W as w where w.k = f.k",
    "select_agg": ("on Fx as f select count(*) as cnt, sum(w.v) as sv from W as w "
                   "where w.k = f.k"),
    "select_all_agg": "on Fx select count(*) as cnt, max(v) as mx from W",
    "select_delete": ("on Fx as f select and delete w.k as k, w.v as v from W as w "
                      "where w.k = f.k"),
    "update": "on Fx as f update W as w set v = f.w where w.k = f.k",
    "update_add": "on Fx as f update W as w set v = w.v + f.w, d = 0.5 where w.k = f.k",
    "merge": ("on Fx as f merge W as w where w.k = f.k "
              "when matched and f.w > 2 then delete "
              "when matched then update set v = f.w "
              "when not matched then insert select f.k as k, f.w as v, 0.25 as d, "
              "f.ts as ts"),
    "merge_insert": ("on Fx as f merge W as w where w.k = f.k "
                     "when not matched then insert select f.k as k, f.w as v, 1.0 as d, "
                     "f.ts as ts"),
    "merge_update_where": ("on Fx as f merge W as w where w.k = f.k "
                           "when matched and w.v > 2 then update set v = w.v - 1 "
                           "when matched then delete"),
    "merge_two_actions": ("on Fx as f merge W as w where w.k = f.k "
                          "when matched then update set v = f.w "
                          "then insert into Trail select w.k as k, f.w as w "
                          "when not matched and f.w > 1 then insert select f.k as k, "
                          "f.w as v, 2.0 as d, f.ts as ts"),
    "merge_always_insert": ("on Fx as f merge W insert select f.k as k, f.w as v, "
                            "0.5 as d, f.ts as ts"),
    "update_initial": ("on Fx as f update W as w set v = f.w, d = initial.v * 1.0 "
                       "where w.k = f.k and w.v is not null"),
    "select_star": "on Fx as f select * from W as w where w.k = f.k",
    "select_order": ("on Fx select w.k as k, w.v as v from W as w "
                     "order by w.v desc, w.k"),
    "select_grouped": ("on Fx select w.k as k, count(*) as cnt, sum(w.v) as sv from W as w "
                       "group by w.k order by w.k"),
    "select_range": "on Fx as f select w.k as k, w.v as v from W as w where w.v > f.w",
    "delete_sub": ("on Fx as f delete from W as w where w.v = "
                   "(select max(v) from W as x where x.k = f.k)"),
}

CONSUMERS: list[tuple[str, str]] = [
    ("plain", "select {stream}k, v from W"),
    ("all", "select {stream}count(*) as cnt, sum(v) as sv from W"),
    ("grouped", "select {stream}k, count(*) as cnt, sum(v) as sv from W group by k"),
    ("grouped_having", "select {stream}k, sum(v) as sv from W group by k having sum(v) > 2"),
    ("aggregated", "select {stream}k, v, count(*) as cnt from W"),
    ("filtered", "select {stream}k, v, d from W(v > 1)"),
    ("where", "select {stream}k, sum(v) as sv from W where d > 0 group by k"),
    ("distinct", "select {stream}count(distinct k) as ck, avg(v) as av from W"),
    ("join", "select {stream}a.k as k, a.v as v, b.w as w from W as a, Fx#lastevent() as b "
             "where a.k = b.k"),
]

TABLES: dict[str, tuple[str, str]] = {
    # name: (create table, the statement that writes it)
    # (no null keys: Esper 9 loses a row whose primary key is null when it is updated)
    "agg": ("create table T (k string primary key, cnt count(*), sv sum(int))",
            "into table T select count(*) as cnt, sum(v) as sv from Ev(k is not null) "
            "group by k"),
    "agg_window": ("create table T (k string primary key, cnt count(*), mx max(int), "
                   "mn min(int))",
                   "into table T select count(*) as cnt, max(v) as mx, min(v) as mn "
                   "from Ev(k is not null)#length(3) group by k"),
    "plain": ("create table T (k string primary key, v int, d double)",
              "on Ev(k is not null) as e merge T as t where t.k = e.k "
              "when matched and e.v is null then delete "
              "when matched then update set v = e.v, d = e.d "
              "when not matched then insert select e.k as k, e.v as v, e.d as d"),
}

TABLE_ACTIONS: dict[str, str] = {
    "delete": "on Fx as f delete from T as t where t.k = f.k",
    "select": "on Fx as f select t.k as k, {col} as c from T as t where t.k = f.k",
    "select_all": "on Fx select count(*) as n from T",
    "select_rows": "on Fx select t.k as k, {col} as c from T as t",
    "select_filter": "on Fx select t.k as k, {col} as c from T as t where {col} > 1",
    "delete_some": "on Fx(w > 2) delete from T",
    "select_delete": "on Fx as f select and delete t.k as k, {col} as c from T as t "
                     "where t.k = f.k",
}
PLAIN_TABLE_ACTIONS: dict[str, str] = {
    "update": "on Fx as f update T as t set v = f.w where t.k = f.k",
    "merge": ("on Fx(k is not null) as f merge T as t where t.k = f.k "
              "when matched then update set v = t.v + f.w "
              "when not matched then insert select f.k as k, f.w as v, 0.0 as d"),
}
BATCH_WINDOWS = {"time_batch", "length_batch"}
"""Batch windows take on-actions without a key in their where clause only (docs/epl.md,
deviations: Esper looks keyed matches up in an index that holds a batch's events until
the window posts them as removed)."""
KEYLESS_ACTIONS = ["delete_all", "select_all_agg", "select_order", "select_grouped",
                   "merge_always_insert"]


def _prefix(ctx: str | None) -> str:
    return "context C " if ctx else ""


def named(r: random.Random) -> Shape:
    """One named window or table scenario (see the module docstring)."""
    context = r.choice(CONTEXTS + ["none"] * 3)
    ctx = _context(r, context, BOTH)
    pre = _prefix(ctx)
    if r.random() < 0.35:
        return _table(r, context, ctx, pre)
    kind = r.choice(NAMED_WINDOWS)
    text = WINDOWS[kind](r)
    fill = r.choice(["insert into W select * from Ev",
                     "insert into W select * from Ev(k is not null)",
                     "insert into W select * from Ev where v is not null"])
    if kind in BATCH_WINDOWS and context in TERMINATING:
        kind = "length"  # (nor a batch window's on-actions in a context that ends: not analysed)
        text = WINDOWS[kind](r)
    action = r.choice(KEYLESS_ACTIONS if kind in BATCH_WINDOWS else list(WINDOW_ACTIONS))
    detail, consumer = r.choice(CONSUMERS)
    outputs = OUTPUTS + (["when_terminated"] if context in TERMINATING else [])
    output = r.choice(outputs + ["none"] * 3) if detail != "plain" else "none"
    stream = r.choice(STREAMS) if r.random() < 0.4 else ""
    query = consumer.format(stream=stream) + _output(r, output)
    create = f"create window W{text} as Ev"
    if r.random() < 0.2 and context not in ("keyed", "hash", "nested"):
        # columns of its own (Esper ref. 6.2.1.2, 6.2.1.3); a keyed or hash context needs
        # the window's type listed in its declaration
        create = r.choice([f"create window W{text} as select k, v, d, ts from Ev",
                           f"create window W{text} as (k string, v int, d double, ts long)"])
    pairs = ([("ctx", ctx)] if ctx else []) + [
        ("w", f"{pre}{create}"), ("fill", f"{pre}{fill}"),
        ("m", f"{pre}{WINDOW_ACTIONS[action]}"), ("q", f"{pre}{query}")]
    if "Trail" in WINDOW_ACTIONS[action]:
        pairs.append(("trail", "select k, w from Trail"))
    if r.random() < 0.5:  # the consumer before the action: the order statements run in
        pairs[-2], pairs[-1] = pairs[-1], pairs[-2]
    s = Shape(kind, text, detail, output, stream.strip() or "istream", context,
              kind="named", detail=f"window-{action}", extra=("Fx",))
    s.names = [n for n, _ in pairs]
    s.epl = [e for _, e in pairs]
    s.watch = tuple(n for n in s.names if n != "ctx")
    return s


def _table(r: random.Random, context: str, ctx: str | None, pre: str) -> Shape:
    table = r.choice(list(TABLES))
    create, write = TABLES[table]
    col = "t.v" if table == "plain" else "t.cnt"
    actions = {**TABLE_ACTIONS, **(PLAIN_TABLE_ACTIONS if table == "plain" else {})}
    action = r.choice(list(actions))
    value = "v" if table == "plain" else "cnt"
    query = r.choice([
        f"select f.k as k, T[f.k].{value} as c from Fx as f",
        f"select e.k as k, e.v as v, T[e.k].{value} as c from Ev as e",
        f"select T[f.k].{value} as c, f.w as w from Fx as f where T[f.k] is not null",
    ])
    pairs = ([("ctx", ctx)] if ctx else []) + [
        ("t", f"{pre}{create}"), ("fill", f"{pre}{write}"),
        ("m", f"{pre}{actions[action].format(col=col)}"), ("q", f"{pre}{query}")]
    if r.random() < 0.5:
        pairs[-2], pairs[-1] = pairs[-1], pairs[-2]
    s = Shape("table", table, "plain", "none", "istream", context, kind="named",
              detail=f"table-{table}-{action}", extra=("Fx",))
    s.names = [n for n, _ in pairs]
    s.epl = [e for _, e in pairs]
    s.watch = tuple(n for n in s.names if n != "ctx")
    return s


VARIABLE_READERS: list[tuple[str, str]] = [
    ("filter", "select {stream}k, v from Ev(v > thr)"),
    ("where", "select {stream}k, v, thr as t from Ev where v >= thr"),
    ("agg", "select {stream}count(*) as cnt, sum(v) as sv, thr as t from Ev{window} "
            "where v > thr"),
    ("grouped", "select {stream}k, count(*) as cnt from Ev{window} group by k "
                "having count(*) >= thr"),
    ("select", "select {stream}k, v * thr as vt, thr + 1 as t1 from Ev"),
    ("output_when", "select {stream}k, v from Ev{window} output when thr > 2"),
    ("output_when_then", "select {stream}count(*) as cnt from Ev{window} "
                         "output when count_insert >= thr then set thr = thr + 1"),
    ("expr_window", "select {stream}k, v from Ev#expr(current_count <= thr)"),
]
VARIABLE_WRITERS: list[tuple[str, str]] = [
    ("set", "on Fx set thr = coalesce(Fx.w, thr)"),
    ("set_alias", "on Fx(w is not null) as f set thr = f.w"),
    ("set_two", "on Fx as f set thr = coalesce(f.w, 0), seen = seen + 1"),
    ("set_expr", "on Fx as f set thr = case when f.w > 3 then 1 else thr + 1 end"),
]


def variables(r: random.Random) -> Shape:
    """Variables (Esper ref. 5.17, 4.8 contexts and variables): a threshold read in a
    filter, a where or having clause, a select list, an ``output when`` condition or an
    expression window, set by ``on Fx set`` and by ``output ... then set``; global or
    declared for a context's partitions."""
    context = r.choice(["keyed", "start_after", "none", "none", "none"])
    ctx = _context(r, context, BOTH)
    pre = _prefix(ctx)
    detail, reader = r.choice(VARIABLE_READERS)
    # a global variable read by 'output when' in a context whose partitions end is not
    # generated: Esper 9 never unregisters an ended partition's condition from a global
    # variable (docs/epl.md, deviations)
    scoped = ctx is not None and (r.random() < 0.6 or (
        context == "start_after" and detail.startswith("output_when")))
    vpre = pre if scoped else ""
    wname, writer = r.choice(VARIABLE_WRITERS)
    window = r.choice(["", "#length(3)", "#time(2 sec)", "#keepall()"])
    stream = r.choice(STREAMS) if r.random() < 0.3 and detail not in (
        "output_when", "output_when_then") else ""
    query = reader.format(stream=stream, window=window)
    pairs = ([("ctx", ctx)] if ctx else []) + [
        ("v", f"{vpre}create variable int thr = {r.choice([1, 2, 3])}"),
        ("v2", f"{vpre}create variable int seen = 0"),
        ("m", f"{vpre}{writer}"), ("q", f"{pre}{query}")]
    if r.random() < 0.5:
        pairs[-2], pairs[-1] = pairs[-1], pairs[-2]
    s = Shape("variable", window, detail, "none", stream.strip() or "istream", context,
              kind="variables", detail=f"{wname}-{'context' if scoped else 'global'}",
              extra=("Fx",))
    s.names = [n for n, _ in pairs]
    s.epl = [e for _, e in pairs]
    s.watch = tuple(n for n in s.names if n in ("m", "q"))
    return s
