"""User function calls and java.lang.Math methods: type-checked when planned (a
positioned error with a hint), evaluated with the declared conversions, a raise or a
result of another type turned into UserFunctionError."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from app.epl.errors import EplError
from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine
from app.runtime.functions import parse_functions
from operators.user_functions import UserFunctionError

HERE = Path(__file__).resolve().parent
SCHEMAS = {"T": {"s": "string", "x": "double", "n": "int", "k": "long", "b": "boolean"}}
MODULE = '''
def half(x):
    return x / 2

def kind(x):
    return type(x).__name__

def fail(x):
    raise RuntimeError("no " + str(x))

def wrong(x):
    return "a string"

def nullable(x):
    return "null" if x is None else "value"

def key(event):
    return event["n"] * 2

class Total:
    def __init__(self):
        self.sum = 0
    def enter(self, v):
        self.sum += v
    def leave(self, v):
        self.sum -= v
    def value(self):
        return self.sum
'''


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    (tmp_path / "udf_test_module.py").write_text(MODULE)
    fns = parse_functions({
        "half": {"import": "udf_test_module:half", "params": ["double"], "returns": "double"},
        "kind": {"import": "udf_test_module:kind", "params": ["double"], "returns": "string"},
        "fail": {"import": "udf_test_module:fail", "params": ["any"], "returns": "int"},
        "wrong": {"import": "udf_test_module:wrong", "params": ["int"], "returns": "int"},
        "nullable": {"import": "udf_test_module:nullable", "params": ["string"],
                     "returns": "string"},
        "key": {"import": "udf_test_module:key", "params": ["event"], "returns": "long"},
        "total": {"import": "udf_test_module:Total", "params": ["int"], "returns": "long",
                  "kind": "aggregation"},
        "gone": {"import": "udf_test_module:gone", "params": [], "returns": "int"},
    }, tmp_path)
    return Catalog.from_schemas(SCHEMAS, functions=fns)


def run(catalog: Catalog, epl: str, *events: dict[str, Any], setup: str = "") -> list[dict]:
    engine = Engine()
    if setup:
        engine.deploy(plan_statement(catalog, setup, "setup"))
    engine.deploy(plan_statement(catalog, epl, "s"))
    out: list[dict] = []
    engine.listeners.append(lambda stmt, new, old, pid: out.extend(new))
    for e in events:
        engine.send("T", {"s": None, "x": None, "n": None, "k": None, "b": None, **e})
    return out


def rejects(catalog: Catalog, epl: str) -> EplError:
    with pytest.raises(EplError) as info:
        plan_statement(catalog, epl, "bad")
    return info.value


def test_a_call_in_select_and_filter(catalog: Catalog) -> None:
    rows = run(catalog, "select half(x) as h, kind(n) as t from T(half(x) > 1)",
               {"x": 4.0, "n": 3}, {"x": 1.0, "n": 1}, {"x": 10.0, "n": 2})
    assert rows == [{"h": 2.0, "t": "float"}, {"h": 5.0, "t": "float"}]  # int -> double


def test_a_null_argument_is_passed_to_the_function(catalog: Catalog) -> None:
    assert run(catalog, "select nullable(s) as v from T", {}, {"s": "a"}) == [
        {"v": "null"}, {"v": "value"}]


def test_the_whole_event_as_argument(catalog: Catalog) -> None:
    assert run(catalog, "select key(*) as k from T", {"n": 21}) == [{"k": 42}]


def test_a_pattern_tag_as_event_argument(catalog: Catalog) -> None:
    assert run(catalog, "select key(a) as k from pattern [every a=T]", {"n": 5}) == [
        {"k": 10}]


def test_a_user_aggregation_enters_and_leaves(catalog: Catalog) -> None:
    rows = run(catalog, "select total(n) as t from T#length(2)",
               {"n": 1}, {"n": 2}, {"n": 4})
    assert rows == [{"t": 1}, {"t": 3}, {"t": 6}]


def test_a_raise_becomes_a_user_function_error(catalog: Catalog) -> None:
    with pytest.raises(UserFunctionError, match="function fail raised RuntimeError: no 3"):
        run(catalog, "select fail(n) from T", {"n": 3})


def test_a_result_of_another_type_is_an_error(catalog: Catalog) -> None:
    with pytest.raises(UserFunctionError, match="function wrong returned 'a string', "
                                                "declared int"):
        run(catalog, "select wrong(n) from T", {"n": 3})


@pytest.mark.parametrize(("epl", "message", "column", "hint"), [
    ("select half(s) from T", "parameter 1 of 'half' is double; 's' is a string", 13,
     "half takes (double) and returns double"),
    ("select half(x, 1) from T", "function 'half' takes 1 argument(s), 2 given", 8,
     "half takes (double) and returns double"),
    ("select wrong(k) from T", "parameter 1 of 'wrong' is int; 'k' is a long", 14,
     "wrong takes (int) and returns int"),
    ("select half(x || 'a') from T", "parameter 1 of 'half' is double; 'x || 'a'' is a string",
     13, "half takes (double) and returns double"),
    ("select wrong(half(x)) from T", "parameter 1 of 'wrong' is int; 'half(x)' is a double",
     14, "wrong takes (int) and returns int"),
    ("select key(n) from T", "parameter 1 of 'key' takes an event", 12,
     "pass the event as '*', as in key(*), or a pattern tag"),
    ("select half(*) from T", "parameter 1 of 'half' is double, not an event", 8,
     "half takes (double) and returns double"),
    ("select Half(x) from T", "unknown function 'Half'", 8, "did you mean 'half'?"),
    ("select * from T(total(n) > 1)", "aggregation function 'total' is not allowed here", 17,
     None),
    ("select half(distinct x) from T",
     "'distinct' applies to aggregation functions; 'half' is a single-row function", 8, None),
    ("select gone() from T", "function 'gone': module 'udf_test_module' has no 'gone'", 8,
     "define 'gone' in udf_test_module, or correct the name after ':'"),
    ("select Math.abs(s) from T", "Math.abs takes numbers; 's' is a string", 17,
     "write Math.abs(x)"),
    ("select Math.max(x) from T", "Math.max takes 2 argument(s), 1 given", 8,
     "write Math.max(a, b)"),
    ("select Math.random() from T",
     "Math.random() is not allowed: its value differs on every replay", 8,
     "rows must be the same whenever events are replayed; pass a seed-free value from the "
     "event instead"),
    ("select Math.sqr(x) from T", "unknown Math method 'sqr'", 8, "did you mean 'Math.sqrt(x)'?"),
])
def test_calls_are_checked_at_the_call_or_argument(catalog: Catalog, epl: str, message: str,
                                                   column: int, hint: str | None) -> None:
    e = rejects(catalog, epl)
    assert (e.message, e.line, e.column, e.hint) == (message, 1, column, hint)


def test_a_user_hash_function_picks_the_partition(catalog: Catalog) -> None:
    rows = run(catalog, "context H select context.id as cid, n from T",
               {"n": 1}, {"n": 2}, {"n": -3},
               setup="create context H coalesce by key(*) from T granularity 4 preallocate")
    assert rows == [{"cid": 2, "n": 1}, {"cid": 0, "n": 2}, {"cid": 2, "n": -3}]


def test_a_hash_function_must_return_an_integer(catalog: Catalog) -> None:
    e = rejects(catalog, "create context H coalesce by half(x) from T granularity 4")
    assert e.message == "'half' cannot be a hash function: it returns double"
    assert e.column == 30


def test_a_user_aggregation_in_an_expiry_expression(catalog: Catalog) -> None:
    rows = run(catalog, "select count(*) as c from T#expr(total(n) <= 5)",
               {"n": 2}, {"n": 3}, {"n": 1})
    assert rows == [{"c": 1}, {"c": 2}, {"c": 2}]


def test_a_user_aggregation_is_no_window_parameter(catalog: Catalog) -> None:
    e = rejects(catalog, "select * from T#length(total(n))")
    assert e.message == "aggregation function 'total' is not allowed as a parameter of 'length'"


def m(epl_expr: str, **event: Any) -> Any:
    """The value of one Math expression over one T event."""
    catalog = Catalog.from_schemas(SCHEMAS)
    return run(catalog, f"select {epl_expr} as v from T", event)[0]["v"]


def test_math_methods_answer_as_java() -> None:
    assert m("Math.round(x)", x=2.5) == 3
    assert m("Math.round(x)", x=-2.5) == -2
    assert m("Math.round(x)", x=0.49999999999999994) == 0
    assert m("Math.round(x)", x=float("nan")) == 0
    assert m("Math.abs(n)", n=-4) == 4 and type(m("Math.abs(n)", n=-4)) is int
    assert m("Math.max(n, x)", n=3, x=1.0) == 3.0 and type(m("Math.max(n, x)", n=3, x=1.0)) \
        is float
    assert math.isnan(m("Math.max(x, 1.0)", x=float("nan")))
    assert math.isnan(m("Math.sqrt(x)", x=-1.0))
    assert m("Math.log(x)", x=0.0) == -math.inf
    assert m("Math.pow(x, -1)", x=0.0) == math.inf
    assert m("Math.pow(x, 3)", x=-1e200) == -math.inf
    assert m("Math.floor(x)", x=-1.5) == -2.0
    assert m("Math.ceil(x)", x=math.inf) == math.inf
    assert m("Math.signum(x)", x=-3.0) == -1.0
    assert m("java.lang.Math.abs(x)", x=-1.5) == 1.5
    assert m("Math.abs(x)") is None  # a null argument gives null


def test_a_function_failing_while_a_timer_fires_gives_null(
        catalog: Catalog, caplog: pytest.LogCaptureFixture) -> None:
    engine = Engine()
    engine.deploy(plan_statement(
        catalog, "select fail(sum(n)) as v, sum(n) as s from T#time_batch(1 sec)", "s"))
    out: list[dict] = []
    engine.listeners.append(lambda stmt, new, old, pid: out.extend(new))
    engine.send("T", {"s": None, "x": None, "n": 2, "k": None, "b": None})
    with caplog.at_level("WARNING", logger="kepl.engine"):
        engine.advance_time(1000)
    assert out == [{"v": None, "s": 2}]  # no event to dead-letter: the batch goes out
    assert [r.getMessage() for r in caplog.records] == [
        "timer at 1000: function fail raised RuntimeError: no 2 (null instead)"]


def test_a_table_column_of_a_user_aggregation(catalog: Catalog) -> None:
    engine = Engine()
    for i, epl in enumerate([
            "create table Totals (s string primary key, t total(int))",
            "into table Totals select total(n) as t from T group by s",
            "select Totals[s].t as t from T"]):
        engine.deploy(plan_statement(catalog, epl, f"s{i}"))
    out: list[dict] = []
    engine.listeners.append(lambda stmt, new, old, pid: out.extend(
        new if stmt == "s2" else []))
    for s, n in (("a", 1), ("b", 5), ("a", 2)):
        engine.send("T", {"s": s, "x": None, "n": n, "k": None, "b": None})
    assert out == [{"t": 1}, {"t": 5}, {"t": 3}]


def test_a_table_column_takes_only_its_own_user_aggregation(catalog: Catalog) -> None:
    plan_statement(catalog, "create table Totals (s string primary key, t total(int))", "t")
    e = rejects(catalog, "into table Totals select count(*) as t from T group by s")
    assert e.message == "column 't' is total(int); the statement aggregates count(*)"


@pytest.mark.parametrize(("returns", "good", "bad"), [
    ("string", ["a", None], [1, True, b"a"]),
    ("boolean", [True, False, None], [1, 0, "true"]),
    ("int", [1, -(1 << 31), None], [1 << 31, 1.0, True]),
    ("long", [1 << 40, None], [1 << 63, "1"]),
    ("double", [1.5, None], ["1.5", True]),
])
def test_a_result_must_have_the_declared_type(returns: str, good: list[Any],
                                              bad: list[Any]) -> None:
    from app.epl.functions import _result_check
    from app.runtime.functions import FunctionDef

    check = _result_check(FunctionDef("f", "m:f", (), returns))
    assert check is not None
    assert [check(v) for v in good] == good
    for v in bad:
        with pytest.raises(UserFunctionError, match=f"function f returned .*, declared {returns}"):
            check(v)
    if returns == "double":
        assert type(check(2)) is float and check(2) == 2.0
