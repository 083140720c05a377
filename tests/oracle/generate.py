"""Generated scenarios for the Esper oracle: window × aggregation × output × context.

Each scenario (FORMAT.md) deploys an optional ``create context`` and one query over
``Ev`` that combines a data window, a select list (plain properties, aggregates with or
without ``group by``, ``having``), an output clause and a select stream keyword. The
events carry a few keys and values, nulls among them, and the clock moves in steps that
cross window, batch, output and context boundaries. Every step is followed by an
``expect`` step listing the query without rows: ``python -m tests.oracle.oracle
--record`` fills them with Esper's rows, and kepl is then compared with them.

The same seed always writes the same files, so a batch can be regenerated and rerun.

    python -m tests.oracle.generate --seed N --count K --out DIR
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

SCHEMAS: dict[str, dict[str, str]] = {
    "Ev": {"k": "string", "v": "int", "d": "double", "ts": "long"},
    "Go": {"k": "string"},
    "Halt": {"k": "string"},
}
# The second stream of joins, subqueries and patterns (kinds.py).
SCHEMAS_FX: dict[str, dict[str, str]] = {**SCHEMAS, "Fx": {"k": "string", "w": "int", "ts": "long"}}
KEYS = ["a", "b", "c", None]
INTS = [1, 2, 3, 4, 5, -1, None]
DOUBLES = [0.5, 1.5, 2.0, 4.25, -1.0, None]


@dataclass
class Shape:
    """What one generated scenario combines; its name is derived from it."""

    window: str
    window_text: str
    agg: str
    output: str
    stream: str
    context: str
    epl: list[str] = field(default_factory=list)
    kind: str = "single"  # single, join, subquery, pattern, match (kinds.py)
    detail: str = ""  # what the kind varies: the join type, the subquery form, ...
    names: list[str] = field(default_factory=list)  # statement names (default: ctx, q)
    extra: tuple[str, ...] = ()  # types sent besides Ev
    watch: tuple[str, ...] = ()  # statements each expect step lists (default: the query)


# --------------------------------------------------------------------------- windows

def _secs(r: random.Random) -> str:
    return r.choice(["1 sec", "2 sec", "1500 msec", "3 sec"])


FLOWS = ["'FORCE_UPDATE'", "'START_EAGER'", "'FORCE_UPDATE, START_EAGER'"]
"""Flow-control keywords of the batch windows (Esper ref. 14.3.5)."""

WINDOWS: dict[str, Callable[[random.Random], str]] = {
    "none": lambda r: "",
    "length": lambda r: f"#length({r.randint(2, 4)})",
    "length_batch": lambda r: f"#length_batch({r.randint(2, 3)})",
    "time": lambda r: f"#time({_secs(r)})",
    "time_batch": lambda r: f"#time_batch({_secs(r)})",
    "ext_timed": lambda r: f"#ext_timed(ts, {_secs(r)})",
    "keepall": lambda r: "#keepall()",
    "firstlength": lambda r: f"#firstlength({r.randint(2, 4)})",
    "firsttime": lambda r: f"#firsttime({_secs(r)})",
    "unique": lambda r: "#unique(k)",
    "firstunique": lambda r: "#firstunique(k)",
    "lastevent": lambda r: "#lastevent()",
    "firstevent": lambda r: "#firstevent()",
    "sort": lambda r: f"#sort({r.randint(2, 3)}, v{r.choice(['', ' desc'])})",
    "groupwin_length": lambda r: f"#groupwin(k)#length({r.randint(1, 2)})",
    "time_accum": lambda r: f"#time_accum({_secs(r)})",
    "time_length_batch": lambda r: f"#time_length_batch({_secs(r)}, {r.randint(2, 3)})",
    "ext_timed_batch": lambda r: f"#ext_timed_batch(ts, {_secs(r)})",
    "time_order": lambda r: f"#time_order(ts, {_secs(r)})",
    "timetolive": lambda r: "#timetolive(ts)",
    "expr": lambda r: r.choice(["#expr(current_count <= 2)",
                                "#expr(oldest_timestamp > newest_timestamp - 1500)",
                                "#expr(newest_event.k = oldest_event.k)"]),
    "expr_batch": lambda r: r.choice(["#expr_batch(current_count >= 3)",
                                      "#expr_batch(newest_timestamp - oldest_timestamp > 1000)"]),
    "groupwin_time": lambda r: f"#groupwin(k)#time({_secs(r)})",
    "groupwin_time_batch": lambda r: f"#groupwin(k)#time_batch({_secs(r)})",
    "groupwin_length_batch": lambda r: "#groupwin(k)#length_batch(2)",
    "time_batch_flow": lambda r: f"#time_batch({_secs(r)}, {r.choice(FLOWS)})",
    "time_length_batch_flow": lambda r: (f"#time_length_batch({_secs(r)}, {r.randint(2, 3)}, "
                                         f"{r.choice(FLOWS)})"),
    "unique_two": lambda r: "#unique(k, v)",
    # unique and sort values never null: Esper 9 differs there (docs/epl.md, deviations)
    "rank": lambda r: (f"#rank(coalesce(k, 'z'), {r.randint(2, 3)}, "
                       f"coalesce(v, 0){r.choice(['', ' desc'])})"),
}

# --------------------------------------------------------------------------- select lists

AGGREGATES = ["count(*) as cnt", "sum(v) as sv", "avg(d) as ad", "min(v) as mnv",
              "max(d) as mxd", "count(distinct k) as cdk", "count(v) as cv"]
WINDOW_AGGREGATES = ["first(v) as fv", "last(d) as ld"]
HAVINGS = ["count(*) > 1", "sum(v) > 3", "min(v) < 3", "avg(d) > 1"]


def _aggregates(r: random.Random, windowed: bool) -> list[str]:
    pool = AGGREGATES + (WINDOW_AGGREGATES if windowed else [])
    return r.sample(pool, r.randint(1, 3))


def _select(r: random.Random, kind: str, windowed: bool, context: str,
            output: str) -> tuple[str, str]:
    """The select list and what follows the from clause (group by, having)."""
    if kind == "plain":
        return r.choice(["k, v", "k, v, d"]), ""
    aggs = _aggregates(r, windowed)
    having = f" having {r.choice(HAVINGS)}" if r.random() < 0.3 else ""
    if kind == "all":
        return ", ".join(aggs), having
    if kind == "aggregated":  # properties next to aggregates, no group by
        # in a keyed context 'k' is the partition's key: fully aggregated there
        return "k, " + ", ".join(aggs), having
    return "k, " + ", ".join(aggs), f" group by k{having}"  # grouped


# --------------------------------------------------------------------------- output

def _output(r: random.Random, kind: str) -> str:
    if kind == "none":
        return ""
    if kind == "when_terminated":
        word = r.choice(['', 'last ', 'all ', 'snapshot '])
        return f" output {word}" + r.choice([
            "when terminated", "when terminated", "when terminated and count_insert > 1",
            "every 2 events and when terminated",
            "when count_insert >= 3 and when terminated"])
    rate = (f"every {r.randint(2, 3)} events" if r.random() < 0.5
            else f"every {r.choice(['1', '2', '1.5'])} seconds")
    word = {"default": "", "first": "first ", "last": "last ", "all": "all ",
            "snapshot": "snapshot "}[kind]
    return f" output {word}{rate}"


# --------------------------------------------------------------------------- contexts

def _context(r: random.Random, kind: str, types: tuple[str, ...] = ("Ev",)) -> str | None:
    """The create context statement of one context kind (None: no context); a keyed or
    hash context lists every type in ``types`` (the streams of the statement)."""
    if kind == "none":
        return None
    keyed = ", ".join(f"k from {t}" for t in types)
    if kind == "keyed":
        return f"create context C partition by {keyed}"
    if kind == "hash":
        hashed = ", ".join(f"consistent_hash_crc32(k) from {t}" for t in types)
        return (f"create context C coalesce by {hashed} "
                f"granularity {r.choice([2, 4])} preallocate")
    if kind == "category":
        return "create context C group by v > 2 as hi, group by v <= 2 as lo from Ev"
    if kind == "start_end":
        return "create context C start Go end Halt"
    if kind == "start_after":
        return f"create context C start @now end after {r.choice(['2 sec', '3 sec'])}"
    if kind == "initiated":
        return f"create context C initiated by Go as s terminated after {_secs(r)}"
    if kind == "nested":
        return (f"create context C context K partition by {keyed}, "
                f"context T start @now end after {r.choice(['2 sec', '3 sec'])}")
    raise ValueError(kind)


CONTEXTS = ["none", "keyed", "hash", "category", "start_end", "start_after", "initiated",
            "nested"]
TERMINATING = {"start_end", "start_after", "initiated", "nested"}
AGG_KINDS = ["plain", "all", "aggregated", "grouped"]
OUTPUTS = ["none", "default", "first", "last", "all", "snapshot"]
STREAMS = ["", "irstream ", "rstream "]


def shape(r: random.Random) -> Shape:
    """Pick one combination."""
    window = r.choice(list(WINDOWS))
    window_text = WINDOWS[window](r)
    context = r.choice(CONTEXTS + ["none", "none"])
    agg = r.choice(AGG_KINDS)
    outputs = OUTPUTS + (["when_terminated"] if context in TERMINATING else [])
    output = r.choice(outputs + ["none"])
    stream = r.choice(STREAMS) if r.random() < 0.5 else ""
    sel, tail = _select(r, agg, window != "none", context, output)
    s = Shape(window, window_text, agg, output, stream.strip() or "istream", context)
    ctx = _context(r, context)
    if ctx:
        s.epl.append(ctx)
    where = " where v is not null" if r.random() < 0.15 else ""
    prefix = "context C " if ctx else ""
    s.epl.append(f"{prefix}select {stream}{sel} from Ev{window_text}{where}{tail}"
                 f"{_output(r, output)}")
    return s


# --------------------------------------------------------------------------- steps

def event(r: random.Random, kind: str, clock: int) -> dict:
    """One event of a generated type (Ev, Fx, Halt) at ``clock``."""
    if kind == "Ev":
        return {"k": r.choice(KEYS), "v": r.choice(INTS), "d": r.choice(DOUBLES), "ts": clock}
    if kind == "Fx":
        return {"k": r.choice(KEYS), "w": r.choice(INTS), "ts": clock}
    return {"k": r.choice(KEYS[:3])}


def steps(r: random.Random, s: Shape, query: str) -> list[dict]:
    """Events and clock moves, each followed by an expect step for the query."""
    out: list[dict] = []
    clock = 0

    def expect() -> dict:
        return {"expect": dict.fromkeys(s.watch or (query,), "none")}

    n_events = r.randint(12, 22) if s.extra else r.randint(8, 16)
    uses_start = s.context in ("start_end", "initiated") or "Go" in s.extra
    for i in range(n_events):
        if r.random() < 0.7:
            clock += r.choice([0, 250, 500, 1000, 1000, 1500, 2000, 3500])
            out += [{"time": clock}, expect()]
        if uses_start and r.random() < 0.25 or (uses_start and i == 0):
            out += [{"send": "Go", "event": {"k": r.choice(KEYS[:3])}}, expect()]
        if s.context == "start_end" and r.random() < 0.15:
            out += [{"send": "Halt", "event": {"k": r.choice(KEYS[:3])}}, expect()]
        kind = r.choice(("Ev", "Ev") + s.extra) if s.extra else "Ev"
        out += [{"send": kind, "event": event(r, kind, clock)}, expect()]
    for _ in range(r.randint(1, 3)):  # let windows, batches and outputs run out
        clock += r.choice([1000, 2000, 4000])
        out += [{"time": clock}, expect()]
    return out


KINDS = ["single", "join", "subquery", "pattern", "match", "context", "context_join",
         "output", "named", "variables", "derived", "insert"]


def parse_kinds(text: str) -> dict[str, int]:
    """``join,pattern`` or ``single=1,join=3``: each kind and its weight in the mix."""
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, weight = part.partition("=")
        if name not in KINDS:
            raise ValueError(f"unknown kind {name!r} (kinds: {', '.join(KINDS)})")
        out[name] = int(weight or 1)
        if out[name] < 0:
            raise ValueError(f"negative weight for {name!r}")
    if not any(out.values()):
        raise ValueError("no kind with a positive weight")
    return out


def pick_kind(seed: int, index: int, kinds: dict[str, int]) -> str:
    """The kind of scenario ``index``, drawn apart from its contents, so a single-stream
    scenario reads the same whatever the mix."""
    names = [k for k in KINDS if kinds.get(k)]
    if names == ["single"]:
        return "single"
    r = random.Random(f"{seed}:{index}:kind")
    return r.choices(names, weights=[kinds[k] for k in names])[0]


def scenario(seed: int, index: int, kinds: dict[str, int] | None = None) -> dict:
    """The scenario number ``index`` of a seed (independent of the others)."""
    kind = pick_kind(seed, index, kinds or dict.fromkeys(KINDS, 1))
    r = random.Random(f"{seed}:{index}")
    if kind == "single":
        s = shape(r)
        names = ["ctx", "q"] if len(s.epl) == 2 else ["q"]
        name = f"gen_{seed}_{index:04d}_{s.window}_{s.agg}_{s.output}_{s.stream}_{s.context}"
        schemas = SCHEMAS
    else:
        from tests.oracle import kinds as more

        s = more.SHAPES[kind](r)
        names = s.names
        name = (f"gen_{seed}_{index:04d}_{kind}_{s.detail}_{s.window}_{s.agg}_{s.output}_"
                f"{s.stream}_{s.context}")
        schemas = SCHEMAS_FX
    tags = ["generated", s.window, s.agg, f"output_{s.output}", s.stream, f"context_{s.context}"]
    if kind != "single":
        tags[1:1] = [kind, s.detail]
    return {
        "name": name,
        "source": "tests/oracle/generate.py (expectations recorded from Esper 9)",
        "tags": tags,
        "schemas": schemas,
        "statements": [{"name": n, "epl": e} for n, e in zip(names, s.epl)],
        "steps": steps(r, s, "q"),
    }


def write(seed: int, count: int, out: Path, kinds: dict[str, int] | None = None,
          first: int = 0) -> list[Path]:
    """Write scenarios ``first`` .. ``first + count - 1`` of ``seed`` into ``out`` (the
    kinds mixed by weight, all alike by default); return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(first, first + count):
        doc = scenario(seed, i, kinds)
        path = out / f"{doc['name']}.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False, width=100))
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.oracle.generate",
                                 description="Write generated scenarios for the Esper oracle.")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--first", type=int, default=0, help="index of the first scenario")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help="kinds of scenario and their weights, e.g. 'join,pattern' or "
                         f"'single=1,match=3' (default: {','.join(KINDS)}, alike)")
    args = ap.parse_args(argv)
    try:
        kinds = parse_kinds(args.kinds)
    except ValueError as e:
        ap.error(str(e))
    paths = write(args.seed, args.count, args.out, kinds, args.first)
    print(f"{len(paths)} scenarios written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
