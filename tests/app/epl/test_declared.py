"""Expression declarations: parsing, printing, inlining and misuse (Esper reference,
"Expression declarations")."""

from __future__ import annotations

from app.epl import ast as A
from app.epl.parser import parse_statement
from app.epl.planner import plan_statement
from app.epl.printer import to_epl
from app.runtime.engine import Engine
from tests.app.epl.validation import catalog_with, rejects

SCHEMAS = {"Q": {"sym": "string", "px": "double", "n": "int"}}


def test_declarations_parse_and_print_back() -> None:
    for text in ("expression twice {x => x * 2} @name('s') select twice(px) from Q",
                 "expression add {(a, b) -> a + b} expression one {1} select add(one(), n) "
                 "from Q",
                 "expression tot alias for {sum(px)} select tot from Q",
                 "create expression half {(v) => v / 2}",
                 "expression none {() => 3} select none() from Q"):
        node = parse_statement(text)
        assert parse_statement(to_epl(node)) == node
    node = parse_statement("expression add {(a, b) -> a + b} select add(1, 2) from Q")
    assert isinstance(node, A.Declared)
    assert node.expressions[0].params == ("a", "b")
    assert isinstance(parse_statement("create expression t alias for {1}"),
                      A.CreateExpression)


def rows(*statements: str, events: list[dict]) -> list:
    cat = catalog_with(SCHEMAS)
    eng = Engine()
    out: list = []
    eng.listeners.append(lambda s, n, o, p: out.append((s, list(n))))
    for i, epl in enumerate(statements):
        eng.deploy(plan_statement(cat, epl, f"s{i}"))
    for e in events:
        eng.send("Q", e)
    return out


def test_calls_inline_with_their_arguments_and_columns_keep_the_call_text() -> None:
    out = rows("expression twice {x => x * 2} expression mid {q => q.px / 2} "
               "select twice(n), mid(e) as m, twice(twice(n)) as q from Q as e",
               events=[{"sym": "a", "px": 3.0, "n": 5}])
    assert out == [("s0", [{"twice(n)": 10, "m": 1.5, "q": 20}])]


def test_shared_declarations_and_a_local_one_hiding_them() -> None:
    out = rows("create expression thrice {x -> x * 3}",
               "create expression total alias for {sum(px)}",
               "select thrice(total) as t from Q#length(2)",
               "expression thrice {x => x * 30} select thrice(n) as t from Q",
               events=[{"sym": "a", "px": 1.0, "n": 1}, {"sym": "b", "px": 2.0, "n": 2}])
    assert out == [("s2", [{"t": 3.0}]), ("s3", [{"t": 30}]),
                   ("s2", [{"t": 9.0}]), ("s3", [{"t": 60}])]


def test_misuse_is_refused_with_a_position() -> None:
    cat = catalog_with(SCHEMAS)
    e = rejects(cat, "expression f {x => x + n} select f(px) from Q")
    assert "not one of its parameters" in str(e) and (e.line, e.column) == (1, 24)
    e = rejects(cat, "expression f {(x, y) => x + y} select f(px) from Q")
    assert "takes 2 parameter(s), 1 given" in str(e) and (e.line, e.column) == (1, 39)
    e = rejects(cat, "expression t alias for {sum(px)} select t() from Q")
    assert "without parentheses" in str(e)
    e = rejects(cat, "expression f {x => x * 2} select f from Q")
    assert "with parentheses" in str(e)
    e = rejects(cat, "expression f {x => f(x)} select f(px) from Q")
    assert "calls itself" in str(e)
    e = rejects(cat, "expression f {x => x.px} select f(n + 1) from Q")
    assert "needs an event" in str(e)
    e = rejects(cat, "create expression g {x => x + n2}")
    assert "'n2'" in str(e) and (e.line, e.column) == (1, 31)
    plan_statement(cat, "create expression h {x => x}", "h")
    e = rejects(cat, "create expression h {y => y}")
    assert "already been declared" in str(e)


def test_istream_call_is_not_the_stream_keyword() -> None:
    node = parse_statement("select istream() as i, sym from Q")
    assert node.stream_kind is None
    assert node.select_items[0].expr == A.Call("istream")
    assert parse_statement("select istream sym from Q").stream_kind == "istream"
    assert to_epl(node) == "select istream() as i, sym from Q"
