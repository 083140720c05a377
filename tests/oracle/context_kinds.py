"""Generated context declarations beyond generate.py's eight (Esper ref. 4.2-4.3).

Each scenario declares one context of a wider set than the single-stream kind draws:
keyed contexts with a filter, two keys, a stream alias, an initiating or terminating
condition; a hash context numbering its buckets by first use; a category context over a
string; non-overlapping and overlapping contexts started and ended by filters with
correlation (``as g`` ... ``Halt(k = g.k)``), ``after`` periods, patterns with
``@inclusive``, ``distinct`` initiation; nested contexts in several orders. The query
over ``Ev`` selects context properties (``context.key1``, ``context.label``,
``context.id``, ``context.startTime``, a correlated tag's property) beside a data window,
aggregation and an output clause, ``output ... when terminated`` where the context ends.
"""

from __future__ import annotations

import random

from tests.oracle.generate import OUTPUTS, STREAMS, WINDOWS, Shape, _output, _select

CONTEXTS: dict[str, tuple[str, tuple[str, ...], bool]] = {
    # name: (declaration after 'create context C', context property columns, ends)
    "keyed_filter": ("partition by k from Ev(v > 1)",
                     ("context.key1 as ck", "context.name as cn"), False),
    "keyed_two": ("partition by k and v from Ev", ("context.key1 as ck", "context.key2 as ck2"),
                  False),
    "keyed_halt_all": ("partition by k from Ev terminated by Halt", ("context.key1 as ck",),
                       True),
    "keyed_halt_own": ("partition by k from Ev, k from Halt terminated by Halt",
                       ("context.key1 as ck", "context.id as cid"), True),
    "keyed_alias_corr": ("partition by k from Ev as e terminated by Ev(v = e.v)",
                         ("context.e.v as ev", "context.key1 as ck"), True),
    "keyed_initiated": ("partition by k from Ev(v > 0) initiated by Ev(v = 5) "
                        "terminated by Ev(v = -1)", ("context.id as cid",), True),
    "hash_first_use": ("coalesce by consistent_hash_crc32(k) from Ev granularity 4",
                       ("context.id as cid",), False),
    "category_text": ("group by k = 'a' as ga, group by k != 'a' as gb from Ev",
                      ("context.label as lbl", "context.id as cid"), False),
    "start_end_corr": ("start Go as g end Halt(k = g.k)",
                       ("context.g.k as gk", "context.startTime as st"), True),
    "start_end_filter": ("start Go(k = 'a') end Halt(k != 'a')",
                         ("context.startTime as st",), True),
    "start_after_after": ("start after 1 sec end after 2 sec",
                          ("context.startTime as st", "context.endTime as et"), True),
    "start_event": ("start Ev(v > 3) end after 2 sec", ("context.startTime as st",), True),
    "start_pattern_inclusive": ("start pattern [e=Ev(v > 3)]@inclusive end Halt",
                                ("context.startTime as st",), True),
    "initiated_corr": ("initiated by Go as g terminated by Halt(k = g.k)",
                       ("context.g.k as gk", "context.id as cid"), True),
    "initiated_distinct": ("initiated by distinct(k) Go as g terminated after 2 sec",
                           ("context.g.k as gk",), True),
    "initiated_event": ("initiated by Ev(v > 3) as e terminated after 1500 msec",
                        ("context.e.v as ev", "context.id as cid"), True),
    "initiated_pattern_inclusive": ("initiated by pattern [every e=Ev(v > 3)]@inclusive "
                                    "terminated after 2 sec", ("context.id as cid",), True),
    "hash_filter": ("coalesce by consistent_hash_crc32(k) from Ev(v > 0) granularity 2",
                    ("context.id as cid",), False),
    "hash_preallocate": ("coalesce by hash_code(k) from Ev granularity 3 preallocate",
                         ("context.id as cid",), False),
    "crontab_seconds": ("start (*, *, *, *, *, */3) end after 1 sec",
                        ("context.startTime as st", "context.endTime as et"), True),
    "now_end_pattern": ("start @now end pattern [Halt -> Halt]", ("context.id as cid",), True),
    "periodic_overlapping": ("initiated by pattern [every timer:interval(2 sec)] "
                             "terminated after 3 sec",
                             ("context.id as cid", "context.startTime as st"), True),
    "now_and_periodic": ("initiated by @now and pattern [every timer:interval(3 sec)] "
                         "terminated after 2 sec", ("context.id as cid",), True),
    "initiated_term_or_timer": ("initiated by Go as g terminated by pattern "
                                "[Halt(k = g.k) or timer:interval(3 sec)]",
                                ("context.g.k as gk", "context.id as cid"), True),
    "start_end_pattern_tags": ("start pattern [g=Go -> h=Go(k = g.k)] end Halt",
                               ("context.g.k as gk", "context.h.k as hk"), True),
    "nested_start_hash": ("context T start Go end Halt, "
                          "context H coalesce by consistent_hash_crc32(k) from Ev granularity 4",
                          ("context.H.id as hid", "context.id as cid"), True),
    "nested_initiated_keyed": ("context T initiated by Go as g terminated after 2 sec, "
                               "context K partition by k from Ev",
                               ("context.T.g.k as gk", "context.K.key1 as ck"), True),
    "nested_initiated_category": ("context T initiated by Go terminated after 2 sec, "
                                  "context A group by v > 2 as hi, group by v <= 2 as lo "
                                  "from Ev", ("context.A.label as lbl", "context.id as cid"),
                                  True),
    "nested_category_initiated": ("context A group by v > 2 as hi, group by v <= 2 as lo "
                                  "from Ev, context T initiated by Go terminated after 2 sec",
                                  ("context.A.label as lbl", "context.id as cid"), True),
    "nested_keyed_start": ("context K partition by k from Ev, context T start Go end Halt",
                           ("context.K.key1 as ck", "context.id as cid"), True),
    "initiated_end_alias": ("initiated by Go as g terminated by Halt(k = g.k) as h",
                            ("context.g.k as gk", "context.h.k as hk"), True),
    "start_end_alias": ("start Go as g end Halt as h",
                        ("context.g.k as gk", "context.h.k as hk", "context.endTime as et"),
                        True),
    "keyed_initiated_alias": ("partition by k from Ev initiated by Ev(v > 2) as x "
                              "terminated after 2 sec",
                              ("context.x.v as xv", "context.key1 as ck"), True),
    "category_overlap": ("group by v > 2 as hi, group by v > 4 as vhi, group by v < 0 as neg "
                         "from Ev", ("context.label as lbl",), False),
    "nested_keyed_keyed": ("context A partition by k from Ev, context B partition by v from Ev",
                           ("context.A.key1 as ak", "context.B.key1 as bk", "context.id as cid"),
                           False),
    "nested_three": ("context T start Go end Halt, context A group by v > 2 as hi, "
                     "group by v <= 2 as lo from Ev, context K partition by k from Ev",
                     ("context.A.label as lbl", "context.K.key1 as ck", "context.id as cid"),
                     True),
    "nested_category_keyed": ("context A group by v > 2 as hi, group by v <= 2 as lo from Ev, "
                              "context B partition by k from Ev",
                              ("context.A.label as lbl", "context.B.key1 as ck"), False),
    "nested_keyed_category": ("context B partition by k from Ev, "
                              "context A group by v > 2 as hi, group by v <= 2 as lo from Ev",
                              ("context.A.label as lbl", "context.B.key1 as ck"), False),
    "nested_start_keyed": ("context T start Go end Halt, context K partition by k from Ev",
                           ("context.K.key1 as ck",), True),
    "nested_keyed_initiated": ("context K partition by k from Ev, "
                               "context T initiated by Ev(v > 3) terminated after 2 sec",
                               ("context.K.key1 as ck", "context.T.startTime as st"), True),
}

