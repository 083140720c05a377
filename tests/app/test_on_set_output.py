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
    assert out == [
        ("set", [{"a": 3, "b": "y"}], []),
        ("set", [{"a": 3, "b": "y"}], []),
        ("set", [{"a": 9, "b": None}], []),
        ("big", [{"a": 19}], []),
    ]
    assert eng.variables["a"] == 19
