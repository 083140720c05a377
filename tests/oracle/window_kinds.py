"""Generated derived-value windows and combined data windows (Esper ref. 14.4 Derived-Value
Windows; 5.4.4 Multiple Data Windows, ``retain-union`` and ``retain-intersection``).

A statement over ``Ev`` with ``#size``, ``#uni``, ``#linest``, ``#correl`` or
``#weighted_avg`` (with additional properties, over a data window, per group with
``#groupwin``), or with two data windows kept as their intersection (the default) or
their union, each with the select stream keywords, output clauses and contexts the
single-stream kind draws.
"""

from __future__ import annotations

import random

from tests.oracle.generate import CONTEXTS, STREAMS, TERMINATING, Shape, _context, _output

BASES = ["", "#length(3)", "#length(2)", "#time(2 sec)", "#keepall()", "#length_batch(2)",
         "#time_batch(2 sec)", "#unique(k)", "#lastevent()"]
DERIVED: dict[str, tuple[str, str]] = {
    # name: (view, the columns a select list names)
    "size": ("#size()", "size"),
    "size_props": ("#size(k)", "size, k"),
    "uni": ("#uni(v)", "datapoints, total, average, variance, stddev, stddevpa"),
    "uni_props": ("#uni(d, k)", "datapoints, average, k"),
    "linest": ("#linest(v, d)", "slope, YIntercept, XAverage, YAverage, dataPoints"),
    "correl": ("#correl(v, d)", "correlation"),
    "weighted": ("#weighted_avg(v, d)", "average"),
    "weighted_props": ("#weighted_avg(v, d, k)", "average, k"),
}
COMBINED = [
    "#length(3)#unique(k)", "#unique(k)#length(2)", "#time(2 sec)#unique(k)",
    "#unique(k)#time(1500 msec)", "#length(2)#time(2 sec)", "#time(3 sec)#length(2)",
]
"""Not generated: a first-window (``#firstunique``, ``#firstlength``) or a batch window
beside another (docs/epl.md, deviations)."""


def derived(r: random.Random) -> Shape:
    """One derived-value or combined-window statement (see the module docstring)."""
    context = r.choice(CONTEXTS + ["none"] * 4)
    ctx = _context(r, context)
    pre = "context C " if ctx else ""
    outputs = ["none"] * 4 + ["default", "last", "all", "snapshot"] + (
        ["when_terminated"] if context in TERMINATING else [])
    output = r.choice(outputs)
    stream = r.choice(STREAMS) if r.random() < 0.4 else ""
    if r.random() < 0.6:
        name, (view, cols) = r.choice(list(DERIVED.items()))
        base = r.choice(BASES)
        grouped = r.random() < 0.3 and "props" not in name
        text = f"#groupwin(k){base}{view}" if grouped and base else f"{base}{view}"
        if grouped and base:
            cols = f"k, {cols}" if name != "size" else "k, size"
        sel = r.choice([cols, "*"]) if not grouped else cols
        filt = r.choice(["", "", "(d is not null)"]) if name.startswith(
            ("linest", "correl", "weighted")) else ""
        query = f"{pre}select {stream}{sel} from Ev{filt}{text}{_output(r, output)}"
        s = Shape(name, text, "derived", output, stream.strip() or "istream", context,
                  kind="derived", detail=f"{name}{'-grouped' if grouped else ''}")
    else:
        text = r.choice(COMBINED)
        union = r.random() < 0.4
        keyword = " retain-union" if union else r.choice(["", " retain-intersection"])
        agg = r.choice(["plain", "agg", "grouped"])
        sel = {"plain": "k, v", "agg": "count(*) as cnt, sum(v) as sv",
               "grouped": "k, count(*) as cnt"}[agg]
        tail = " group by k" if agg == "grouped" else ""
        query = (f"{pre}select {stream}{sel} from Ev{text}{keyword}{tail}"
                 f"{_output(r, output)}")
        s = Shape("combined", text, agg, output, stream.strip() or "istream", context,
                  kind="derived", detail="union" if union else "intersection")
    pairs = ([("ctx", ctx)] if ctx else []) + [("q", query)]
    s.names = [n for n, _ in pairs]
    s.epl = [e for _, e in pairs]
    return s


INSERT_SOURCES = [
    "insert into S select k, v from Ev{win}",
    "insert into S select k, v, d from Ev{win} where v is not null",
    "insert irstream into S select k, v from Ev{win}",
    "insert rstream into S select k, v from Ev{win}",
    "insert into S select k, sum(v) as v from Ev{win} group by k",
    "insert into S select k, count(*) as v from Ev{win} group by k output last every 2 events",
    "insert into S select k, max(v) as v from Ev{win}",
    "insert into S select istream k, v from Ev{win}",
]
INSERT_CONSUMERS = [
    ("plain", "select {stream}k, v from S{win}"),
    ("agg", "select {stream}count(*) as cnt, sum(v) as sv from S{win}"),
    ("grouped", "select {stream}k, count(*) as cnt, min(v) as mn from S{win} group by k"),
    ("pattern", "select a.k as k, a.v as av, b.v as bv from pattern [every a=S -> b=S(k = a.k)]"),
    ("join", "select s.k as k, s.v as sv, f.w as fw from S{win} as s, Fx#lastevent() as f "
             "where s.k = f.k"),
    ("hop", "insert into T select k, v * 2 as v2 from S{win}"),
]


def insert(r: random.Random) -> Shape:
    """Insert-into chains (Esper ref. 5.10 insert into): a statement over ``Ev`` inserting
    into a stream (insert, remove or both streams; plain, aggregated, grouped, rate
    limited), a second source inserting ``Fx`` into it, and a consumer (a window with
    aggregation, a pattern, a join with ``Fx``, another hop); every statement is listened
    to, so the order rows reach each is compared too."""
    win = r.choice(["", "#length(2)", "#time(2 sec)", "#keepall()", "#length_batch(2)",
                    "#unique(k)"])
    source = r.choice(INSERT_SOURCES).format(win=win)
    detail, consumer = r.choice(INSERT_CONSUMERS)
    cwin = r.choice(["#length(2)", "#length(3)", "#time(3 sec)", "#unique(k)"]
                    + ([""] if detail != "join" else []))
    stream = r.choice(STREAMS) if r.random() < 0.3 and detail in ("plain", "agg",
                                                                  "grouped") else ""
    query = consumer.format(stream=stream, win=cwin)
    pairs = [("src", source)]
    if r.random() < 0.4 and " d " not in source.replace("d from", " d from"):
        cols = "k, w as v" if "d," not in source else "k, w as v, 0.5 as d"
        pairs.append(("src2", f"insert into S select {cols} from Fx"))
    pairs.append(("q", query))
    if detail == "hop":
        pairs.append(("t", f"select {stream}k, v2 from T"))
    s = Shape("insert", win, detail, "none", stream.strip() or "istream", "none",
              kind="insert", detail=detail, extra=("Fx",))
    s.names = [n for n, _ in pairs]
    s.epl = [e for _, e in pairs]
    s.watch = tuple(s.names)
    return s