CONTEXT_WINDOWS = ["none", "none", "length", "length_batch", "time", "time_batch", "keepall",
                   "unique", "firstevent", "lastevent", "firstlength", "groupwin_length"]


def context(r: random.Random) -> Shape:
    """One context of ``CONTEXTS`` and a query over ``Ev`` selecting its properties."""
    name = r.choice(list(CONTEXTS))
    decl, props, ends = CONTEXTS[name]
    window = r.choice(CONTEXT_WINDOWS)
    window_text = WINDOWS[window](r)
    agg = r.choice(["plain", "plain", "all", "aggregated", "grouped"])
    output = r.choice(OUTPUTS + (["when_terminated"] * 2 if ends else []) + ["none", "none"])
    stream = r.choice(STREAMS) if r.random() < 0.4 else ""
    sel, tail = _select(r, agg, window != "none", name, output)
    chosen = [p for p in props if r.random() < 0.7] or [props[0]]
    # beside aggregates without a group by a context property is one more plain column
    columns = f"{sel}, {', '.join(chosen)}"
    s = Shape(window, window_text, agg, output, stream.strip() or "istream", name,
              kind="context", detail=name, extra=("Go", "Halt"))
    s.names = ["ctx", "q"]
    # context properties in the stream's filter and the where clause (Esper ref. 4.2.1)
    source = "Ev"
    if "context.g.k as gk" in props and r.random() < 0.4:
        source = "Ev(k = context.g.k)"
    elif r.random() < 0.2:
        source = "Ev(v > 0)"
    where = ""
    if r.random() < 0.25:
        wheres = [" where v is not null", " where d > 0", " where k is not null and v > 1"]
        if "partition by" not in decl:
            # Esper 9 lets every row through a where clause of context properties alone
            # in a keyed context (docs/epl.md, deviations)
            wheres.append(" where context.id < 3")
        where = r.choice(wheres)
    s.epl = [f"create context C {decl}",
             f"context C select {stream}{columns} from {source}{window_text}{where}{tail}"
             f"{_output(r, output)}"]
    return s


