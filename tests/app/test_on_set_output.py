"""``on T set ...`` posts one row per triggering event: each variable it assigns, with its
value after all the assignments (Esper's on-set output)."""

from __future__ import annotations

from app.epl.planner import plan_statement
from app.runtime.catalog import Catalog
from app.runtime.engine import Engine


def test_on_set_posts_the_assigned_values() -> None:
    cat = Catalog.from_schemas({"Setter": {"n": "int", "s": "string"}})
    eng = Engine()
    out: list = []
    eng.listeners.append(lambda s, n, o, p: out.append((s, n, o)))
    for name, epl in (("va", "create variable int a = 1"),
                      ("vb", "create variable string b = 'x'"),
                      ("set", "on Setter as t set a = t.n, b = t.s"),
                      ("big", "on Setter(n > 5) set a = a * 2, a = a + 1")):
        eng.deploy(plan_statement(cat, epl, name))
    eng.send("Setter", {"n": 3, "s": "y"})
    eng.send("Setter", {"n": 3, "s": "y"})
    eng.send("Setter", {"n": 9, "s": None})
    assert [r for r in out if r[0] in ("set", "big")] == [
        ("set", [{"a": 3, "b": "y"}], []),
        ("set", [{"a": 3, "b": "y"}], []),
        ("set", [{"a": 9, "b": None}], []),
        ("big", [{"a": 19}], []),
    ]
    # each run that writes a variable posts it once, unchanged values too
    assert [r for r in out if r[0] in ("va", "vb")] == [
        ("va", [{"a": 3}], [{"a": 1}]), ("vb", [{"b": "y"}], [{"b": "x"}]),
        ("va", [{"a": 3}], [{"a": 3}]), ("vb", [{"b": "y"}], [{"b": "y"}]),
        ("va", [{"a": 9}], [{"a": 3}]), ("vb", [{"b": None}], [{"b": "y"}]),
        ("va", [{"a": 19}], [{"a": 9}]),
    ]
    assert eng.variables["a"] == 19