JOIN_CONTEXTS: dict[str, tuple[str, tuple[str, ...], bool]] = {
    # contexts for statements over Ev and Fx: a keyed or hash context lists both types
    "keyed_both": ("partition by k from Ev, k from Fx", ("context.key1 as ck",), False),
    "keyed_both_halt": ("partition by k from Ev, k from Fx terminated by Halt",
                        ("context.key1 as ck", "context.id as cid"), True),
    "hash_both": ("coalesce by consistent_hash_crc32(k) from Ev, consistent_hash_crc32(k) "
                  "from Fx granularity 4", ("context.id as cid",), False),
    "start_end_corr": CONTEXTS["start_end_corr"],
    "initiated_corr": CONTEXTS["initiated_corr"],
    "initiated_distinct": CONTEXTS["initiated_distinct"],
    "start_after_after": CONTEXTS["start_after_after"],
    "periodic_overlapping": CONTEXTS["periodic_overlapping"],
    "nested_start_keyed_both": ("context T start Go end Halt, "
                                "context K partition by k from Ev, k from Fx",
                                ("context.K.key1 as ck", "context.id as cid"), True),
    "nested_initiated_keyed_both": ("context T initiated by Go as g terminated after 2 sec, "
                                    "context K partition by k from Ev, k from Fx",
                                    ("context.T.g.k as gk", "context.K.key1 as ck"), True),
}

JOIN_QUERIES = {
    "join": ("select a.k as ak, a.v as av, b.w as bw{props} from Ev#length(3) as a, "
             "Fx#length(3) as b where a.k = b.k"),
    "join_count": ("select count(*) as cnt, sum(b.w) as sw{props} from Ev#time(2 sec) as a, "
                   "Fx#time(2 sec) as b where a.k = b.k"),
    "left_join": ("select a.k as ak, a.v as av, b.w as bw{props} from Ev#keepall as a "
                  "left outer join Fx#lastevent as b on a.k = b.k"),
    "subquery": ("select k, v, (select count(*) from Fx#time(2 sec) as f where f.k = e.k) "
                 "as n{props} from Ev as e"),
    "subquery_max": ("select k, (select max(w) from Fx#length(3)) as mw{props} from Ev"),
    "pattern": ("select a.k as ak, b.w as bw{props} from pattern [every a=Ev -> b=Fx(k = a.k)]"),
    "pattern_within": ("select a.k as ak, a.v as av{props} from pattern "
                       "[every a=Ev -> (b=Fx(k = a.k) where timer:within(1500 msec))]"),
}


def context_join(r: random.Random) -> Shape:
    """A join, subquery or pattern over ``Ev`` and ``Fx`` in one of ``JOIN_CONTEXTS``."""
    name = r.choice(list(JOIN_CONTEXTS))
    decl, props, ends = JOIN_CONTEXTS[name]
    query = r.choice(list(JOIN_QUERIES))
    chosen = [p for p in props if r.random() < 0.7] or [props[0]]
    text = JOIN_QUERIES[query].format(props=", " + ", ".join(chosen))
    outputs = ["none", "none", "none"] + (["when_terminated"] if ends else [])
    output = r.choice(outputs)
    if output == "when_terminated":
        text += r.choice([" output when terminated", " output last when terminated"])
    s = Shape("none", "", "plain", output, "istream", name, kind="context_join",
              detail=f"{name}-{query}", extra=("Fx", "Go", "Halt"))
    s.names = ["ctx", "q"]
    s.epl = [f"create context C {decl}", f"context C {text}"]
    return s
